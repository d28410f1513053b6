"""``--dflash-dry-run``: what a sweep would do, config by config, without doing any of it.

Made from the collected configs in run order and the same renderer the run
uses (:class:`~pytest_specdecode.service.launch_command.LaunchRenderer`): the launch
command locally, the systemd drop-in text over SSH, or the reconfigure script
with its values quoted. Nothing here opens a connection, starts or stops a
process or sends a request: the plan is text.

Under pytest-xdist the scheduler hands each host the next config when it is
free; the plan shows the hosts as they would be used if every config took
as long (round robin over the hosts that have workers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_specdecode.config import dialects, render
from pytest_specdecode.config.settings import Host, Settings
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.output import redact
from pytest_specdecode.service.launch_command import LaunchRenderer, endpoint


@dataclass(frozen=True)
class Planned:
    """One config of the run, in run order: its tests, and whether resume carries it."""

    config: SpecConfig
    tests: int
    carried: bool = False


def hosts_used(settings: Settings, workers: int) -> list[Host | None]:
    """The hosts a run serves from: the first host alone without xdist (``workers`` 0)."""
    if not settings.hosts or settings.control == "local":
        return [None]
    if workers <= 0:
        return [settings.hosts[0]]
    return list(settings.hosts[: min(workers, len(settings.hosts))])


def plan_lines(
    settings: Settings,
    dialect: dialects.Dialect,
    planned: Sequence[Planned],
    *,
    workers: int = 0,
    port: int | None = None,
    invalid: Mapping[str, str] | None = None,
    redactor: redact.Redactor | None = None,
) -> list[str]:
    """The dry run's report: a header, then per config where and exactly what would run."""
    hosts = hosts_used(settings, workers)
    todo = [p for p in planned if not p.carried]
    restarts = {"never": "no restarts (--dflash-restart=never)"}.get(settings.restart)
    if restarts is None:
        restarts = _count(len(todo), "restart") + (
            " at most (--dflash-restart=auto keeps a live server that already runs a config)"
            if settings.restart == "auto"
            else ""
        )
    where = ", ".join(str(h) for h in hosts if h is not None) or "localhost"
    tests = sum(p.tests for p in todo)
    lines = [
        f"dflash dry run: {_count(len(planned), 'config')}, {_count(tests, 'test')} to run, "
        f"{restarts}, on {where}"
        + (f" with -n {workers}" if workers else "")
        + ": nothing was started, stopped or sent"
    ]
    if len(hosts) > 1:
        lines.append(
            "  (under xdist each host takes the next config when it is free: shown as if every "
            "config took as long)"
        )
    turn = 0
    for number, item in enumerate(planned, 1):
        head = f"[{number}/{len(planned)}] {item.config.label()} ({_count(item.tests, 'test')})"
        if item.carried:
            lines.append(f"{head}: carried from the resumed report, not restarted")
            continue
        host = hosts[turn % len(hosts)]
        turn += 1
        lines.append(f"{head} on {host if host is not None else 'localhost'}:")
        what = _what(settings, dialect, item.config, host, port, redactor)
        lines.extend("    " + line for line in what)
    for message in (invalid or {}).values():
        lines.append(f"bad config, not run: {message}")
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def _what(
    settings: Settings,
    dialect: dialects.Dialect,
    config: SpecConfig,
    host: Host | None,
    port: int | None,
    redactor: redact.Redactor | None,
) -> list[str]:
    """What would bring ``host`` to ``config``, as the controller would run it."""
    where = endpoint(settings, host, port or settings.port)
    launch = LaunchRenderer(settings, dialect, where, redactor).render(config)
    url = where.base_url
    if settings.control == "external":
        return [f"verify only: the server at {url} must already run it (--dflash-restart=never)"]
    if settings.control == "script":
        return [f"run over SSH: {launch.script}", f"then wait for {url} to serve this config"]
    env = [f"{k}={render.shell_word(v)}" for k, v in sorted(launch.env.items())]
    if settings.control == "local":
        return [f"launch: {' '.join([*env, launch.shell])}"]
    from pytest_specdecode.service.systemd import SystemdController, render_dropin, split_secrets

    assert settings.unit is not None
    unit = SystemdController(lambda: None, settings.unit)  # for its paths; never connects
    sudo = "sudo -n " if settings.sudo else ""
    split = split_secrets(launch.argv, [settings.api_key])
    secrets = unit.secrets_path if split.secrets else None
    text = render_dropin(split.argv, launch.env, label=launch.label, environment_file=secrets)
    return [
        *(
            [f"write {secrets} (mode 0600, over SSH stdin): {', '.join(split.secrets)}"]
            * bool(secrets)
        ),
        f"write {unit.dropin_path}:",
        *("  " + line for line in text.splitlines()),
        f"then: {sudo}systemctl daemon-reload; {sudo}systemctl restart {settings.unit}; wait for "
        f"{url} to serve this config",
    ]
