"""Settings: options, environment and ini resolved once into a frozen value.

Precedence (highest first): command line > environment (``DFLASH_*``) >
ini (``[tool.pytest.ini_options]`` / pytest.ini) > built-in default. Markers
sit above all of these but only for config keys; see :mod:`pytest_specdecode.config.spec`.
A bad value raises :class:`SettingsError` naming where it came from, which
the plugin turns into ``pytest.UsageError`` (exit 4, one line).
"""

from __future__ import annotations

import math
import os
import re
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol, TypeVar

from pytest_specdecode.config import load_options, render, simulator
from pytest_specdecode.config.hosts import Host, parse_host
from pytest_specdecode.config.load_options import DEFAULT_DOMAINS, Slo
from pytest_specdecode.config.options import (
    API_STYLES,
    CONTROL_MODES,
    DATASETS,
    DIALECTS,
    LOAD_MODES,
    MAX_REPETITION,
    RESTART_MODES,
    SANDBOX_MODES,
    SEARCH_METRICS,
    SGLANG_VERSIONS,
    ApiStyle,
    ControlMode,
    Dataset,
    DialectName,
    RestartMode,
)
from pytest_specdecode.errors import SpecDecodeError

__all__ = ["Host", "Settings", "SettingsError", "parse_host", "resolve"]

T = TypeVar("T")
S = TypeVar("S", bound=str)

DEFAULT_PORT = 30000
SIMULATOR_LAUNCH = f"{sys.executable} -m pytest_specdecode.sim"
# The simulator needs a drafter path like SGLang does; it never reads it.
SIMULATOR_DRAFT_MODEL = "sim/dflash-drafter"

# Settings that may come from the environment, and their variable names.
ENV_NAMES = {
    "api_key": "DFLASH_API_KEY",
    "hosts": "DFLASH_HOSTS",
    "ready_timeout": "DFLASH_READY_TIMEOUT",
    "min_pass_rate": "DFLASH_MIN_PASS_RATE",
    "ssh_user": "DFLASH_SSH_USER",
    "ssh_key": "DFLASH_SSH_KEY",
}


class SettingsError(SpecDecodeError, ValueError):
    """One-line description of a bad setting and where it came from."""


class _ConfigLike(Protocol):
    def getoption(self, name: str) -> Any: ...
    def getini(self, name: str) -> Any: ...
    @property
    def inipath(self) -> Path | None: ...


class _Found(NamedTuple):
    """A raw setting, the words naming its source, and where that is."""

    value: Any
    source: str
    origin: Literal["cli", "env", "ini"]


@dataclass(frozen=True)
class Settings:
    """Everything the plugin needs from options, env and ini, resolved once."""

    hosts: tuple[Host, ...] = ()
    port: int = DEFAULT_PORT
    port_given: bool = False
    control: ControlMode = "local"
    launch: str = SIMULATOR_LAUNCH
    uses_simulator: bool = True
    unit: str | None = None
    restart_cmd: str | None = None
    logs_cmd: str | None = None
    sudo: bool = False
    restart: RestartMode = "auto"
    restore: bool = False
    ready_timeout: float = 1800.0
    api_key: str | None = None
    ssh_user: str | None = None
    ssh_port: int | None = None
    ssh_key: str | None = None
    ssh_accept_new_host_key: bool = False
    dialect: DialectName = "sglang"
    sglang_version: str | None = None  # None: the newest option table known
    args_template: str | None = None
    env_template: str | None = None
    draft_model: str | None = None
    base_config: str | None = None
    config_override: str | None = None
    sweep: str | None = None
    # --dflash-search: its space is collected as a sweep (``sweep`` holds it too).
    search: str | None = None
    search_restarts: int | None = None  # None: a third of the space, at least 3
    search_metric: str | None = None  # None: speedup with a baseline, else tok_s
    search_seed: int | None = None
    min_pass_rate: float | None = None
    problem_files: tuple[str, ...] = ()
    dataset: Dataset = "builtin"
    samples: int = 1
    temperature: float = 0.0
    answer_timeout: float = 10.0
    sandbox: str = "auto"
    check_workers: int | None = None  # None: every usable core
    system_prompt: str | None = None
    prompt_template: str = "{prompt}"
    max_tokens: int = 1024
    api: ApiStyle = "chat"
    contexts: tuple[int, ...] = (60, 1024, 4096)
    concurrency: tuple[int, ...] = (1, 8, 32)
    output_tokens: int = 512
    rounds: int = 3
    domains: tuple[str, ...] = DEFAULT_DOMAINS
    request_rates: tuple[float, ...] = ()
    max_concurrency: int | None = None
    rate_requests: int = 16
    load_mode: str = "rounds"
    continuous_requests: int | None = None  # None: 4 x the case's concurrency
    slo: Slo = ()
    baseline: str | None = None
    benchmark_compare: str | None = None  # pytest-benchmark's --benchmark-compare
    benchmark_storage: str = "file://./.benchmarks"
    compare: str | None = None
    compare_fail: tuple[str, ...] = ()
    min_accept_length: float | None = None
    # Degenerate output (report/degenerate.py): the repetition bound, a fraction.
    max_repetition: float = MAX_REPETITION
    report: str = ".dflash/report.json"
    plot: str | None = None
    html: str | None = ".dflash/report.html"  # the HTML report (None: none)
    resume: str | None = None  # the report a resumed sweep continues from
    dry_run: bool = False
    start_retries: int = 1
    start_retry_pause: float = 10.0
    sim_args: tuple[str, ...] = ()  # appended to the bundled simulator's launch line
    sim_defaults: tuple[str, ...] = ()  # simulator-only defaults in effect, for the header

    @property
    def remote(self) -> bool:
        return self.control in ("systemd", "script")


class _Resolver:
    """Looks a setting up on the command line, in the environment, then in ini."""

    def __init__(self, config: _ConfigLike, environ: Mapping[str, str]) -> None:
        self._config = config
        self._environ = environ

    def raw(self, name: str, *, option: str = "", ini: str = "") -> _Found | None:
        option = option or name
        ini = ini or name
        try:
            value = self._config.getoption(f"dflash_{option}")
        except ValueError:  # no such option: an ini-only setting
            value = None
        if value not in (None, [], ""):
            return _Found(value, f"--dflash-{option.replace('_', '-')}", "cli")
        env = ENV_NAMES.get(name)
        if env and self._environ.get(env):
            return _Found(self._environ[env], f"{env} environment variable", "env")
        try:
            ini_value = self._config.getini(f"dflash_{ini}")
        except ValueError:  # no such ini key: a command-line-only setting
            return None
        if ini_value not in (None, [], ""):
            return _Found(ini_value, f"dflash_{ini} ini option", "ini")
        return None

    def get(
        self, name: str, parse: Callable[[Any], T], default: T, *, option: str = "", ini: str = ""
    ) -> T:
        found = self.raw(name, option=option, ini=ini)
        if found is None:
            return default
        value, source, _ = found
        try:
            return parse(value)
        except (ValueError, TypeError) as exc:
            raise SettingsError(f"Invalid value {value!r} from {source}: {exc}") from None


def _choice(choices: tuple[S, ...]) -> Callable[[Any], S]:
    def parse(value: Any) -> S:
        text = str(value).strip()
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return choices[choices.index(text)]  # the member itself, typed as the Literal

    return parse


def _number(kind: Callable[[str], T], *, minimum: float | None = None) -> Callable[[Any], T]:
    def parse(value: Any) -> T:
        try:
            number = kind(str(value).strip())
        except ValueError:
            raise ValueError(f"expected a {getattr(kind, '__name__', 'number')}") from None
        if not math.isfinite(float(number)):  # type: ignore[arg-type]
            raise ValueError("expected a finite number")
        if minimum is not None and float(number) < minimum:  # type: ignore[arg-type]
            raise ValueError(f"expected a value >= {minimum:g}")
        return number

    return parse


def _fraction(value: Any) -> float:
    text = str(value).strip()
    try:
        number = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise ValueError("expected a fraction like 0.8 or 80%") from None
    if not 0 <= number <= 1:
        raise ValueError("expected a fraction between 0 and 1")
    return number


def _int_list(value: Any) -> tuple[int, ...]:
    items = value if isinstance(value, list) else str(value).replace(" ", "").split(",")
    numbers: list[int] = []
    for item in items:
        try:
            number = int(item)
        except ValueError:
            raise ValueError(f"expected comma-separated integers, got {item!r}") from None
        if number < 1:
            raise ValueError(f"expected integers >= 1, got {number}")
        numbers.append(number)
    if not numbers:
        raise ValueError("expected at least one integer")
    return tuple(numbers)


def _hosts(value: Any) -> tuple[Host, ...]:
    items = value if isinstance(value, list) else str(value).replace(",", " ").split()
    return tuple(parse_host(str(item)) for item in items)


def _text(value: Any) -> str:
    return str(value).strip()


DEFAULT_HTML: str | None = ".dflash/report.html"


def _html_path(value: Any) -> str | None:
    text = str(value).strip()
    if text.lower() == "none":
        return None
    if not text.lower().endswith((".html", ".htm")):
        raise ValueError("expected a file path ending in .html, or 'none' for no HTML report")
    return text


def _flag(resolver: _Resolver, name: str) -> bool:
    found = resolver.raw(name)
    if found is None:
        return False
    value, source, _ = found
    if value is True:
        return True
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"Invalid value {value!r} from {source}: expected true or false")


def _command(name: str, *, argv: bool = False) -> Callable[[Any], str]:
    """A command line: split like a shell would, so an open quote fails here, not later.

    With ``argv`` (a command the plugin runs or writes into a unit, word by word),
    a word holding a control character is refused (see config/render.py).
    """

    def parse(value: Any) -> str:
        text = str(value).strip()
        try:
            words = shlex.split(text)
        except ValueError as exc:
            raise ValueError(f"{exc} in the {name}; close the quote or escape it") from None
        for word in words if argv else ():
            what = render.control_character(word)
            if what is not None:
                raise ValueError(f"the word {word!r} of the {name} contains {what}; remove it")
        return text

    return parse


def _data_text(value: Any) -> str:
    """Text that becomes part of a command line or unit: no control character."""
    text = str(value).strip()
    what = render.control_character(text)
    if what is not None:
        raise ValueError(f"contains {what}; remove it")
    return text


_UNIT_NAME = re.compile(r"[A-Za-z0-9:_.@\\-]+")


def _unit_name(value: Any) -> str:
    text = str(value).strip()
    if text and not _UNIT_NAME.fullmatch(text):
        raise ValueError("expected a systemd unit name like sglang.service")
    return text


def _paths(resolver: _Resolver, config: _ConfigLike, name: str) -> tuple[str, ...]:
    """Files named on the command line (relative to the working directory) or in the
    ini (relative to the ini file's directory, as pytest does for ini paths)."""
    found = resolver.raw(name)
    if found is None:
        return ()
    value, _, origin = found
    items = [str(v).strip() for v in (value if isinstance(value, list) else str(value).split())]
    inipath = config.inipath if origin == "ini" else None
    if inipath is not None:
        items = [str(inipath.parent / item) for item in items]
    return tuple(item for item in items if item)


def _lines(resolver: _Resolver, name: str) -> tuple[str, ...]:
    found = resolver.raw(name)
    if found is None:
        return ()
    value = found.value
    items = value if isinstance(value, list) else str(value).splitlines()
    return tuple(str(item).strip() for item in items if str(item).strip())


def resolve(config: _ConfigLike, environ: Mapping[str, str] | None = None) -> Settings:
    """Resolve all settings; raises :class:`SettingsError` with a one-line reason."""
    r = _Resolver(config, os.environ if environ is None else environ)
    no_hosts: tuple[Host, ...] = ()
    hosts = r.get("hosts", _hosts, no_hosts, option="host")
    unit = r.get("unit", _unit_name, "") or None
    restart_cmd = r.get("restart_cmd", _command("restart command"), "") or None
    if restart_cmd:
        _check_restart_cmd(restart_cmd)
    restart: RestartMode = r.get("restart", _choice(RESTART_MODES), "auto")
    chosen: ControlMode | Literal["auto"] = r.get("control", _choice(CONTROL_MODES), "auto")
    _check_restart_means(r, unit, restart_cmd, restart)
    control = _auto_control(hosts, unit, restart_cmd, restart) if chosen == "auto" else chosen
    _check_control(control, hosts, unit, restart_cmd)
    launch = r.get("launch", _command("launch command", argv=True), "")
    # Remote modes run whatever the host has: never assume the bundled simulator there.
    uses_simulator = control == "local" and (not launch or "pytest_specdecode.sim" in launch)
    port_found = r.raw("port")
    port = r.get("port", _number(int, minimum=1), DEFAULT_PORT)
    dialect: DialectName = r.get("dialect", _choice(DIALECTS), "sglang")
    args_template = r.get("args", _text, "") or None
    if dialect == "template" and not args_template:
        raise SettingsError(
            "--dflash-dialect template needs the flag template in the dflash_args ini "
            "option, e.g. 'dflash_args = --my-budget {budget} --my-window {window}'"
        )
    draft_model = r.get("draft_model", _data_text, "") or None
    if draft_model is None and uses_simulator:
        draft_model = SIMULATOR_DRAFT_MODEL
    samples = r.get("samples", _number(int, minimum=1), 1)
    temperature = r.get("temperature", _number(float, minimum=0), 0.0)
    if samples > 1 and temperature == 0:
        raise SettingsError(
            f"--dflash-samples {samples} needs --dflash-temperature > 0: at temperature 0 "
            "every sample is the same greedy answer"
        )
    output_tokens = r.get("output_tokens", _number(int, minimum=1), 0)
    sim_defaults: tuple[str, ...] = ()
    if not output_tokens:
        output_tokens = (
            simulator.SIMULATOR_OUTPUT_TOKENS if uses_simulator else simulator.OUTPUT_TOKENS
        )
        sim_defaults = (simulator.output_tokens_note(),) if uses_simulator else ()
    sim_args, scaled = _sim_args(r, config, uses_simulator, launch)
    prompt_template = r.get("prompt_template", _text, "") or "{prompt}"
    if "{prompt}" not in prompt_template:
        raise SettingsError(
            f"dflash_prompt_template {prompt_template!r} has no {{prompt}} placeholder for the "
            "problem's text; add it"
        )
    report = r.get("report", _text, ".dflash/report.json")
    return Settings(
        hosts=hosts,
        port=port,
        port_given=port_found is not None,
        control=control,
        launch=launch or SIMULATOR_LAUNCH,
        uses_simulator=uses_simulator,
        unit=unit,
        restart_cmd=restart_cmd,
        logs_cmd=r.get("logs_cmd", _command("logs command"), "") or None,
        sudo=_flag(r, "sudo"),
        restart="never" if control == "external" else restart,
        restore=_flag(r, "restore"),
        ready_timeout=r.get("ready_timeout", _number(float, minimum=0.001), 1800.0),
        api_key=r.get("api_key", _data_text, "") or None,
        ssh_user=r.get("ssh_user", _text, "") or None,
        ssh_port=r.get("ssh_port", _number(int, minimum=1), 0) or None,
        ssh_key=r.get("ssh_key", _text, "") or None,
        ssh_accept_new_host_key=_flag(r, "ssh_accept_new_host_key"),
        dialect=dialect,
        sglang_version=r.get("sglang_version", _choice(SGLANG_VERSIONS), "") or None,
        args_template=args_template,
        env_template=r.get("env", _text, "") or None,
        draft_model=draft_model,
        # The ini dflash_config is the default config; --dflash-config overrides markers.
        base_config=_ini_text(config, "dflash_config"),
        config_override=_cli_text(config, "dflash_config"),
        **_search(r, baseline=bool(r.raw("baseline"))),
        min_pass_rate=r.get("min_pass_rate", _fraction, None),
        problem_files=_paths(r, config, "problems"),
        dataset=r.get("dataset", _choice(DATASETS), "builtin"),
        samples=samples,
        temperature=temperature,
        system_prompt=r.get("system_prompt", _text, "") or None,
        prompt_template=prompt_template,
        answer_timeout=r.get("answer_timeout", _number(float, minimum=0.1), 10.0),
        sandbox=r.get("sandbox", _choice(SANDBOX_MODES), "auto"),
        check_workers=r.get("check_workers", _number(int, minimum=1), 0) or None,
        max_tokens=r.get("max_tokens", _number(int, minimum=1), 1024),
        api=r.get("api", _choice(API_STYLES), "chat"),
        contexts=r.get("contexts", _int_list, (60, 1024, 4096)),
        concurrency=r.get("concurrency", _int_list, (1, 8, 32)),
        output_tokens=output_tokens,
        rounds=r.get("rounds", _number(int, minimum=1), 3),
        domains=r.get("domains", load_options.parse_domains, DEFAULT_DOMAINS),
        request_rates=r.get("request_rate", load_options.parse_rates, ()),
        max_concurrency=r.get("max_concurrency", _number(int, minimum=1), 0) or None,
        rate_requests=r.get("rate_requests", _number(int, minimum=1), 16),
        load_mode=r.get("load_mode", _choice(LOAD_MODES), "rounds"),
        continuous_requests=r.get("continuous_requests", _number(int, minimum=1), 0) or None,
        slo=r.get("slo", load_options.parse_slo, ()),
        baseline=r.get("baseline", _text, "") or None,
        benchmark_compare=load_options.benchmark_compare(config),
        benchmark_storage=str(
            load_options.benchmark_option(config, "benchmark_storage") or "file://./.benchmarks"
        ),
        compare=r.get("compare", _text, "") or None,
        compare_fail=_lines(r, "compare_fail"),
        min_accept_length=r.get("min_accept_length", _number(float, minimum=0), None),
        max_repetition=r.get("max_repetition", _fraction, MAX_REPETITION),
        report=report,
        plot=r.get("plot", _text, "") or None,
        html=r.get("html", _html_path, DEFAULT_HTML),
        resume=_resume(r, report),
        dry_run=_flag(r, "dry_run"),
        start_retries=r.get("start_retries", _number(int, minimum=0), 1),
        start_retry_pause=r.get("start_retry_pause", _number(float, minimum=0.001), 10.0),
        sim_args=sim_args,
        sim_defaults=sim_defaults + scaled,
    )


def _resume(r: _Resolver, report: str) -> str | None:
    """The report to resume from: ``--dflash-resume`` alone (or ini ``true``) means ``report``."""
    found = r.raw("resume")
    if found is None:
        return None
    value = found.value
    if value is True or str(value).strip().lower() in ("true", "yes", "on", "1"):
        return report
    return str(value).strip() or None


def _sim_args(
    r: _Resolver, config: _ConfigLike, uses_simulator: bool, launch: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ``--dflash-sim-*`` knobs as the simulator's flags, and the notes of its defaults."""
    names = (
        "sim_time_scale",
        "sim_quality",
        "sim_answers",
        "sim_fault",
        "sim_args",
        "sim_restart_noise",
    )
    # An ini may serve runs of both kinds: its simulator knobs wait for a run of the
    # simulator; the command line or the environment asking for one here is a mistake.
    given = [f.source for f in map(r.raw, names) if f is not None and f.origin != "ini"]
    if not uses_simulator:
        if given:
            raise SettingsError(
                f"{given[0]} sets the bundled simulator, but this run does not start it (a "
                "host, or a launch command without pytest_specdecode.sim, is given); drop it"
            )
        return (), ()
    answers = r.raw("sim_answers")
    # Like pytest's ini paths: relative to the ini file's directory (or the working one).
    where = (
        config.inipath.parent if answers and answers.origin == "ini" and config.inipath else Path()
    )
    return simulator.simulator_argv(
        launch,
        time_scale=r.get("sim_time_scale", _number(float, minimum=0), None),
        quality=r.get("sim_quality", _fraction, None),
        answers=str(where / str(answers.value).strip()) if answers else None,
        faults=_lines(r, "sim_fault"),
        extra=r.get("sim_args", _command("simulator arguments", argv=True), ""),
        restart_noise=r.get("sim_restart_noise", _restart_noise, None),
    )


def _restart_noise(value: Any) -> float:
    number = _number(float, minimum=0)(value)
    if number >= 1:
        raise ValueError("expected a value >= 0 and < 1")
    return number


def _check_restart_cmd(template: str) -> None:
    # Before anything runs: a value in the wrong place would be run as shell code.
    from pytest_specdecode.config.dialects import check_script_template
    from pytest_specdecode.config.spec import ConfigError

    try:
        check_script_template(template)
    except ConfigError as exc:
        raise SettingsError(str(exc)) from None


def _check_restart_means(
    r: _Resolver, unit: str | None, restart_cmd: str | None, restart: str
) -> None:
    """Refuse combinations where one option would silently win over another."""
    given = [(name, found.source) for name in ("unit", "restart_cmd") if (found := r.raw(name))]
    if len(given) == 2:
        raise SettingsError(
            f"{given[0][1]} and {given[1][1]} are both given: the server is restarted either "
            "by its systemd unit or by your script; drop one (or pick with --dflash-control)"
        )
    if restart == "never" and given:
        raise SettingsError(
            f"--dflash-restart=never never restarts the server, so {given[0][1]} would never "
            "be used; drop one of them"
        )


def _cli_text(config: _ConfigLike, name: str) -> str | None:
    value = config.getoption(name)
    return str(value) if value else None


def _ini_text(config: _ConfigLike, name: str) -> str | None:
    value = config.getini(name)
    return str(value).strip() or None


def _auto_control(
    hosts: tuple[Host, ...], unit: str | None, restart_cmd: str | None, restart: str
) -> ControlMode:
    if restart == "never":
        return "external"
    if not hosts:
        return "local"
    if unit:
        return "systemd"
    if restart_cmd:
        return "script"
    raise SettingsError(
        f"--dflash-host {hosts[0]} needs a way to restart the server: give --dflash-unit "
        "(systemd), --dflash-restart-cmd (your script) or --dflash-restart=never (use the "
        "running server as it is)"
    )


def _check_control(
    control: str, hosts: tuple[Host, ...], unit: str | None, restart_cmd: str | None
) -> None:
    if control in ("systemd", "script") and not hosts:
        raise SettingsError(f"--dflash-control {control} needs --dflash-host")
    if control == "systemd" and not unit:
        raise SettingsError("--dflash-control systemd needs --dflash-unit, e.g. sglang.service")
    if control == "script" and not restart_cmd:
        raise SettingsError(
            "--dflash-control script needs --dflash-restart-cmd, e.g. "
            "'/opt/reconfig_ddtree.sh {budget} {topk} {window}'"
        )


def _search(r: _Resolver, *, baseline: bool) -> dict[str, Any]:
    """``sweep`` and the ``search_*`` settings: a search's space is collected as a sweep."""
    sweep = r.get("sweep", _text, "") or None
    search = r.get("search", _text, "") or None
    given = [f.source for n in ("restarts", "metric", "seed") if (f := r.raw(f"search_{n}"))]
    if search is None:
        if given:
            raise SettingsError(f"{given[0]} needs --dflash-search SPACE (the configs to search)")
        return {"sweep": sweep}
    if sweep is not None:
        raise SettingsError(
            "--dflash-sweep and --dflash-search are both given: a sweep runs every config, a "
            "search chooses among them; give the space to one of them"
        )
    from pytest_specdecode.config.spec import ConfigError, parse_sweep_option

    try:
        points = parse_sweep_option(search, source="--dflash-search")
    except ConfigError as exc:
        raise SettingsError(str(exc)) from None
    metric = r.get("search_metric", _choice(SEARCH_METRICS), "") or None
    has_none = any(str(p.get("algorithm", "")).upper() == "NONE" for p in points)
    if metric == "speedup" and not (baseline or has_none):
        raise SettingsError(
            "--dflash-search-metric speedup needs a baseline: add algorithm=NONE to the space "
            "(e.g. 'algorithm=NONE,DFLASH;budget=4,8') or pass --dflash-baseline"
        )
    return {
        "sweep": search,
        "search": search,
        "search_restarts": r.get("search_restarts", _number(int, minimum=1), 0) or None,
        "search_metric": metric,
        "search_seed": r.get("search_seed", _number(int, minimum=0), None),
    }
