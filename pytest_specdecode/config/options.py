"""Command-line options and ini keys of the plugin: declarations only.

Every option is named ``--dflash-*`` and sits in one of the ``--help`` groups
of :data:`GROUPS` (one per part); each also declares its ini key ``dflash_*``
(a CI job pins settings in its ini), except the API key, a secret that comes
from ``DFLASH_API_KEY``.
Values are resolved (with ini, environment and defaults) by
:mod:`pytest_specdecode.config.settings`; this module only declares them.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any, Literal, get_args

import pytest

from pytest_specdecode import facts

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
SGLANG_VERSIONS = facts.VERSIONS
# --dflash-max-repetition: varied prose repeats about 0 of its word 4-grams, code up to
# about 0.3, a phrase repeated to the end near 1 (see docs/throughput.md).
MAX_REPETITION = 0.5
# ...and, with a NONE baseline in the run, this far above the baseline's figure.
REPETITION_MARGIN = 0.2


def _finite_number(minimum: float, *, inclusive: bool) -> Callable[[str], float]:
    """An argparse type: a finite float above ``minimum`` (or equal, when ``inclusive``)."""
    sign = ">=" if inclusive else ">"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        # nan compares false with everything: test for the numbers we take, not against.
        if not ((minimum <= value if inclusive else minimum < value) and value < math.inf):
            raise argparse.ArgumentTypeError(
                f"expected a finite number {sign} {minimum:g}, got {text!r}"
            )
        return value

    return parse


def _integer(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value

    return parse


_positive_float = _finite_number(0, inclusive=False)
_non_negative_float = _finite_number(0, inclusive=True)
_positive_int = _integer(1)
_non_negative_int = _integer(0)


def _fraction(text: str) -> float:
    try:
        value = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a fraction like 0.8 or 80%, got {text!r}"
        ) from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1, got {text!r}")
    return value


def _restart_noise(text: str) -> float:
    value = _non_negative_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 0 and < 1, got {text!r}")
    return value


def _port(text: str) -> int:
    value = _positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port 1-65535, got {text!r}")
    return value


# ``--help`` groups, in the order they are shown: (pytest group name, title).
GROUPS = {
    "target": ("dflash-target", "dflash: target and control (the server, how it restarts)"),
    "configs": ("dflash-configs", "dflash: configs (what each test runs under)"),
    "coding": ("dflash-coding", "dflash: coding correctness (problems, answers, sandbox)"),
    "throughput": ("dflash-throughput", "dflash: throughput (cases, load, baseline)"),
    "gates": ("dflash-gates", "dflash: gates and reports (exit status, JSON report, plots)"),
    "simulator": ("dflash-simulator", "dflash: the bundled simulator (used without --dflash-host)"),
}


def add_options(parser: pytest.Parser) -> None:
    """Register the ``--dflash-*`` options (one ``--help`` group per part) and their
    ``dflash_*`` ini keys."""
    groups = {key: parser.getgroup(*names) for key, names in GROUPS.items()}
    current = ["target"]

    def section(key: str) -> None:
        # The options added after this go into the group ``key``.
        current[0] = key

    def add(*names: str, ini: str | None = None, ini_help: str | None = None, **kw: Any) -> None:
        # Every option a CI job would pin also has an ini key: dflash_<first name>, or ``ini``.
        groups[current[0]].addoption(*names, **kw)
        if ini == "":
            return
        name = names[0]
        key = ini or "dflash_" + name.removeprefix("--dflash-").replace("-", "_")
        text = ini_help or f"{_first_sentence(kw.get('help', ''))} (as {name})."
        if kw.get("action") == "append":
            parser.addini(key, text, type="linelist", default=[])
        else:
            parser.addini(key, text, type="string", default="")

    # Where the server is and how it is controlled.
    add(
        "--dflash-host",
        ini="dflash_hosts",
        ini_help="GPU hosts to control over SSH, one per line (as --dflash-host).",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="GPU host to control over SSH; repeat for several hosts. Without it the "
        "server runs locally (by default the bundled simulator). Default: none",
    )
    add(
        "--dflash-port",
        type=_port,
        default=None,
        metavar="PORT",
        help="HTTP port of the SGLang server. Default: 30000 (a free port for the "
        "bundled simulator)",
    )
    add(
        "--dflash-control",
        ini_help="Control mode: " + ", ".join(CONTROL_MODES) + " (as --dflash-control).",
        choices=CONTROL_MODES,
        default=None,
        help="How to bring the server to a config: local process, systemd unit over "
        "SSH, your own script over SSH, or external (never restart). Default: 'auto' "
        "(local without --dflash-host, systemd with --dflash-unit, script with "
        "--dflash-restart-cmd)",
    )
    add(
        "--dflash-launch",
        default=None,
        metavar="COMMAND",
        help="Base launch command; the config's flags are appended. Locally, a leading "
        "'python' is the interpreter running pytest. Default: the bundled simulator, "
        "'python -m pytest_specdecode.sim'",
    )
    add(
        "--dflash-unit",
        default=None,
        metavar="UNIT",
        help="systemd unit running SGLang on the host (systemd control). Default: none",
    )
    add(
        "--dflash-restart-cmd",
        default=None,
        metavar="TEMPLATE",
        help="Your reconfigure script, run over SSH with shell-quoted values, e.g. "
        "'/opt/reconfig_ddtree.sh {budget} {topk} {window}'. Default: none",
    )
    add(
        "--dflash-logs-cmd",
        "--dflash-log-cmd",
        dest="dflash_logs_cmd",
        default=None,
        metavar="COMMAND",
        help="A command printing the current server process's log: script control runs it "
        "over SSH (errors show it, the drafter's start-up line is checked in it); external "
        "control runs it locally, e.g. 'ssh gpu1 journalctl -u sglang -o cat'. Default: none",
    )
    add(
        "--dflash-sudo",
        action="store_true",
        default=None,
        help="systemd control: write the drop-in and run systemctl with 'sudo -n'. Default: False",
    )
    add(
        "--dflash-restart",
        ini_help="Restart mode: " + ", ".join(RESTART_MODES) + " (as --dflash-restart).",
        choices=RESTART_MODES,
        default=None,
        help="auto: skip the restart when the live server is verified to run the "
        "config; always: restart anyway; never: external server, skip tests of other "
        "configs. Default: 'auto'",
    )
    add(
        "--dflash-restore",
        action="store_true",
        default=None,
        help="At session end remove the systemd drop-in and restart the unit as it was; "
        "without it the drop-in (the last config) stays on the host. Default: False",
    )
    add(
        "--dflash-ready-timeout",
        type=_positive_float,
        default=None,
        metavar="SECONDS",
        help="Give up waiting for the server to become ready after this long. Default: 1800",
    )
    add(
        "--dflash-api-key",
        ini="",  # a secret: from DFLASH_API_KEY, never from a committed file
        default=None,
        metavar="KEY",
        help="Bearer token for the server (or env DFLASH_API_KEY). Default: none",
    )

    # SSH (still target and control).
    add(
        "--dflash-ssh-user",
        default=None,
        metavar="USER",
        help="SSH user (else ~/.ssh/config, else the local user). Default: none",
    )
    add(
        "--dflash-ssh-port",
        type=_port,
        default=None,
        metavar="PORT",
        help="SSH port (else ~/.ssh/config, else 22). Default: none",
    )
    add(
        "--dflash-ssh-key",
        default=None,
        metavar="PATH",
        help="SSH private key file (else ~/.ssh/config and the agent). Default: none",
    )
    add(
        "--dflash-ssh-accept-new-host-key",
        action="store_true",
        default=None,
        help="Trust and remember a host key not yet in known_hosts (first contact only: "
        "this skips the check that protects against a man-in-the-middle). Default: False",
    )

    section("configs")
    add(
        "--dflash-dialect",
        choices=DIALECTS,
        default=None,
        help="How flags are spelled: sglang (0.5.23), sglang-legacy, ddtree (PR builds) "
        "or template (ini dflash_args / dflash_env). Default: 'sglang'",
    )
    add(
        "--dflash-sglang-version",
        choices=SGLANG_VERSIONS,
        default=None,
        help="SGLang version whose option table the sglang dialects check rendered flags "
        f"against before any restart. Default: {SGLANG_VERSIONS[-1]!r} (newest known)",
    )
    add(
        "--dflash-draft-model",
        default=None,
        metavar="PATH",
        help="Drafter model path (--speculative-draft-model-path). Default: none",
    )
    add(
        "--dflash-config",
        ini_help="Default config of every test, under markers and --dflash-config, "
        "e.g. 'budget=8,window=2048'.",
        default=None,
        metavar="K=V,...",
        help="Override config keys for every test, e.g. 'budget=8,topk=4,window=2048'. "
        "Default: none",
    )
    add(
        "--dflash-sweep",
        default=None,
        metavar="K=V,V;K=V,...",
        help="Run every dflash test under each combination, e.g. "
        "'budget=4,8,16;window=1024,2048'. Default: none",
    )

    section("gates")
    add(
        "--dflash-min-pass-rate",
        type=_fraction,
        default=None,
        metavar="RATE",
        help="Exit 1 when a config's coding pass rate is below RATE (0.8 or 80%%). "
        "Default: no gate",
    )

    section("coding")
    add(
        "--dflash-problems",
        action="append",
        default=[],
        metavar="TOML",
        help="Add coding problems from a TOML file ([[problem]] tables with name, prompt, "
        "entry_point, reference, args, cases); repeatable. A conftest.py can add Problem "
        "objects with the pytest_dflash_problems hook. Default: none",
    )
    add(
        "--dflash-dataset",
        choices=DATASETS,
        default=None,
        help="Coding problem set. Default: 'builtin'",
    )
    add(
        "--dflash-samples",
        type=_positive_int,
        default=None,
        metavar="N",
        help="Answers per problem (with --dflash-temperature > 0) for pass@k. Default: 1",
    )
    add(
        "--dflash-temperature",
        type=float,
        default=None,
        metavar="T",
        help="Sampling temperature of coding answers. Default: 0.0",
    )
    add(
        "--dflash-answer-timeout",
        type=_positive_float,
        default=None,
        metavar="SECONDS",
        help="Wall-time limit for checking one answer in the sandbox. Default: 10",
    )
    add(
        "--dflash-check-workers",
        type=_positive_int,
        default=None,
        metavar="N",
        help="Coding answers checked at once, each in a warm sandbox of its own. "
        "Default: every core this process may use (split among xdist workers)",
    )
    add(
        "--dflash-sandbox",
        choices=SANDBOX_MODES,
        default=None,
        help="How coding answers are isolated: auto (bubblewrap where it works, else a "
        "weaker fallback, with a warning), require (bubblewrap or a usage error: for CI), "
        "fallback (rlimits and a process group only). Default: 'auto'",
    )
    add(
        "--dflash-max-tokens",
        type=_positive_int,
        default=None,
        metavar="N",
        help="Max tokens of a coding answer. Default: 1024",
    )
    add(
        "--dflash-api",
        choices=API_STYLES,
        default=None,
        help="Ask through chat completions or plain completions (base models). Default: 'chat'",
    )

    section("throughput")
    add(
        "--dflash-contexts",
        default=None,
        metavar="N,N,...",
        help="Prompt lengths in tokens of throughput cases. Default: '60,1024,4096'",
    )
    add(
        "--dflash-concurrency",
        default=None,
        metavar="N,N,...",
        help="Concurrent requests of throughput cases. Default: '1,8,32'",
    )
    add(
        "--dflash-output-tokens",
        type=_positive_int,
        default=None,
        metavar="N",
        help="Output tokens per request in throughput cases (ignore_eos). Default: 512",
    )
    add(
        "--dflash-rounds",
        type=_positive_int,
        default=None,
        metavar="N",
        help="Measured rounds per throughput case (plus one warm-up). Default: 3",
    )
    add(
        "--dflash-domains",
        default=None,
        metavar="NAME,NAME,...",
        help="Prompt domains of throughput cases, from the prompt set shipped with the plugin: "
        "code, math, chat, summary, or all; each domain is a case of its own "
        "(ctx1024-c8-code). Default: 'chat'",
    )
    add(
        "--dflash-request-rate",
        default=None,
        metavar="R,R,...",
        help="Also run cases driven by request rate: Poisson arrivals at R requests/s "
        "(seeded), e.g. '4,8,16'. Default: none (closed-loop concurrency only)",
    )
    add(
        "--dflash-max-concurrency",
        type=_positive_int,
        default=None,
        metavar="N",
        help="Requests in flight at most in request-rate cases (later arrivals wait). "
        "Default: no limit",
    )
    add(
        "--dflash-rate-requests",
        type=_positive_int,
        default=None,
        metavar="N",
        help="Requests per round of a request-rate case. Default: 16",
    )
    add(
        "--dflash-slo",
        default=None,
        metavar="METRIC:TIME,...",
        help="Service-level objectives per request, e.g. 'ttft:500ms,tpot:30ms,e2e:2s': adds "
        "goodput (requests/s meeting all) and attainment per case. Default: none",
    )
    add(
        "--dflash-baseline",
        default=None,
        metavar="PATH|NNNN",
        help="A saved pytest-benchmark run of the non-speculative baseline (algorithm NONE) "
        "to compute speedups against when this run has none. Default: none",
    )
    section("gates")
    add(
        "--dflash-compare",
        default=None,
        metavar="PATH|NNNN|NAME",
        help="Compare throughput with a saved pytest-benchmark run: a .json file, a run "
        "number, the name given to --benchmark-save, or 'latest'. Default: none "
        "(--benchmark-compare's run, if given)",
    )
    add(
        "--dflash-compare-fail",
        action="append",
        default=[],
        metavar="METRIC:DROP",
        help="Exit 1 when a case regresses against --dflash-compare (else --benchmark-compare) "
        "beyond the 95%% interval, e.g. 'tok_s:5%%' or 'accept_length:0.2'; repeatable. "
        "Default: none",
    )
    add(
        "--dflash-min-accept-length",
        type=_positive_float,
        default=None,
        metavar="X",
        help="Exit 1 when a config's accept length is below X. Default: no gate",
    )
    add(
        "--dflash-max-repetition",
        type=_fraction,
        default=None,
        metavar="FRACTION",
        help="Exit 1 when a speculative config's output is degenerate: its share of repeated "
        "word 4-grams in a throughput case is above FRACTION (0.5 or 50%%) and, when the run "
        f"has a NONE baseline, more than {REPETITION_MARGIN:g} above the baseline's; such a "
        f"config never wins the verdict. Default: {MAX_REPETITION:g}",
    )

    # Long sweeps: starting again, planning, flaky starts (target and control).
    section("target")
    add(
        "--dflash-resume",
        nargs="?",
        const=True,
        default=None,
        metavar="REPORT",
        help="Continue a sweep from its JSON report: configs whose tests all have results "
        "are not restarted and their results are carried over; the missing tests run. "
        "Without REPORT: the configured --dflash-report. Default: off",
    )
    add(
        "--dflash-dry-run",
        action="store_true",
        default=None,
        help="Collect and validate every config, print what would be run on each host (launch "
        "command, systemd drop-in or script command) in run order; start, stop and send "
        "nothing. Default: False",
    )
    add(
        "--dflash-start-retries",
        type=_non_negative_int,
        default=None,
        metavar="N",
        help="Retry a start-up failure that looks transient (killed by a signal, CUDA out of "
        "memory, port still in use, SSH unreachable) up to N times; argument and validation "
        "errors are never retried. Default: 1",
    )
    add(
        "--dflash-start-retry-pause",
        type=_positive_float,
        default=None,
        metavar="SECONDS",
        help="Pause before each start-up retry (GPU memory takes a while to be freed). Default: 10",
    )

    section("gates")
    add(
        "--dflash-report",
        default=None,
        metavar="PATH",
        help="Write the JSON run report here, updated after every test, plus a copy named "
        "after the run's start time; {now} (start time) or {n} (next free number) in the "
        "path name each run's file instead. Default: '.dflash/report.json'",
    )
    add(
        "--dflash-plot",
        default=None,
        metavar="DIR",
        help="Write PNG plots here (needs the 'plot' extra). Default: none",
    )
    add(
        "--dflash-html",
        default=None,
        metavar="PATH",
        help="Write the run's self-contained HTML report here at the end of the run (verdict, "
        "configs, charts; opens offline); 'none' writes none. Default: '.dflash/report.html'",
    )

    section("simulator")
    add(
        "--dflash-sim-time-scale",
        type=_non_negative_float,
        default=None,
        metavar="X",
        help="The simulator's --sim-time-scale: multiplies its modelled GPU time (0.5 runs "
        "twice as fast as the GPU it models; 0: no delay). Default: 1",
    )
    add(
        "--dflash-sim-quality",
        type=_fraction,
        default=None,
        metavar="Q",
        help="The simulator's --sim-quality: the share of its coding answers that are right. "
        "Default: 1",
    )
    add(
        "--dflash-sim-answers",
        default=None,
        metavar="JSON",
        help='The simulator\'s --sim-answers: a JSON list of {"match": ..., "response": ...} '
        "replies, e.g. for your own problems (without it the simulator answers problems it "
        "does not know with no code). Default: none",
    )
    add(
        "--dflash-sim-fault",
        action="append",
        default=[],
        metavar="FAULT",
        help="The simulator's --sim-fault (crash-on-start, hang-on-load, die-after:N, "
        "unhealthy, slow-first-token:S, lossy, stale-config, drafter-ignores-window, "
        "degenerate-drafter); repeatable. Default: none",
    )
    add(
        "--dflash-sim-restart-noise",
        type=_restart_noise,
        default=None,
        metavar="F",
        help="The simulator's --sim-restart-noise: each server start runs at its own speed, "
        "within 1 +- F (e.g. 0.06), the starts counted in .dflash/sim-starts so separate runs "
        "get separate factors. Default: 0",
    )
    add(
        "--dflash-sim-args",
        default=None,
        metavar="ARGS",
        help="More simulator options, appended to its launch line, e.g. "
        "'--sim-load-seconds 0 --sim-seed 3' (see python -m pytest_specdecode.sim --help). "
        "Default: none",
    )

    # Ini-only settings: templates and prompts too long for a command line.
    ini = parser.addini
    ini(
        "dflash_args",
        "Flag template of the 'template' dialect, e.g. "
        "'--my-budget {budget} --my-window {window}'.",
        default="",
    )
    ini(
        "dflash_env",
        "Environment template of the 'template' dialect, e.g. 'MY_TOPK={topk}'.",
        default="",
    )
    ini(
        "dflash_system_prompt",
        "System prompt of coding questions (chat). Default: ask for one fenced Python function.",
        default="",
    )
    ini(
        "dflash_prompt_template",
        "User prompt of coding questions; {prompt} is the problem's text. Default: '{prompt}'.",
        default="",
    )


def _first_sentence(text: str) -> str:
    head = text.split(". Default:")[0].split("; ")[0]
    return head.replace("%%", "%").rstrip(".")
