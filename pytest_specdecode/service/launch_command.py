"""Where the server answers and what command line brings it to a config.

:func:`endpoint` decides the host and port the gate polls (a free port for the
local simulator unless one was given; the bound host under xdist);
:class:`LaunchRenderer` turns a config into the :class:`LaunchSpec` a
controller runs: the base launch command plus the dialect's flags and
environment, or the user's reconfigure script with the config's values.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass

from pytest_specdecode import facts
from pytest_specdecode.config import dialects, render
from pytest_specdecode.config.settings import Host, Settings
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.output import redact
from pytest_specdecode.processes.children import free_port
from pytest_specdecode.service.base import LaunchSpec

# Millisecond timestamps on SGLang's log lines (its configure_logger reads it): the
# start's phases are read from them (service.start_phases).
LOG_ENV = {"SGLANG_LOG_MS": "1"}


def url_host(host: str) -> str:
    """``host`` as it goes into a URL (IPv6 addresses in brackets)."""
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True)
class Endpoint:
    """Where the server answers HTTP."""

    host: str
    port: int

    @property
    def base_url(self) -> str:
        return f"http://{url_host(self.host)}:{self.port}"


def endpoint(settings: Settings, target: Host | None = None, port: int | None = None) -> Endpoint:
    """The server's address for ``settings``; ``target``/``port`` come from the xdist binding."""
    local = settings.control == "local"
    target = target or (settings.hosts[0] if settings.hosts else None)
    host = target.name if target is not None and not local else "127.0.0.1"
    if port is None:
        if local and settings.uses_simulator and not settings.port_given:
            port = free_port()
        else:
            port = settings.port
    return Endpoint(host, port)


class LaunchRenderer:
    """Renders each config into the command line (or script) for one endpoint."""

    def __init__(
        self,
        settings: Settings,
        dialect: dialects.Dialect,
        where: Endpoint,
        redactor: redact.Redactor | None = None,
    ) -> None:
        self.settings = settings
        self.dialect = dialect
        self.where = where
        self.redactor = redactor

    def render(self, config: SpecConfig) -> LaunchSpec:
        """The command line (or script) that brings the target to ``config``."""
        rendered = self.dialect.render(config)
        s = self.settings
        script = dialects.script_args(s.restart_cmd, config) if s.restart_cmd else None
        argv = shlex.split(s.launch)
        if s.control == "local":
            # "python" means the interpreter running pytest (its venv), as users expect.
            if argv and argv[0] in ("python", "python3"):
                argv[0] = sys.executable
            # The launch line's own --host/--port, in any spelling SGLang takes
            # (--host=0.0.0.0, --po 8000), are kept: a second one would override it.
            known = self.dialect.table if isinstance(self.dialect, dialects.SGLangDialect) else None
            table = known or facts.load()  # a template's program: SGLang's spellings at best
            if not table.gives(argv, "port"):
                if not table.gives(argv, "host"):
                    argv += ["--host", self.where.host]
                argv += ["--port", str(self.where.port)]
            if s.uses_simulator:  # play the SGLang build the dialect targets; its knobs
                argv += [*dialects.simulator_flags(self.dialect), *s.sim_args]
        argv += list(rendered.argv)
        if self.redactor is not None:
            # A key among the config's extra flags is masked from now on, everywhere.
            self.redactor.learn(render.shell_join(argv))
        return LaunchSpec(
            argv=render.argv(argv),
            env={**LOG_ENV, **rendered.env},
            script=script,
            label=config.label(),
            host=self.where.host,
            port=self.where.port if s.control == "local" else None,
        )
