"""Settings: options, environment and ini resolved once into a frozen value.

Precedence (highest first): command line > environment (``DFLASH_*``) >
ini (``[tool.pytest.ini_options]`` / pytest.ini) > built-in default. Markers
sit above all of these but only for config keys; see :mod:`pytest_specdecode.config.spec`.
What each setting is, its parser and its default come from the options table
(:mod:`pytest_specdecode.config.options`); this module reads the values, and
holds the rules between settings as small named functions. A bad value raises
:class:`SettingsError` naming where it came from, which the plugin turns into
``pytest.UsageError`` (exit 4, one line).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

from pytest_specdecode import facts
from pytest_specdecode.config import load_options, parsers, simulator
from pytest_specdecode.config.cache_setting import WeightCacheSetting
from pytest_specdecode.config.hosts import Host, parse_host
from pytest_specdecode.config.load_options import Slo
from pytest_specdecode.config.options import (
    BY_NAME,
    DEFAULTS,
    OPTIONS,
    ApiStyle,
    ControlMode,
    Dataset,
    DialectName,
    Option,
    RestartMode,
)
from pytest_specdecode.errors import SpecDecodeError

__all__ = ["Host", "Settings", "SettingsError", "parse_host", "resolve"]

SIMULATOR_LAUNCH = f"{sys.executable} -m pytest_specdecode.sim"
# The simulator needs a drafter path like SGLang does; it never reads it.
SIMULATOR_DRAFT_MODEL = "sim/dflash-drafter"

Origin = Literal["cli", "env", "ini"]


class SettingsError(SpecDecodeError, ValueError):
    """One-line description of a bad setting and where it came from."""


class _ConfigLike(Protocol):
    def getoption(self, name: str) -> Any: ...
    def getini(self, name: str) -> Any: ...
    @property
    def inipath(self) -> Path | None: ...


@dataclass(frozen=True)
class Settings:
    """Everything the plugin needs from options, env and ini, resolved once.

    Defaults of the settings the table declares come from it (``DEFAULTS``); the
    others are derived at resolution (``control``, ``launch``, ``sim_args``...).
    """

    hosts: tuple[Host, ...] = DEFAULTS["hosts"]
    port: int = DEFAULTS["port"]
    port_given: bool = False
    control: ControlMode = "local"
    launch: str = SIMULATOR_LAUNCH
    uses_simulator: bool = True
    unit: str | None = DEFAULTS["unit"]
    restart_cmd: str | None = DEFAULTS["restart_cmd"]
    logs_cmd: str | None = DEFAULTS["logs_cmd"]
    sudo: bool = DEFAULTS["sudo"]
    restart: RestartMode = DEFAULTS["restart"]
    restore: bool = DEFAULTS["restore"]
    ready_timeout: float = DEFAULTS["ready_timeout"]
    api_key: str | None = DEFAULTS["api_key"]
    ssh_user: str | None = DEFAULTS["ssh_user"]
    ssh_port: int | None = DEFAULTS["ssh_port"]
    ssh_key: str | None = DEFAULTS["ssh_key"]
    ssh_accept_new_host_key: bool = DEFAULTS["ssh_accept_new_host_key"]
    dialect: DialectName = DEFAULTS["dialect"]
    sglang_version: str | None = DEFAULTS["sglang_version"]  # None: the newest table known
    args_template: str | None = DEFAULTS["args_template"]
    env_template: str | None = DEFAULTS["env_template"]
    draft_model: str | None = DEFAULTS["draft_model"]
    base_config: str | None = None  # the ini dflash_config
    config_override: str | None = DEFAULTS["config_override"]  # --dflash-config
    sweep: str | None = DEFAULTS["sweep"]
    # --dflash-search: its space is collected as a sweep (``sweep`` holds it too).
    search: str | None = DEFAULTS["search"]
    search_restarts: int | None = DEFAULTS["search_restarts"]  # None: a third of the space
    search_metric: str | None = DEFAULTS["search_metric"]  # None: speedup with a baseline
    search_budget: float | None = DEFAULTS["search_budget"]  # seconds; None: restarts
    search_seed: int | None = DEFAULTS["search_seed"]
    min_pass_rate: float | None = DEFAULTS["min_pass_rate"]
    problem_files: tuple[str, ...] = DEFAULTS["problem_files"]
    dataset: Dataset = DEFAULTS["dataset"]
    samples: int = DEFAULTS["samples"]
    temperature: float = DEFAULTS["temperature"]
    answer_timeout: float = DEFAULTS["answer_timeout"]
    sandbox: str = DEFAULTS["sandbox"]
    check_workers: int | None = DEFAULTS["check_workers"]  # None: every usable core
    system_prompt: str | None = DEFAULTS["system_prompt"]
    prompt_template: str = DEFAULTS["prompt_template"]
    max_tokens: int = DEFAULTS["max_tokens"]
    api: ApiStyle = DEFAULTS["api"]
    contexts: tuple[int, ...] = DEFAULTS["contexts"]
    concurrency: tuple[int, ...] = DEFAULTS["concurrency"]
    output_tokens: int = simulator.OUTPUT_TOKENS  # the simulator's default is set at resolution
    rounds: int = DEFAULTS["rounds"]
    domains: tuple[str, ...] = DEFAULTS["domains"]
    request_rates: tuple[float, ...] = DEFAULTS["request_rates"]
    max_concurrency: int | None = DEFAULTS["max_concurrency"]
    rate_requests: int = DEFAULTS["rate_requests"]
    load_mode: str = DEFAULTS["load_mode"]
    client_calibration: str = DEFAULTS["client_calibration"]
    client_wait: str = DEFAULTS["client_wait"]
    continuous_requests: int | None = DEFAULTS["continuous_requests"]  # None: 4 x concurrency
    slo: Slo = DEFAULTS["slo"]
    baseline: str | None = DEFAULTS["baseline"]
    benchmark_compare: str | None = None  # pytest-benchmark's --benchmark-compare
    benchmark_storage: str = "file://./.benchmarks"
    compare: str | None = DEFAULTS["compare"]
    compare_fail: tuple[str, ...] = DEFAULTS["compare_fail"]
    min_accept_length: float | None = DEFAULTS["min_accept_length"]
    # Degenerate output (report/degenerate.py): the repetition bound, a fraction.
    max_repetition: float = DEFAULTS["max_repetition"]
    lossless_margin: float = DEFAULTS["lossless_margin"]  # nats (throughput/lossless.py)
    # Acceptance integrity (report/acceptance.py): the largest drop allowed, a fraction.
    max_accept_drop: float = DEFAULTS["max_accept_drop"]
    report: str = DEFAULTS["report"]
    plot: str | None = DEFAULTS["plot"]
    html: str | None = DEFAULTS["html"]  # the HTML report (None: none)
    policy: str | None = DEFAULTS["policy"]  # the speculation policy file (None: none)
    resume: str | None = DEFAULTS["resume"]  # the report a resumed sweep continues from
    dry_run: bool = DEFAULTS["dry_run"]
    start_retries: int = DEFAULTS["start_retries"]
    start_retry_pause: float = DEFAULTS["start_retry_pause"]
    weight_cache: WeightCacheSetting = DEFAULTS["weight_cache"]
    sim_args: tuple[str, ...] = ()  # appended to the bundled simulator's launch line
    sim_defaults: tuple[str, ...] = ()  # simulator-only defaults in effect, for the header

    @property
    def remote(self) -> bool:
        return self.control in ("systemd", "script")


_FIELDS = frozenset(field.name for field in dataclasses.fields(Settings))


class _Found(NamedTuple):
    """A setting's raw text (a list of texts for a list option), and where it came from."""

    value: str | list[str]
    source: str  # the words naming it in a message: "--dflash-x", "dflash_x ini option"
    origin: Origin


class _Resolver:
    """Looks each setting of the table up on the command line, in the environment,
    then in ini, and reads it with the table's parser."""

    def __init__(self, config: _ConfigLike, environ: Mapping[str, str]) -> None:
        self._config = config
        self._environ = environ

    def found(
        self, name: str, origins: tuple[Origin, ...] = ("cli", "env", "ini")
    ) -> _Found | None:
        option = BY_NAME[name]
        if option.flag is not None and "cli" in origins:
            value = self._config.getoption(option.dest)
            if value not in (None, [], ""):
                # A switch, or an optional value left out: its ini spelling (one parser).
                return _Found("true" if value is True else value, option.flag, "cli")
        if option.env is not None and "env" in origins and self._environ.get(option.env):
            return _Found(self._environ[option.env], f"{option.env} environment variable", "env")
        for key in option.ini_names if "ini" in origins else ():
            value = self._config.getini(key)
            if value not in (None, [], ""):
                return _Found(value, f"{key} ini option", "ini")
        return None

    def value(self, name: str) -> Any:
        """The setting's value, or the table's default when nothing gives it."""
        option = BY_NAME[name]
        found = self.found(name)
        if found is None:
            return option.default
        if option.kind != "list":
            return self._read(option, found, str(found.value))
        items = found.value if isinstance(found.value, list) else re.split(r"[\s,]+", found.value)
        return tuple(self._read(option, found, item) for item in items if item.strip())

    def _read(self, option: Option, found: _Found, text: str) -> Any:
        try:
            value = option.parser(text)
        except (ValueError, TypeError) as exc:
            shown = "" if option.secret else f" {text.strip()!r}"
            raise SettingsError(f"Invalid value{shown} from {found.source}: {exc}") from None
        inipath = self._config.inipath
        if option.path and found.origin == "ini" and inipath is not None:
            # Like pytest's ini paths: relative to the ini file's directory.
            return str(inipath.parent / value)
        return value


def resolve(config: _ConfigLike, environ: Mapping[str, str] | None = None) -> Settings:
    """Resolve all settings; raises :class:`SettingsError` with a one-line reason."""
    environ = os.environ if environ is None else environ
    r = _Resolver(config, environ)
    v = {option.name: r.value(option.name) for option in OPTIONS}
    if v["restart_cmd"]:
        _check_restart_cmd(v["restart_cmd"])
    _check_restart_means(r, v["restart"])
    control = v["control"]
    if control == "auto":
        control = _auto_control(v["hosts"], v["unit"], v["restart_cmd"], v["restart"])
    _check_control(control, v["hosts"], v["unit"], v["restart_cmd"])
    if control == "external":
        _check_no_ssh_port(r, v["hosts"], v["port"])
    # Remote modes run whatever the host has: never assume the bundled simulator there.
    uses_simulator = control == "local" and (
        not v["launch"] or "pytest_specdecode.sim" in v["launch"]
    )
    _check_template_dialect(v["dialect"], v["args_template"])
    if v["weight_cache"].on and control not in ("local", "systemd"):
        raise SettingsError(
            f"--dflash-weight-cache {v['weight_cache']} starts its daemon with the launch "
            f"command, which {control} control does not run; drop it, or use local or systemd "
            "control"
        )
    _check_samples(v["samples"], v["temperature"])
    sim_args, scaled = _sim_args(r, v, uses_simulator)
    output_tokens, tokens_note = _output_tokens(v["output_tokens"], uses_simulator)
    derived: dict[str, Any] = {
        "port_given": r.found("port") is not None,
        "control": control,
        "restart": "never" if control == "external" else v["restart"],
        "launch": v["launch"] or SIMULATOR_LAUNCH,
        "uses_simulator": uses_simulator,
        "api_key": _api_key(r, v["api_key"], environ),
        "draft_model": v["draft_model"]
        or launch_draft_model(v["launch"])
        or (SIMULATOR_DRAFT_MODEL if uses_simulator else None),
        # The ini dflash_config is the default config; --dflash-config overrides markers.
        "base_config": _text_from(r, "config_override", ("ini",)),
        "config_override": _text_from(r, "config_override", ("cli",)),
        **_search(r, v),
        "output_tokens": output_tokens,
        "benchmark_compare": load_options.benchmark_compare(config),
        "benchmark_storage": str(
            load_options.benchmark_option(config, "benchmark_storage") or "file://./.benchmarks"
        ),
        "resume": _resume(r, v["report"]),
        "sim_args": sim_args,
        "sim_defaults": tokens_note + scaled,
    }
    direct = {name: value for name, value in v.items() if name in _FIELDS}
    return Settings(**{**direct, **derived})


def _text_from(r: _Resolver, name: str, origins: tuple[Origin, ...]) -> str | None:
    found = r.found(name, origins)
    if found is None:
        return None
    return str(found.value).strip() or None


def _api_key(r: _Resolver, key: str | None, environ: Mapping[str, str]) -> str | None:
    """The API key; an ini file gives only ``env:VARIABLE``, the variable that holds it."""
    found = r.found("api_key")
    if found is None or found.origin != "ini":
        return key
    try:
        variable = parsers.env_reference(str(found.value))
    except ValueError as exc:
        raise SettingsError(f"Invalid value from {found.source}: {exc}") from None
    if not environ.get(variable):
        raise SettingsError(
            f"{found.source} names the environment variable {variable}, which is not set; "
            "set it to the API key or drop the ini key"
        )
    try:
        return parsers.data_text(environ[variable])
    except ValueError as exc:
        raise SettingsError(
            f"Invalid value from {variable} (named by {found.source}): {exc}"
        ) from None


def _resume(r: _Resolver, report: str) -> str | None:
    """The report to resume from: ``--dflash-resume`` alone (or ini ``true``) means ``report``."""
    resume: str | None = r.value("resume")
    if resume is not None and parsers.is_true(resume):
        return report
    return resume or None


def _output_tokens(given: int | None, uses_simulator: bool) -> tuple[int, tuple[str, ...]]:
    """Output tokens per throughput request, and the header's note when the simulator's
    lighter default is in effect."""
    if given is not None:
        return given, ()
    if uses_simulator:
        return simulator.SIMULATOR_OUTPUT_TOKENS, (simulator.output_tokens_note(),)
    return simulator.OUTPUT_TOKENS, ()


_SIM_KNOBS = tuple(option.name for option in OPTIONS if option.group == "simulator")


def _sim_args(
    r: _Resolver, v: Mapping[str, Any], uses_simulator: bool
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ``--dflash-sim-*`` knobs as the simulator's flags, and the notes of its defaults."""
    # An ini may serve runs of both kinds: its simulator knobs wait for a run of the
    # simulator; the command line or the environment asking for one here is a mistake.
    given = [f.source for f in map(r.found, _SIM_KNOBS) if f is not None and f.origin != "ini"]
    if not uses_simulator:
        if given:
            raise SettingsError(
                f"{given[0]} sets the bundled simulator, but this run does not start it (a "
                "host, or a launch command without pytest_specdecode.sim, is given); drop it"
            )
        return (), ()
    return simulator.simulator_argv(
        v["launch"] or "",
        time_scale=v["sim_time_scale"],
        quality=v["sim_quality"],
        answers=v["sim_answers"],
        faults=v["sim_fault"],
        extra=v["sim_extra_args"] or "",
        restart_noise=v["sim_restart_noise"],
    )


def _check_restart_cmd(template: str) -> None:
    # Before anything runs: a value in the wrong place would be run as shell code.
    from pytest_specdecode.config.dialects import check_script_template
    from pytest_specdecode.config.spec import ConfigError

    try:
        check_script_template(template)
    except ConfigError as exc:
        raise SettingsError(str(exc)) from None


def _check_restart_means(r: _Resolver, restart: str) -> None:
    """Refuse combinations where one option would silently win over another."""
    given = [found.source for name in ("unit", "restart_cmd") if (found := r.found(name))]
    if len(given) == 2:
        raise SettingsError(
            f"{given[0]} and {given[1]} are both given: the server is restarted either "
            "by its systemd unit or by your script; drop one (or pick with --dflash-control)"
        )
    if restart == "never" and given:
        raise SettingsError(
            f"--dflash-restart=never never restarts the server, so {given[0]} would never "
            "be used; drop one of them"
        )


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


def launch_draft_model(launch: str | None) -> str | None:
    """The drafter a launch line names itself (``--speculative-draft-model-path P`` or
    an alias, ``=P`` too): a team's base command often carries it, and without it here
    every DFLASH config would be refused for want of a draft model."""
    if not launch or "draft-model" not in launch:
        return None
    option = facts.load().by_dest("speculative_draft_model_path")
    flags = option.flags if option is not None else ("--speculative-draft-model-path",)
    try:
        words = shlex.split(launch)
    except ValueError:  # the launch option's own check says what is wrong
        return None
    found = None
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name in flags:
            if eq:
                found = value
            elif i + 1 < len(words):
                found = words[i + 1]
    return found or None  # the last one, as argparse takes it


def _check_no_ssh_port(r: _Resolver, hosts: tuple[Host, ...], port: int) -> None:
    """HOST:PORT names an SSH port, and a server used as it is gets no SSH: a port there
    would be silently unused while HTTP goes to --dflash-port."""
    for host in hosts:
        if host.port is not None:
            found = r.found("hosts")
            raise SettingsError(
                f"{found.source if found else '--dflash-host'} {str(host)!r}: the port after "
                f"the host is its SSH port, and --dflash-restart=never uses no SSH (HTTP goes "
                f"to --dflash-port, {port} here); for the server's HTTP port give "
                f"--dflash-host {host.name} --dflash-port {host.port}"
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


def _check_template_dialect(dialect: str, args_template: str | None) -> None:
    if dialect == "template" and not args_template:
        raise SettingsError(
            "--dflash-dialect template needs the flag template in the dflash_args ini "
            "option, e.g. 'dflash_args = --my-budget {budget} --my-window {window}'"
        )


def _check_samples(samples: int, temperature: float) -> None:
    if samples > 1 and temperature == 0:
        raise SettingsError(
            f"--dflash-samples {samples} needs --dflash-temperature > 0: at temperature 0 "
            "every sample is the same greedy answer"
        )


def _search(r: _Resolver, v: Mapping[str, Any]) -> dict[str, Any]:
    """``sweep`` and the ``search_*`` settings: a search's space is collected as a sweep."""
    search: str | None = v["search"]
    given = [
        f.source for n in ("restarts", "budget", "metric", "seed") if (f := r.found(f"search_{n}"))
    ]
    if search is None:
        if given:
            raise SettingsError(f"{given[0]} needs --dflash-search SPACE (the configs to search)")
        return {}
    if v["sweep"] is not None:
        raise SettingsError(
            "--dflash-sweep and --dflash-search are both given: a sweep runs every config, a "
            "search chooses among them; give the space to one of them"
        )
    if (restarts := r.found("search_restarts")) and (budget := r.found("search_budget")):
        raise SettingsError(
            f"{restarts.source} and {budget.source} are both given: the search stops at a "
            "number of restarts or after a duration; give one of them"
        )
    from pytest_specdecode.config.spec import ConfigError, parse_sweep_option

    try:
        points = parse_sweep_option(search, source="--dflash-search")
    except ConfigError as exc:
        raise SettingsError(str(exc)) from None
    has_none = any(str(p.get("algorithm", "")).upper() == "NONE" for p in points)
    if v["search_metric"] == "speedup" and not (v["baseline"] or has_none):
        raise SettingsError(
            "--dflash-search-metric speedup needs a baseline: add algorithm=NONE to the space "
            "(e.g. 'algorithm=NONE,DFLASH;budget=4,8') or pass --dflash-baseline"
        )
    return {"sweep": search}
