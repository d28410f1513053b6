"""The options table: every setting of the plugin, declared once.

Each :class:`Option` names its flag (``--dflash-*``, in one of the ``--help``
groups of :data:`GROUPS`), its ini key (``dflash_*``), its environment
variable if any, its parser with its bounds (:mod:`pytest_specdecode.config.parsers`),
its default and its help. From :data:`OPTIONS` come the argparse options and
ini keys (:func:`add_options`), the resolution into ``Settings`` with the
source of a bad value (:mod:`pytest_specdecode.config.settings`), the
``--help`` defaults and the options reference, docs/options.md
(:mod:`pytest_specdecode.config.reference`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

import pytest

from pytest_specdecode import facts
from pytest_specdecode.config import cache_setting, load_options, parsers, simulator
from pytest_specdecode.config.hosts import parse_host

RestartMode = Literal["auto", "always", "never"]
ControlMode = Literal["local", "systemd", "script", "external"]
DialectName = Literal["sglang", "sglang-legacy", "ddtree", "template"]
ApiStyle = Literal["chat", "completions"]
Dataset = Literal["builtin", "humaneval"]

RESTART_MODES: tuple[RestartMode, ...] = get_args(RestartMode)
CONTROLS: tuple[ControlMode, ...] = get_args(ControlMode)
# "auto" picks one of CONTROLS from the other options.
CONTROL_MODES: tuple[Literal["auto"] | ControlMode, ...] = ("auto", *CONTROLS)
DIALECTS: tuple[DialectName, ...] = get_args(DialectName)
API_STYLES: tuple[ApiStyle, ...] = get_args(ApiStyle)
DATASETS: tuple[Dataset, ...] = get_args(Dataset)
SANDBOX_MODES = ("auto", "require", "fallback")
LOAD_MODES = ("rounds", "continuous")
CALIBRATION_MODES = ("on", "off")
CLIENT_WAITS = ("auto", "poll", "sleep")
SEARCH_METRICS = ("speedup", "tok_s")
# --dflash-max-repetition: varied prose repeats about 0 of its word 4-grams, code up to
# about 0.3, a phrase repeated to the end near 1 (see docs/throughput.md).
MAX_REPETITION = 0.5
# ...and, with a NONE baseline in the run, this far above the baseline's figure.
REPETITION_MARGIN = 0.2
# --dflash-lossless-margin: BF16 noise in a logit reaches a few hundredths of a nat.
LOSSLESS_MARGIN = 0.05
# Acceptance integrity (report/acceptance.py): a window smaller than the drafter's
# trained one loses up to about a third of the accept length past it by nature; a
# drafter without its window or a batching bug loses most of it.
MAX_ACCEPT_DROP = 0.4

# ``--help`` groups, in the order they are shown: (pytest group name, title).
GROUPS = {
    "target": ("dflash-target", "dflash: target and control (the server, how it restarts)"),
    "configs": ("dflash-configs", "dflash: configs (what each test runs under)"),
    "coding": ("dflash-coding", "dflash: coding correctness (problems, answers, sandbox)"),
    "throughput": ("dflash-throughput", "dflash: throughput (cases, load, baseline)"),
    "gates": ("dflash-gates", "dflash: gates and reports (exit status, JSON report, plots)"),
    "simulator": ("dflash-simulator", "dflash: the bundled simulator (used without --dflash-host)"),
}

Kind = Literal["value", "switch", "list", "optional"]
"""``value``: one text; ``switch``: a flag without a value (ini ``true``/``false``);
``list``: repeatable (one ini line each); ``optional``: a flag whose value may be left out."""


@dataclass(frozen=True)
class Option:
    """One setting: where it may be given, how its text is read, what it is without one."""

    name: str  # the key in resolution; the ``Settings`` attribute where there is one
    flag: str | None  # None: an ini-only setting
    group: str  # a key of GROUPS
    help: str
    parse: Callable[[str], Any] = parsers.text  # a ``list`` option's: one item's
    default: Any = None
    shown: str | None = None  # the default as --help and the docs say it, when not ``default``
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    env: str | None = None
    ini_key: str | None = None  # None: ``dflash_`` + the flag's name (or the setting's)
    kind: Kind = "value"
    aliases: tuple[str, ...] = ()  # more flags, each with its own ini key
    path: bool = False  # an ini value is relative to the ini file's directory
    secret: bool = False  # a bad value is never shown
    ini_help: str | None = None  # when the ini key's meaning is not the flag's

    @property
    def ini(self) -> str:
        return self.ini_key or (_ini_of(self.flag) if self.flag else f"dflash_{self.name}")

    @property
    def ini_names(self) -> tuple[str, ...]:
        """The ini key and those of the aliases."""
        return (self.ini, *(_ini_of(alias) for alias in self.aliases))

    @property
    def dest(self) -> str:
        """The name ``config.getoption`` takes."""
        return _ini_of(self.flag) if self.flag else ""

    @property
    def value_name(self) -> str:
        """The value's name in ``--help`` and the docs: the metavar, or ``{a,b,c}``."""
        return self.metavar or "{" + ",".join(self.choices) + "}"

    @property
    def parser(self) -> Callable[[str], Any]:
        return parsers.choice(self.choices) if self.choices else self.parse

    @property
    def default_text(self) -> str:
        if self.shown is not None:
            return self.shown
        if self.kind == "switch":
            return "False"
        if self.default in (None, ()):
            return "none"
        if isinstance(self.default, tuple):
            return repr(",".join(map(str, self.default)))
        if isinstance(self.default, float | int):
            return f"{self.default:g}"
        return repr(self.default)

    @property
    def full_help(self) -> str:
        """The help as ``--help`` shows it: ending in the default."""
        return f"{self.help} Default: {self.default_text}"


def _ini_of(flag: str) -> str:
    return "dflash_" + flag.removeprefix("--dflash-").replace("-", "_")


_positive = parsers.number(0, inclusive=False)
_non_negative = parsers.number(0)
_count = parsers.integer(1)
_port = parsers.integer(1, 65535)

# The table, laid out by hand: a few lines per setting (the formatter would give every
# argument a line of its own). Within a group, entries are in --help order.
# fmt: off
OPTIONS: tuple[Option, ...] = (
    # -- Where the server is and how it is controlled.
    Option("hosts", "--dflash-host", "target", parse=parse_host, default=(), metavar="HOST[:PORT]",
           env="DFLASH_HOSTS", ini_key="dflash_hosts", kind="list",
           help="GPU host to control over SSH (PORT: its SSH port; the server's HTTP port is "
                "--dflash-port); repeat for several hosts. Without it the server runs locally "
                "(by default the bundled simulator)."),
    Option("port", "--dflash-port", "target", parse=_port, default=30000,
           shown="30000 (a free port for the bundled simulator)", metavar="PORT",
           help="HTTP port of the SGLang server."),
    Option("control", "--dflash-control", "target", choices=CONTROL_MODES, default="auto",
           shown="'auto' (local without --dflash-host, systemd with --dflash-unit, script with "
                 "--dflash-restart-cmd)",
           help="How to bring the server to a config: local process, systemd unit over SSH, your "
                "own script over SSH, or external (never restart)."),
    Option("launch", "--dflash-launch", "target",
           parse=parsers.command("launch command", argv=True),
           shown="the bundled simulator, 'python -m pytest_specdecode.sim'", metavar="COMMAND",
           help="Base launch command; the config's flags are appended. Locally, a leading "
                "'python' is the interpreter running pytest."),
    Option("unit", "--dflash-unit", "target", parse=parsers.unit_name, metavar="UNIT",
           help="systemd unit running SGLang on the host (systemd control)."),
    Option("restart_cmd", "--dflash-restart-cmd", "target",
           parse=parsers.command("restart command"), metavar="TEMPLATE",
           help="Your reconfigure script, run over SSH with shell-quoted values, e.g. "
                "'/opt/reconfig_ddtree.sh {budget} {topk} {window}'."),
    Option("logs_cmd", "--dflash-logs-cmd", "target", parse=parsers.command("logs command"),
           metavar="COMMAND", aliases=("--dflash-log-cmd",),
           help="A command printing the current server process's log: script control runs it over "
                "SSH (errors show it, the drafter's start-up line is checked in it); external "
                "control runs it locally, e.g. 'ssh gpu1 journalctl -u sglang -o cat'."),
    Option("sudo", "--dflash-sudo", "target", parse=parsers.boolean, default=False, kind="switch",
           help="systemd control: write the drop-in and run systemctl with 'sudo -n'."),
    Option("restart", "--dflash-restart", "target", choices=RESTART_MODES, default="auto",
           help="auto: skip the restart when the live server is verified to run the config; "
                "always: restart anyway; never: external server, tests without a config of "
                "their own run under the one it runs, tests of other configs are skipped."),
    Option("restore", "--dflash-restore", "target", parse=parsers.boolean, default=False,
           kind="switch",
           help="At session end remove the systemd drop-in and restart the unit as it was; "
                "without it the drop-in (the last config) stays on the host."),
    Option("ready_timeout", "--dflash-ready-timeout", "target", parse=_positive, default=1800.0,
           metavar="SECONDS", env="DFLASH_READY_TIMEOUT",
           help="Give up waiting for the server to become ready after this long."),
    Option("api_key", "--dflash-api-key", "target", parse=parsers.data_text, metavar="KEY",
           env="DFLASH_API_KEY", secret=True,
           ini_help="The environment variable holding the bearer token, as env:VARIABLE (never "
                    "the key itself: an ini file is committed).",
           help="Bearer token for the server (or env DFLASH_API_KEY)."),
    # SSH (still target and control).
    Option("ssh_user", "--dflash-ssh-user", "target", metavar="USER", env="DFLASH_SSH_USER",
           help="SSH user (else ~/.ssh/config, else the local user)."),
    Option("ssh_port", "--dflash-ssh-port", "target", parse=_port, metavar="PORT",
           help="SSH port (else ~/.ssh/config, else 22)."),
    Option("ssh_key", "--dflash-ssh-key", "target", metavar="PATH", env="DFLASH_SSH_KEY",
           help="SSH private key file (else ~/.ssh/config and the agent)."),
    Option("ssh_accept_new_host_key", "--dflash-ssh-accept-new-host-key", "target",
           parse=parsers.boolean, default=False, kind="switch",
           help="Trust and remember a host key not yet in known_hosts (first contact only: this "
                "skips the check that protects against a man-in-the-middle)."),
    # Long sweeps: starting again, planning, flaky starts.
    Option("resume", "--dflash-resume", "target", shown="off", metavar="REPORT", kind="optional",
           help="Continue a sweep from its JSON report: configs whose tests all have results are "
                "not restarted and their results are carried over; the missing tests run. Without "
                "REPORT (or ini true): the configured --dflash-report."),
    Option("dry_run", "--dflash-dry-run", "target", parse=parsers.boolean, default=False,
           kind="switch",
           help="Collect and validate every config, print what would be run on each host (launch "
                "command, systemd drop-in or script command) in run order; start, stop and send "
                "nothing."),
    Option("start_retries", "--dflash-start-retries", "target", parse=parsers.integer(0), default=1,
           metavar="N",
           help="Retry a start-up failure that looks transient (killed by a signal, CUDA out of "
                "memory, port still in use, SSH unreachable) up to N times; argument and "
                "validation errors are never retried."),
    Option("start_retry_pause", "--dflash-start-retry-pause", "target", parse=_positive,
           default=10.0, metavar="SECONDS",
           help="Pause before each start-up retry (GPU memory takes a while to be freed)."),
    Option("weight_cache", "--dflash-weight-cache", "target", parse=cache_setting.parse,
           default=cache_setting.OFF, shown="'off'", metavar="off|on|keep[,fallback]",
           help="Start one SGLang weight-cache daemon (python -m sglang.srt.weight_cache.daemon "
                "with the launch command's arguments) before the first config, wait until it "
                "is ready, and start every config as its client (--weight-cache-mode client), "
                "so a restart maps the weights instead of loading them; on: stop it at the end, "
                "keep: leave it running. ',fallback': load from disk when the daemon fails "
                "(else every config fails with its one line). Local control (a process) and "
                "systemd (a unit of its own, <unit>-weight-cache.service, sockets in /run)."),
    # -- Configs.
    Option("dialect", "--dflash-dialect", "configs", choices=DIALECTS, default="sglang",
           help="How flags are spelled: sglang (0.5.23), sglang-legacy, ddtree (PR builds) or "
                "template (ini dflash_args / dflash_env)."),
    Option("sglang_version", "--dflash-sglang-version", "configs", choices=facts.VERSIONS,
           shown=f"{facts.VERSIONS[-1]!r} (newest known)",
           help="SGLang version whose option table the sglang dialects check rendered flags "
                "against before any restart."),
    Option("draft_model", "--dflash-draft-model", "configs", parse=parsers.draft_path,
           shown="none (a placeholder path on the bundled simulator)", metavar="PATH",
           help="Drafter model path (--speculative-draft-model-path)."),
    Option("config_override", "--dflash-config", "configs", metavar="K=V,...",
           ini_help="Default config of every test, under markers and --dflash-config, e.g. "
                    "'budget=8,window=2048'.",
           help="Override config keys for every test, e.g. 'budget=8,topk=4,window=2048'."),
    Option("sweep", "--dflash-sweep", "configs", metavar="K=V,V;K=V,...",
           help="Run every dflash test under each combination, e.g. "
                "'budget=4,8,16;window=1024,2048'."),
    Option("search", "--dflash-search", "configs", metavar="K=V,V;K=V,...",
           help="Search the space (the grammar of --dflash-sweep) for the best config: the next "
                "config to start is chosen from the results so far (Optuna: needs the 'search' "
                "extra), the configs never visited are skipped."),
    Option("search_restarts", "--dflash-search-restarts", "configs", parse=_count,
           shown="a third of the space, at least 3", metavar="N",
           help="Start at most N configs of the --dflash-search space."),
    Option("search_budget", "--dflash-search-budget", "configs", parse=parsers.duration,
           shown="none (the restart budget)", metavar="DURATION",
           help="Stop the --dflash-search once its configs have taken this long, e.g. 2h, 90m, "
                "30s: each config counts its measured start (restart) and measurement seconds, "
                "so a config that is slower to start counts more; instead of "
                "--dflash-search-restarts."),
    Option("search_metric", "--dflash-search-metric", "configs", choices=SEARCH_METRICS,
           shown="speedup when the run has a baseline (algorithm NONE or --dflash-baseline), else "
                 "tok_s",
           help="What the search maximises: the geometric mean over the config's throughput cases "
                "of its speedup or output tok/s."),
    Option("search_seed", "--dflash-search-seed", "configs", parse=parsers.integer(0),
           shown="none (a new choice each run)", metavar="N",
           help="Seed of the search's sampler: the same results give the same choices."),
    Option("args_template", None, "configs", ini_key="dflash_args",
           help="Flag template of the 'template' dialect, e.g. '--my-budget {budget} --my-window "
                "{window}'."),
    Option("env_template", None, "configs", ini_key="dflash_env",
           help="Environment template of the 'template' dialect, e.g. 'MY_TOPK={topk}'."),
    # -- Coding correctness.
    Option("problem_files", "--dflash-problems", "coding", default=(), metavar="TOML", kind="list",
           path=True,
           help="Add coding problems from a TOML file ([[problem]] tables with name, prompt, "
                "entry_point, reference, args, cases); repeatable. A conftest.py can add Problem "
                "objects with the pytest_dflash_problems hook."),
    Option("dataset", "--dflash-dataset", "coding", choices=DATASETS, default="builtin",
           help="Coding problem set."),
    Option("samples", "--dflash-samples", "coding", parse=_count, default=1, metavar="N",
           help="Answers per problem (with --dflash-temperature > 0) for pass@k."),
    Option("temperature", "--dflash-temperature", "coding", parse=_non_negative, default=0.0,
           metavar="T", help="Sampling temperature of coding answers."),
    Option("answer_timeout", "--dflash-answer-timeout", "coding", parse=parsers.number(0.1),
           default=10.0, metavar="SECONDS",
           help="Wall-time limit for checking one answer in the sandbox (at least 0.1)."),
    Option("check_workers", "--dflash-check-workers", "coding", parse=_count,
           shown="every core this process may use (split among xdist workers)", metavar="N",
           help="Coding answers checked at once, each in a warm sandbox of its own."),
    Option("sandbox", "--dflash-sandbox", "coding", choices=SANDBOX_MODES, default="auto",
           help="How coding answers are isolated: auto (bubblewrap where it works, else a weaker "
                "fallback, with a warning), require (bubblewrap or a usage error: for CI), "
                "fallback (rlimits and a process group only)."),
    Option("max_tokens", "--dflash-max-tokens", "coding", parse=_count, default=1024, metavar="N",
           help="Max tokens of a coding answer."),
    Option("api", "--dflash-api", "coding", choices=API_STYLES, default="chat",
           help="Ask through chat completions or plain completions (base models)."),
    Option("system_prompt", None, "coding", shown="ask for one fenced Python function",
           help="System prompt of coding questions (chat)."),
    Option("prompt_template", None, "coding", parse=parsers.prompt_template, default="{prompt}",
           help="User prompt of coding questions; {prompt} is the problem's text."),
    # -- Throughput.
    Option("contexts", "--dflash-contexts", "throughput", parse=parsers.int_list,
           default=(60, 1024, 4096), metavar="N,N,...",
           help="Prompt lengths in tokens of throughput cases."),
    Option("concurrency", "--dflash-concurrency", "throughput", parse=parsers.int_list,
           default=(1, 8, 32), metavar="N,N,...", help="Concurrent requests of throughput cases."),
    Option("output_tokens", "--dflash-output-tokens", "throughput", parse=_count,
           shown=f"{simulator.OUTPUT_TOKENS} ({simulator.SIMULATOR_OUTPUT_TOKENS} on the bundled "
                 "simulator)", metavar="N",
           help="Output tokens per request in throughput cases (ignore_eos)."),
    Option("rounds", "--dflash-rounds", "throughput", parse=_count, default=3, metavar="N",
           help="Measured rounds per throughput case (plus one warm-up)."),
    Option("domains", "--dflash-domains", "throughput", parse=load_options.parse_domains,
           default=load_options.DEFAULT_DOMAINS, metavar="NAME,NAME,...",
           help="Prompt domains of throughput cases, from the prompt set shipped with the plugin: "
                "code, math, chat, summary, or all; each domain is a case of its own "
                "(ctx1024-c8-code)."),
    Option("request_rates", "--dflash-request-rate", "throughput", parse=load_options.parse_rates,
           default=(), shown="none (closed-loop concurrency only)", metavar="R,R,...",
           help="Also run cases driven by request rate: Poisson arrivals at R requests/s "
                "(seeded), e.g. '4,8,16'."),
    Option("max_concurrency", "--dflash-max-concurrency", "throughput", parse=_count,
           shown="no limit", metavar="N",
           help="Requests in flight at most in request-rate cases (later arrivals wait)."),
    Option("rate_requests", "--dflash-rate-requests", "throughput", parse=_count, default=16,
           metavar="N", help="Requests per round of a request-rate case."),
    Option("load_mode", "--dflash-load-mode", "throughput", choices=LOAD_MODES, default="rounds",
           help="Closed-loop rounds: 'rounds' releases the case's C requests together and waits "
                "for all; 'continuous' keeps C in flight for --dflash-continuous-requests "
                "requests (SGLang bench's --max-concurrency), so the server never idles at a "
                "round's tail."),
    Option("continuous_requests", "--dflash-continuous-requests", "throughput", parse=_count,
           shown="4 x the case's concurrency", metavar="N",
           help="Requests per round in --dflash-load-mode continuous."),
    Option("slo", "--dflash-slo", "throughput", parse=load_options.parse_slo, default=(),
           metavar="METRIC:TIME,...",
           help="Service-level objectives per request, e.g. 'ttft:500ms,tpot:30ms,e2e:2s': adds "
                "goodput (requests/s meeting all) and attainment per case."),
    Option("client_wait", "--dflash-client-wait", "throughput", choices=CLIENT_WAITS,
           default="auto",
           help="How the load client's loop waits for the server's bytes in a round: 'poll' never "
                "sleeps (no 0.2-2 ms wake-up in any TTFT/ITL, but it takes a core), 'sleep' waits "
                "in the kernel, 'auto' polls for a server on another machine and sleeps for one "
                "on a loopback address (which needs this machine's cores)."),
    Option("client_calibration", "--dflash-client-calibration", "throughput",
           choices=CALIBRATION_MODES, default="on",
           help="Before the first throughput case, measure the load client's own ceiling against "
                "a null server (the bundled simulator at time scale 0, on 127.0.0.1, about 3 s); "
                "a case near that ceiling, or on a loaded machine, is client-limited and left out "
                "of the verdict. 'off' skips it."),
    Option("baseline", "--dflash-baseline", "throughput", metavar="PATH|NNNN",
           help="A saved pytest-benchmark run of the non-speculative baseline (algorithm NONE) to "
                "compute speedups against when this run has none."),
    # -- Gates and reports.
    Option("min_pass_rate", "--dflash-min-pass-rate", "gates", parse=parsers.fraction,
           shown="no gate", metavar="RATE", env="DFLASH_MIN_PASS_RATE",
           help="Exit 1 when a config's coding pass rate is below RATE (0.8 or 80%)."),
    Option("compare", "--dflash-compare", "gates",
           shown="none (--benchmark-compare's run, if given)", metavar="PATH|NNNN|NAME",
           help="Compare throughput with a saved pytest-benchmark run: a .json file, a run "
                "number, the name given to --benchmark-save, or 'latest'."),
    Option("compare_fail", "--dflash-compare-fail", "gates", default=(), metavar="METRIC:DROP",
           kind="list",
           help="Exit 1 when a case regresses against --dflash-compare (else --benchmark-compare) "
                "beyond the 95% interval, e.g. 'tok_s:5%' or 'accept_length:0.2'; repeatable."),
    Option("min_accept_length", "--dflash-min-accept-length", "gates", parse=_positive,
           shown="no gate", metavar="X", help="Exit 1 when a config's accept length is below X."),
    Option("max_repetition", "--dflash-max-repetition", "gates", parse=parsers.fraction,
           default=MAX_REPETITION, metavar="FRACTION",
           help="Exit 1 when a speculative config's output is degenerate: its share of repeated "
                "word 4-grams (character 8-grams where words are few) in a throughput case is "
                "above FRACTION (0.5 or 50%) and, when the "
                f"run has a NONE baseline, more than {REPETITION_MARGIN:g} above the baseline's; "
                "such a config never wins the verdict."),
    Option("lossless_margin", "--dflash-lossless-margin", "gates", parse=_positive,
           default=LOSSLESS_MARGIN, metavar="NATS",
           help="The lossless gate counts a config's first divergence from the NONE baseline as "
                "engine numerics, not a drafter defect, where the top-2 logprob margin there is "
                "below NATS (or the baseline's own runs part there); any defect fails the run."),
    Option("max_accept_drop", "--dflash-max-accept-drop", "gates", parse=parsers.fraction,
           default=MAX_ACCEPT_DROP, metavar="FRACTION",
           help="Exit 1 when a speculative config's accept length for the same prompts falls "
                "at a higher concurrency than the lowest, or past the config's window against "
                "within it, by more than FRACTION (0.4 or 40%) with the whole 95% interval "
                "beyond it; judged whenever the run has several loads or contexts past the "
                "window, 1 turns it off."),
    Option("report", "--dflash-report", "gates", default=".dflash/report.json", metavar="PATH",
           help="Write the JSON run report here, updated after every test, plus a copy named "
                "after the run's start time; {now} (start time) or {n} (next free number) in the "
                "path name each run's file instead."),
    Option("policy", "--dflash-policy", "gates", parse=parsers.policy_path,
           default=".dflash/policy.json", metavar="PATH",
           help="Write the speculation policy (a config per concurrency band, from the verdict; "
                "never one below 0.95x of NONE's tok/s in its band) here as JSON; 'none' writes "
                "none."),
    Option("plot", "--dflash-plot", "gates", metavar="DIR",
           help="Write PNG plots here (needs the 'plot' extra)."),
    Option("html", "--dflash-html", "gates", parse=parsers.html_path, default=".dflash/report.html",
           metavar="PATH",
           help="Write the run's self-contained HTML report here at the end of the run (the "
                "answer first: verdict and policy, then the config x load matrix, latency, "
                "warnings, charts; opens offline); 'none' writes none."),
    # -- The bundled simulator: its own --sim-* flags on its launch line.
    Option("sim_time_scale", "--dflash-sim-time-scale", "simulator", parse=_non_negative,
           shown=f"{simulator.SIMULATOR_TIME_SCALE:g} (unless --dflash-launch or "
                 "--dflash-sim-args sets it)", metavar="X",
           help="The simulator's --sim-time-scale: multiplies its modelled GPU time (0.5 runs "
                "twice as fast as the GPU it models; 0: no delay)."),
    Option("sim_quality", "--dflash-sim-quality", "simulator", parse=parsers.fraction, shown="1",
           metavar="Q",
           help="The simulator's --sim-quality: the share of its coding answers that are right."),
    Option("sim_answers", "--dflash-sim-answers", "simulator", metavar="JSON", path=True,
           help="The simulator's --sim-answers: a JSON list of {\"match\": ..., \"response\": "
                "...} replies, e.g. for your own problems (without it the simulator answers "
                "problems it does not know with no code)."),
    Option("sim_fault", "--dflash-sim-fault", "simulator", default=(), metavar="FAULT", kind="list",
           help="The simulator's --sim-fault (crash-on-start, hang-on-load, die-after:N, "
                "unhealthy, slow-first-token:S, lossy, lossy:RATE, near-tie, stale-config, "
                "drafter-ignores-window, degenerate-drafter[:SHAPE]); repeatable."),
    Option("sim_restart_noise", "--dflash-sim-restart-noise", "simulator", parse=parsers.below_one,
           shown="0", metavar="F",
           help="The simulator's --sim-restart-noise: each server start runs at its own speed, "
                "within 1 +- F (e.g. 0.06), the starts counted in .dflash/sim-starts so separate "
                "runs get separate factors."),
    Option("sim_extra_args", "--dflash-sim-args", "simulator",
           parse=parsers.command("simulator arguments", argv=True), metavar="ARGS",
           help="More simulator options, appended to its launch line, e.g. '--sim-load-seconds 0 "
                "--sim-seed 3' (see python -m pytest_specdecode.sim --help)."),
)
# fmt: on

BY_NAME = {option.name: option for option in OPTIONS}
DEFAULTS: dict[str, Any] = {option.name: option.default for option in OPTIONS}
"""Each setting's value when nothing sets it; ``Settings`` takes its defaults from here."""


def add_options(parser: pytest.Parser) -> None:
    """Register the ``--dflash-*`` options (one ``--help`` group per part) and their
    ``dflash_*`` ini keys, from :data:`OPTIONS`."""
    groups = {key: parser.getgroup(*names) for key, names in GROUPS.items()}
    for option in OPTIONS:
        if option.flag is not None:
            groups[option.group].addoption(
                option.flag, *option.aliases, dest=option.dest, **_argparse(option)
            )
        for key in option.ini_names:
            if option.kind == "list":
                parser.addini(key, _ini_help(option, key), type="linelist", default=[])
            else:
                parser.addini(key, _ini_help(option, key), type="string", default="")


def _argparse(option: Option) -> dict[str, Any]:
    # No type= and no choices=: the value is checked at resolution, by the same parser as
    # the ini key's and the environment's, so a bad value reads the same from each.
    help = option.full_help.replace("%", "%%")
    if option.kind == "switch":
        return {"action": "store_true", "default": None, "help": help}
    metavar = option.value_name
    if option.kind == "list":
        return {"action": "append", "default": [], "metavar": metavar, "help": help}
    if option.kind == "optional":
        return {"nargs": "?", "const": True, "default": None, "metavar": metavar, "help": help}
    return {"default": None, "metavar": metavar, "help": help}


def _ini_help(option: Option, key: str) -> str:
    if option.flag is None:
        return option.full_help
    if option.ini_help is not None:
        return option.ini_help
    flag = option.flag if key == option.ini else option.aliases[option.ini_names.index(key) - 1]
    head = option.help.split("; ")[0].rstrip(".")
    choices = f"{', '.join(option.choices)}; " if option.choices else ""
    return f"{head} ({choices}as {flag})."
