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
from pytest_specdecode.config import load_options, parsers, simulator
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
SEARCH_METRICS = ("speedup", "tok_s")
SGLANG_VERSIONS = facts.VERSIONS
# --dflash-max-repetition: varied prose repeats about 0 of its word 4-grams, code up to
# about 0.3, a phrase repeated to the end near 1 (see docs/throughput.md).
MAX_REPETITION = 0.5
# ...and, with a NONE baseline in the run, this far above the baseline's figure.
REPETITION_MARGIN = 0.2

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


def _choices(values: tuple[str, ...]) -> str:
    return "{" + ",".join(values) + "}"


_positive = parsers.number(0, inclusive=False)
_non_negative = parsers.number(0)
_count = parsers.integer(1)
_port = parsers.integer(1, 65535)

OPTIONS: tuple[Option, ...] = (
    # -- Where the server is and how it is controlled.
    Option(
        "hosts",
        "--dflash-host",
        "target",
        "GPU host to control over SSH; repeat for several hosts. Without it the server runs "
        "locally (by default the bundled simulator).",
        parse=parse_host,
        default=(),
        metavar="HOST[:PORT]",
        env="DFLASH_HOSTS",
        ini_key="dflash_hosts",
        kind="list",
    ),
    Option(
        "port",
        "--dflash-port",
        "target",
        "HTTP port of the SGLang server.",
        parse=_port,
        default=30000,
        shown="30000 (a free port for the bundled simulator)",
        metavar="PORT",
    ),
    Option(
        "control",
        "--dflash-control",
        "target",
        "How to bring the server to a config: local process, systemd unit over SSH, your own "
        "script over SSH, or external (never restart).",
        choices=CONTROL_MODES,
        default="auto",
        shown="'auto' (local without --dflash-host, systemd with --dflash-unit, script with "
        "--dflash-restart-cmd)",
    ),
    Option(
        "launch",
        "--dflash-launch",
        "target",
        "Base launch command; the config's flags are appended. Locally, a leading 'python' is "
        "the interpreter running pytest.",
        parse=parsers.command("launch command", argv=True),
        shown="the bundled simulator, 'python -m pytest_specdecode.sim'",
        metavar="COMMAND",
    ),
    Option(
        "unit",
        "--dflash-unit",
        "target",
        "systemd unit running SGLang on the host (systemd control).",
        parse=parsers.unit_name,
        metavar="UNIT",
    ),
    Option(
        "restart_cmd",
        "--dflash-restart-cmd",
        "target",
        "Your reconfigure script, run over SSH with shell-quoted values, e.g. "
        "'/opt/reconfig_ddtree.sh {budget} {topk} {window}'.",
        parse=parsers.command("restart command"),
        metavar="TEMPLATE",
    ),
    Option(
        "logs_cmd",
        "--dflash-logs-cmd",
        "target",
        "A command printing the current server process's log: script control runs it over "
        "SSH (errors show it, the drafter's start-up line is checked in it); external control "
        "runs it locally, e.g. 'ssh gpu1 journalctl -u sglang -o cat'.",
        parse=parsers.command("logs command"),
        metavar="COMMAND",
        aliases=("--dflash-log-cmd",),
    ),
    Option(
        "sudo",
        "--dflash-sudo",
        "target",
        "systemd control: write the drop-in and run systemctl with 'sudo -n'.",
        parse=parsers.boolean,
        default=False,
        kind="switch",
    ),
    Option(
        "restart",
        "--dflash-restart",
        "target",
        "auto: skip the restart when the live server is verified to run the config; always: "
        "restart anyway; never: external server, skip tests of other configs.",
        choices=RESTART_MODES,
        default="auto",
    ),
    Option(
        "restore",
        "--dflash-restore",
        "target",
        "At session end remove the systemd drop-in and restart the unit as it was; without it "
        "the drop-in (the last config) stays on the host.",
        parse=parsers.boolean,
        default=False,
        kind="switch",
    ),
    Option(
        "ready_timeout",
        "--dflash-ready-timeout",
        "target",
        "Give up waiting for the server to become ready after this long.",
        parse=_positive,
        default=1800.0,
        metavar="SECONDS",
        env="DFLASH_READY_TIMEOUT",
    ),
    Option(
        "api_key",
        "--dflash-api-key",
        "target",
        "Bearer token for the server (or env DFLASH_API_KEY).",
        parse=parsers.data_text,
        metavar="KEY",
        env="DFLASH_API_KEY",
        secret=True,
        ini_help="The environment variable holding the bearer token, as env:VARIABLE (never "
        "the key itself: an ini file is committed).",
    ),
    # SSH (still target and control).
    Option(
        "ssh_user",
        "--dflash-ssh-user",
        "target",
        "SSH user (else ~/.ssh/config, else the local user).",
        metavar="USER",
        env="DFLASH_SSH_USER",
    ),
    Option(
        "ssh_port",
        "--dflash-ssh-port",
        "target",
        "SSH port (else ~/.ssh/config, else 22).",
        parse=_port,
        metavar="PORT",
    ),
    Option(
        "ssh_key",
        "--dflash-ssh-key",
        "target",
        "SSH private key file (else ~/.ssh/config and the agent).",
        metavar="PATH",
        env="DFLASH_SSH_KEY",
    ),
    Option(
        "ssh_accept_new_host_key",
        "--dflash-ssh-accept-new-host-key",
        "target",
        "Trust and remember a host key not yet in known_hosts (first contact only: this skips "
        "the check that protects against a man-in-the-middle).",
        parse=parsers.boolean,
        default=False,
        kind="switch",
    ),
    # Long sweeps: starting again, planning, flaky starts.
    Option(
        "resume",
        "--dflash-resume",
        "target",
        "Continue a sweep from its JSON report: configs whose tests all have results are not "
        "restarted and their results are carried over; the missing tests run. Without REPORT "
        "(or ini true): the configured --dflash-report.",
        shown="off",
        metavar="REPORT",
        kind="optional",
    ),
    Option(
        "dry_run",
        "--dflash-dry-run",
        "target",
        "Collect and validate every config, print what would be run on each host (launch "
        "command, systemd drop-in or script command) in run order; start, stop and send "
        "nothing.",
        parse=parsers.boolean,
        default=False,
        kind="switch",
    ),
    Option(
        "start_retries",
        "--dflash-start-retries",
        "target",
        "Retry a start-up failure that looks transient (killed by a signal, CUDA out of "
        "memory, port still in use, SSH unreachable) up to N times; argument and validation "
        "errors are never retried.",
        parse=parsers.integer(0),
        default=1,
        metavar="N",
    ),
    Option(
        "start_retry_pause",
        "--dflash-start-retry-pause",
        "target",
        "Pause before each start-up retry (GPU memory takes a while to be freed).",
        parse=_positive,
        default=10.0,
        metavar="SECONDS",
    ),
    # -- Configs.
    Option(
        "dialect",
        "--dflash-dialect",
        "configs",
        "How flags are spelled: sglang (0.5.23), sglang-legacy, ddtree (PR builds) or "
        "template (ini dflash_args / dflash_env).",
        choices=DIALECTS,
        default="sglang",
    ),
    Option(
        "sglang_version",
        "--dflash-sglang-version",
        "configs",
        "SGLang version whose option table the sglang dialects check rendered flags against "
        "before any restart.",
        choices=SGLANG_VERSIONS,
        shown=f"{SGLANG_VERSIONS[-1]!r} (newest known)",
    ),
    Option(
        "draft_model",
        "--dflash-draft-model",
        "configs",
        "Drafter model path (--speculative-draft-model-path).",
        parse=parsers.data_text,
        shown="none (a placeholder path on the bundled simulator)",
        metavar="PATH",
    ),
    Option(
        "config_override",
        "--dflash-config",
        "configs",
        "Override config keys for every test, e.g. 'budget=8,topk=4,window=2048'.",
        metavar="K=V,...",
        ini_help="Default config of every test, under markers and --dflash-config, e.g. "
        "'budget=8,window=2048'.",
    ),
    Option(
        "sweep",
        "--dflash-sweep",
        "configs",
        "Run every dflash test under each combination, e.g. 'budget=4,8,16;window=1024,2048'.",
        metavar="K=V,V;K=V,...",
    ),
    Option(
        "search",
        "--dflash-search",
        "configs",
        "Search the space (the grammar of --dflash-sweep) for the best config: the next "
        "config to start is chosen from the results so far (Optuna), the configs never "
        "visited are skipped.",
        metavar="K=V,V;K=V,...",
    ),
    Option(
        "search_restarts",
        "--dflash-search-restarts",
        "configs",
        "Start at most N configs of the --dflash-search space.",
        parse=_count,
        shown="a third of the space, at least 3",
        metavar="N",
    ),
    Option(
        "search_metric",
        "--dflash-search-metric",
        "configs",
        "What the search maximises: the geometric mean over the config's throughput cases of "
        "its speedup or output tok/s.",
        choices=SEARCH_METRICS,
        shown="speedup when the run has a baseline (algorithm NONE or --dflash-baseline), "
        "else tok_s",
    ),
    Option(
        "search_seed",
        "--dflash-search-seed",
        "configs",
        "Seed of the search's sampler: the same results give the same choices.",
        parse=parsers.integer(0),
        shown="none (a new choice each run)",
        metavar="N",
    ),
    Option(
        "args_template",
        None,
        "configs",
        "Flag template of the 'template' dialect, e.g. '--my-budget {budget} --my-window "
        "{window}'.",
        ini_key="dflash_args",
    ),
    Option(
        "env_template",
        None,
        "configs",
        "Environment template of the 'template' dialect, e.g. 'MY_TOPK={topk}'.",
        ini_key="dflash_env",
    ),
    # -- Coding correctness.
    Option(
        "problem_files",
        "--dflash-problems",
        "coding",
        "Add coding problems from a TOML file ([[problem]] tables with name, prompt, "
        "entry_point, reference, args, cases); repeatable. A conftest.py can add Problem "
        "objects with the pytest_dflash_problems hook.",
        default=(),
        metavar="TOML",
        kind="list",
        path=True,
    ),
    Option(
        "dataset",
        "--dflash-dataset",
        "coding",
        "Coding problem set.",
        choices=DATASETS,
        default="builtin",
    ),
    Option(
        "samples",
        "--dflash-samples",
        "coding",
        "Answers per problem (with --dflash-temperature > 0) for pass@k.",
        parse=_count,
        default=1,
        metavar="N",
    ),
    Option(
        "temperature",
        "--dflash-temperature",
        "coding",
        "Sampling temperature of coding answers.",
        parse=_non_negative,
        default=0.0,
        metavar="T",
    ),
    Option(
        "answer_timeout",
        "--dflash-answer-timeout",
        "coding",
        "Wall-time limit for checking one answer in the sandbox (at least 0.1).",
        parse=parsers.number(0.1),
        default=10.0,
        metavar="SECONDS",
    ),
    Option(
        "check_workers",
        "--dflash-check-workers",
        "coding",
        "Coding answers checked at once, each in a warm sandbox of its own.",
        parse=_count,
        shown="every core this process may use (split among xdist workers)",
        metavar="N",
    ),
    Option(
        "sandbox",
        "--dflash-sandbox",
        "coding",
        "How coding answers are isolated: auto (bubblewrap where it works, else a weaker "
        "fallback, with a warning), require (bubblewrap or a usage error: for CI), fallback "
        "(rlimits and a process group only).",
        choices=SANDBOX_MODES,
        default="auto",
    ),
    Option(
        "max_tokens",
        "--dflash-max-tokens",
        "coding",
        "Max tokens of a coding answer.",
        parse=_count,
        default=1024,
        metavar="N",
    ),
    Option(
        "api",
        "--dflash-api",
        "coding",
        "Ask through chat completions or plain completions (base models).",
        choices=API_STYLES,
        default="chat",
    ),
    Option(
        "system_prompt",
        None,
        "coding",
        "System prompt of coding questions (chat).",
        shown="ask for one fenced Python function",
    ),
    Option(
        "prompt_template",
        None,
        "coding",
        "User prompt of coding questions; {prompt} is the problem's text.",
        parse=parsers.prompt_template,
        default="{prompt}",
    ),
    # -- Throughput.
    Option(
        "contexts",
        "--dflash-contexts",
        "throughput",
        "Prompt lengths in tokens of throughput cases.",
        parse=parsers.int_list,
        default=(60, 1024, 4096),
        metavar="N,N,...",
    ),
    Option(
        "concurrency",
        "--dflash-concurrency",
        "throughput",
        "Concurrent requests of throughput cases.",
        parse=parsers.int_list,
        default=(1, 8, 32),
        metavar="N,N,...",
    ),
    Option(
        "output_tokens",
        "--dflash-output-tokens",
        "throughput",
        "Output tokens per request in throughput cases (ignore_eos).",
        parse=_count,
        shown=f"{simulator.OUTPUT_TOKENS} ({simulator.SIMULATOR_OUTPUT_TOKENS} on the bundled "
        "simulator)",
        metavar="N",
    ),
    Option(
        "rounds",
        "--dflash-rounds",
        "throughput",
        "Measured rounds per throughput case (plus one warm-up).",
        parse=_count,
        default=3,
        metavar="N",
    ),
    Option(
        "domains",
        "--dflash-domains",
        "throughput",
        "Prompt domains of throughput cases, from the prompt set shipped with the plugin: "
        "code, math, chat, summary, or all; each domain is a case of its own "
        "(ctx1024-c8-code).",
        parse=load_options.parse_domains,
        default=load_options.DEFAULT_DOMAINS,
        metavar="NAME,NAME,...",
    ),
    Option(
        "request_rates",
        "--dflash-request-rate",
        "throughput",
        "Also run cases driven by request rate: Poisson arrivals at R requests/s (seeded), "
        "e.g. '4,8,16'.",
        parse=load_options.parse_rates,
        default=(),
        shown="none (closed-loop concurrency only)",
        metavar="R,R,...",
    ),
    Option(
        "max_concurrency",
        "--dflash-max-concurrency",
        "throughput",
        "Requests in flight at most in request-rate cases (later arrivals wait).",
        parse=_count,
        shown="no limit",
        metavar="N",
    ),
    Option(
        "rate_requests",
        "--dflash-rate-requests",
        "throughput",
        "Requests per round of a request-rate case.",
        parse=_count,
        default=16,
        metavar="N",
    ),
    Option(
        "load_mode",
        "--dflash-load-mode",
        "throughput",
        "Closed-loop rounds: 'rounds' releases the case's C requests together and waits for "
        "all; 'continuous' keeps C in flight for --dflash-continuous-requests requests (SGLang "
        "bench's --max-concurrency), so the server never idles at a round's tail.",
        choices=LOAD_MODES,
        default="rounds",
    ),
    Option(
        "continuous_requests",
        "--dflash-continuous-requests",
        "throughput",
        "Requests per round in --dflash-load-mode continuous.",
        parse=_count,
        shown="4 x the case's concurrency",
        metavar="N",
    ),
    Option(
        "slo",
        "--dflash-slo",
        "throughput",
        "Service-level objectives per request, e.g. 'ttft:500ms,tpot:30ms,e2e:2s': adds "
        "goodput (requests/s meeting all) and attainment per case.",
        parse=load_options.parse_slo,
        default=(),
        metavar="METRIC:TIME,...",
    ),
    Option(
        "baseline",
        "--dflash-baseline",
        "throughput",
        "A saved pytest-benchmark run of the non-speculative baseline (algorithm NONE) to "
        "compute speedups against when this run has none.",
        metavar="PATH|NNNN",
    ),
    # -- Gates and reports.
    Option(
        "min_pass_rate",
        "--dflash-min-pass-rate",
        "gates",
        "Exit 1 when a config's coding pass rate is below RATE (0.8 or 80%).",
        parse=parsers.fraction,
        shown="no gate",
        metavar="RATE",
        env="DFLASH_MIN_PASS_RATE",
    ),
    Option(
        "compare",
        "--dflash-compare",
        "gates",
        "Compare throughput with a saved pytest-benchmark run: a .json file, a run number, "
        "the name given to --benchmark-save, or 'latest'.",
        shown="none (--benchmark-compare's run, if given)",
        metavar="PATH|NNNN|NAME",
    ),
    Option(
        "compare_fail",
        "--dflash-compare-fail",
        "gates",
        "Exit 1 when a case regresses against --dflash-compare (else --benchmark-compare) "
        "beyond the 95% interval, e.g. 'tok_s:5%' or 'accept_length:0.2'; repeatable.",
        default=(),
        metavar="METRIC:DROP",
        kind="list",
    ),
    Option(
        "min_accept_length",
        "--dflash-min-accept-length",
        "gates",
        "Exit 1 when a config's accept length is below X.",
        parse=_positive,
        shown="no gate",
        metavar="X",
    ),
    Option(
        "max_repetition",
        "--dflash-max-repetition",
        "gates",
        "Exit 1 when a speculative config's output is degenerate: its share of repeated word "
        "4-grams in a throughput case is above FRACTION (0.5 or 50%) and, when the run has a "
        f"NONE baseline, more than {REPETITION_MARGIN:g} above the baseline's; such a config "
        "never wins the verdict.",
        parse=parsers.fraction,
        default=MAX_REPETITION,
        metavar="FRACTION",
    ),
    Option(
        "report",
        "--dflash-report",
        "gates",
        "Write the JSON run report here, updated after every test, plus a copy named after "
        "the run's start time; {now} (start time) or {n} (next free number) in the path name "
        "each run's file instead.",
        default=".dflash/report.json",
        metavar="PATH",
    ),
    Option(
        "plot",
        "--dflash-plot",
        "gates",
        "Write PNG plots here (needs the 'plot' extra).",
        metavar="DIR",
    ),
    Option(
        "html",
        "--dflash-html",
        "gates",
        "Write the run's self-contained HTML report here at the end of the run (verdict, "
        "configs, charts; opens offline); 'none' writes none.",
        parse=parsers.html_path,
        default=".dflash/report.html",
        metavar="PATH",
    ),
    # -- The bundled simulator: its own --sim-* flags on its launch line.
    Option(
        "sim_time_scale",
        "--dflash-sim-time-scale",
        "simulator",
        "The simulator's --sim-time-scale: multiplies its modelled GPU time (0.5 runs twice "
        "as fast as the GPU it models; 0: no delay).",
        parse=_non_negative,
        shown=f"{simulator.SIMULATOR_TIME_SCALE:g} (unless --dflash-launch or "
        "--dflash-sim-args sets it)",
        metavar="X",
    ),
    Option(
        "sim_quality",
        "--dflash-sim-quality",
        "simulator",
        "The simulator's --sim-quality: the share of its coding answers that are right.",
        parse=parsers.fraction,
        shown="1",
        metavar="Q",
    ),
    Option(
        "sim_answers",
        "--dflash-sim-answers",
        "simulator",
        'The simulator\'s --sim-answers: a JSON list of {"match": ..., "response": ...} '
        "replies, e.g. for your own problems (without it the simulator answers problems it "
        "does not know with no code).",
        metavar="JSON",
        path=True,
    ),
    Option(
        "sim_fault",
        "--dflash-sim-fault",
        "simulator",
        "The simulator's --sim-fault (crash-on-start, hang-on-load, die-after:N, unhealthy, "
        "slow-first-token:S, lossy, stale-config, drafter-ignores-window, degenerate-drafter); "
        "repeatable.",
        default=(),
        metavar="FAULT",
        kind="list",
    ),
    Option(
        "sim_restart_noise",
        "--dflash-sim-restart-noise",
        "simulator",
        "The simulator's --sim-restart-noise: each server start runs at its own speed, within "
        "1 +- F (e.g. 0.06), the starts counted in .dflash/sim-starts so separate runs get "
        "separate factors.",
        parse=parsers.below_one,
        shown="0",
        metavar="F",
    ),
    Option(
        "sim_extra_args",
        "--dflash-sim-args",
        "simulator",
        "More simulator options, appended to its launch line, e.g. '--sim-load-seconds 0 "
        "--sim-seed 3' (see python -m pytest_specdecode.sim --help).",
        parse=parsers.command("simulator arguments", argv=True),
        metavar="ARGS",
    ),
)

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
    metavar = option.metavar or _choices(option.choices)
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
