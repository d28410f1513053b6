"""``--dflash-weight-cache``: one SGLang weight-cache daemon per host, every config its client.

SGLang 0.5.23 loads weights through a daemon that holds them in GPU memory
(``srt/weight_cache/``): started on its own with ``python -m
sglang.srt.weight_cache.daemon`` and the server's arguments, it outlives the
engines that map its weights (``--weight-cache-mode client``), which is what
makes a restart skip the load; an engine-spawned daemon
(``--weight-cache-mode daemon``) dies with its engine. The daemon and its
clients find each other through ``SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE`` and
``SGLANG_WEIGHT_CACHE_READY_TEMPLATE`` (``{device_uuid}`` in each: one daemon
per GPU, so no one ``--weight-cache-socket`` path serves a TP group): the
plugin points both at a directory of its own. The daemon is ready when it
logs ``All N weight cache daemons on node R are ready (...)``.

:class:`WeightCache` starts the daemon (through a controller of
:mod:`pytest_specdecode.service`, as a server is started), waits for that line,
turns each config's launch into a client's, checks before every start that
the daemon still runs, and stops it at the end unless asked to keep it. A
daemon that cannot start, or died, is one line (:class:`WeightCacheFailed`);
with ``,fallback`` configs load from disk instead, said once.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_specdecode import statefiles
from pytest_specdecode.config.settings import Host, Settings
from pytest_specdecode.service.base import (
    LaunchSpec,
    ServiceController,
    ServiceStartError,
    last_lines,
)
from pytest_specdecode.service.launch_command import LOG_ENV

# The module a launch command runs, and the module of its standalone daemon.
DAEMON_MODULES = {
    "sglang.launch_server": "sglang.srt.weight_cache.daemon",
    "pytest_specdecode.sim": "pytest_specdecode.sim.weight_cache",
}
READY = re.compile(r"All \d+ weight cache daemons on node \d+ are ready")
CLIENT_FLAGS = ("--weight-cache-mode", "client")


class WeightCacheFailed(ServiceStartError):
    """The weight-cache daemon could not be started, or is gone (``reason`` ``weight-cache``);
    ``what`` is the line without the advice."""

    what = ""


def daemon_argv(launch: str, *, local: bool = True) -> list[str]:
    """The daemon's command line for the ``launch`` command: the same interpreter and
    arguments, its daemon module instead of the server's (``sglang serve`` too: the
    ``python`` beside that ``sglang``). ``local``: a leading ``python`` is pytest's own."""
    argv = shlex.split(launch)
    if local and argv and argv[0] in ("python", "python3"):
        argv[0] = sys.executable  # as the server's launch (launch_command.LaunchRenderer)
    for i, word in enumerate(argv[:-1]):
        if word == "-m" and argv[i + 1] in DAEMON_MODULES:
            return [*argv[: i + 1], DAEMON_MODULES[argv[i + 1]], *argv[i + 2 :]]
    if len(argv) >= 2 and argv[0].rsplit("/", 1)[-1] == "sglang" and argv[1] == "serve":
        where, _, _ = argv[0].rpartition("/")
        python = sys.executable if local else (f"{where}/python" if where else "python3")
        return [python, "-m", DAEMON_MODULES["sglang.launch_server"], *argv[2:]]
    raise WeightCacheFailed(
        f"--dflash-weight-cache needs a launch command that runs "
        f"{' or '.join(f'-m {m}' for m in DAEMON_MODULES)} or 'sglang serve' (its daemon is the "
        f"same command with the daemon module), not {launch!r}",
        reason="weight-cache",
    )


@dataclass(frozen=True)
class CachePaths:
    """Where the daemon listens and says it is ready (SGLang's templates, in our directory)."""

    directory: str

    @classmethod
    def fresh(cls) -> CachePaths:
        # Under /tmp, short: a Unix socket's path must fit in 107 bytes.
        return cls(tempfile.mkdtemp(prefix="dflash-wc-", dir="/tmp"))

    def env(self) -> dict[str, str]:
        return {
            "SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE": f"{self.directory}/{{device_uuid}}.sock",
            "SGLANG_WEIGHT_CACHE_READY_TEMPLATE": f"{self.directory}/{{device_uuid}}.ready",
        }


class WeightCache:
    """The daemon of one host and the client mode of every config started there."""

    def __init__(
        self,
        settings: Settings,
        controller: ServiceController,
        *,
        paths: CachePaths | None = None,
        timeout: float | None = None,
        poll: float = 0.1,
    ) -> None:
        self.setting = settings.weight_cache
        self.settings = settings
        self.controller = controller
        self.paths = paths
        self.timeout = settings.ready_timeout if timeout is None else timeout
        self.poll = poll
        self.pid: int | None = None
        self.started = False
        # Set once the daemon failed and configs load from disk (,fallback): why.
        self.fell_back: str | None = None

    @property
    def mode(self) -> str:
        """What the next config's start is: ``client`` (through the daemon) or ``off``."""
        return "off" if self.fell_back is not None else "client"

    def ensure(self, on_fallback: Callable[[str], None]) -> None:
        """Before a start: the daemon runs and is ready (started the first time), or
        ``on_fallback`` is told once why configs load from disk, or :class:`WeightCacheFailed`."""
        if self.fell_back is not None:
            return
        try:
            if not self.started:
                self.started = True
                self._start()
            elif (failure := self.controller.failure()) is not None:
                raise self._failed(f"{failure} after it was ready; configs cannot load through it")
        except WeightCacheFailed as exc:
            if not self.setting.fallback:
                raise
            self.fell_back = exc.what or exc.summary
            on_fallback(f"{self.fell_back}; every config loads its weights from disk (,fallback)")

    def client(self, launch: LaunchSpec) -> LaunchSpec:
        """``launch`` as a client of the daemon (unchanged once fallen back)."""
        if self.fell_back is not None or self.paths is None:
            return launch
        return replace(
            launch,
            argv=(*launch.argv, *CLIENT_FLAGS),
            env={**launch.env, **self.paths.env()},
        )

    def _start(self) -> None:
        argv = daemon_argv(self.settings.launch, local=self.settings.control == "local")
        if self.settings.uses_simulator:
            argv += list(self.settings.sim_args)
        self.paths = self.paths or CachePaths.fresh()
        launch = LaunchSpec(
            argv=tuple(argv),
            env={**LOG_ENV, **self.paths.env()},
            label="weight-cache daemon",
        )
        try:
            identity = self.controller.apply(launch)
        except ServiceStartError as exc:
            raise self._failed(f"could not be started: {exc.summary}") from None
        self.pid = identity.pid
        try:
            statefiles.wait_until(
                self._ready, timeout=self.timeout, what="the weight-cache daemon", poll=self.poll
            )
        except statefiles.WaitTimeout:
            raise self._failed(
                f"was not ready within {self.timeout:g} s (no 'All ... weight cache daemons ... "
                "are ready' line); raise --dflash-ready-timeout if it is only slow"
            ) from None

    def _ready(self) -> bool:
        failure = self.controller.failure()
        if failure is not None:
            raise self._failed(f"{failure} before it was ready")
        return READY.search(self.controller.logs(200)) is not None

    def _failed(self, what: str) -> WeightCacheFailed:
        pid = f" (pid {self.pid})" if self.pid else ""
        tail = last_lines(self.controller.logs(5), 1, 160)
        last = f": {tail.strip()}" if tail.strip() else ""
        where = self.controller.log_location()
        log = f"; log: {where}" if where else ""
        line = f"weight-cache daemon{pid} {what}{last}{log}"
        failed = WeightCacheFailed(
            f"{line}; fix it, run without --dflash-weight-cache, or add ',fallback' to load "
            "from disk",
            reason="weight-cache",
        )
        failed.what = line
        return failed

    def finish(self) -> str | None:
        """Stop the daemon, unless kept; the line saying it was kept, or None."""
        if not self.started:
            return None
        unit = getattr(self.controller, "unit", None)
        if self.setting.keep and self.fell_back is None and self.controller.failure() is None:
            if self.settings.control != "local":  # closes the SSH connection; the unit runs on
                self.controller.stop()
            env = " ".join(f"{k}={v}" for k, v in (self.paths.env() if self.paths else {}).items())
            how = f"systemctl stop {unit}" if unit else f"kill {self.pid}"
            return (
                f"weight-cache daemon (pid {self.pid}) left running (--dflash-weight-cache keep); "
                f"its clients need {env}; stop it with: {how}"
            )
        try:
            self.controller.restore()  # systemd: the daemon's own unit stopped and removed
        finally:
            self.controller.stop()
        if self.paths is not None and self.settings.control == "local":
            shutil.rmtree(self.paths.directory, ignore_errors=True)
        return None


def for_settings(
    settings: Settings, log_dir: Path, root: Path | None, host: Host | None
) -> WeightCache:
    """The weight cache of one host: a local process beside local servers; under systemd a
    unit of its own beside the server's (``<unit>-weight-cache.service``), sockets in /run."""
    if settings.control == "local":
        from pytest_specdecode.service.local import LocalController

        local = LocalController(
            log_dir, name="weight-cache", cwd=root, outlives_run=settings.weight_cache.keep
        )
        return WeightCache(settings, local)
    from pytest_specdecode.service.controllers import build_controller

    assert settings.unit is not None
    stem = settings.unit.removesuffix(".service")
    unit = f"{stem}-weight-cache.service"
    runtime = f"pytest-specdecode-{re.sub(r'[^A-Za-z0-9_.-]', '_', stem)}-weight-cache"
    daemon = build_controller(
        settings, log_dir, root, host, unit=unit, whole_unit=True, runtime_directory=runtime
    )
    return WeightCache(settings, daemon, paths=CachePaths(f"/run/{runtime}"))
