"""Local service control: run the launch command as a child process group.

The server runs in its own session (so its whole process tree can be
signalled at once, and Ctrl-C in the terminal does not reach it before we
decide), with stdout and stderr going to one log file per ``apply()``.
A process of the launch that leaves the group (``setsid``, a daemon's double
fork) is still found, by lineage and by the launch's marker
(:mod:`pytest_specdecode.processes.lineage`): the gate knows it as started here, and
stopping ends it with the group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import IO

from pytest_specdecode.processes import lineage
from pytest_specdecode.processes.children import peek_exit, signal_group
from pytest_specdecode.service import identity
from pytest_specdecode.service.base import (
    UNKNOWN_LISTENER,
    BaseController,
    LaunchSpec,
    ListenerCheck,
    ProcessIdentity,
    ServiceStartError,
    last_lines,
)
from pytest_specdecode.service.ownership import Registry, parent_death_signal

# Enough for 30 long log lines without reading a multi-GB log.
_TAIL_BYTES = 256 * 1024


class LocalController(BaseController):
    """Runs each config's command line locally, one process group at a time.

    ``log_dir`` receives ``<name>-<n>.log`` per ``apply()`` (the plugin passes
    pytest's basetemp). ``stop_grace`` is how long SIGTERM gets before SIGKILL.
    """

    kind = "local"

    def __init__(
        self,
        log_dir: str | os.PathLike[str],
        *,
        name: str = "server",
        stop_grace: float = 10.0,
        cwd: str | os.PathLike[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        outlives_run: bool = False,
    ) -> None:
        self._log_dir = Path(log_dir)
        # True: what it starts is not ended by this process's death (a kept weight-cache daemon).
        self._outlives_run = outlives_run
        self._name = name
        self._stop_grace = stop_grace
        self._cwd = cwd
        self._clock = clock
        self._sleep = sleep
        self._proc: subprocess.Popen[bytes] | None = None
        self._lineage: lineage.Launch | None = None
        self._log_file: IO[bytes] | None = None
        self._log_path: Path | None = None
        self._identity = None  # set by apply(), cleared by stop()
        self._port: int | None = None
        self._count = 0
        # Under xdist: where each started server is recorded, so whoever outlives
        # this worker can stop it (set by the service manager).
        self.registry: Registry | None = None

    @property
    def log_path(self) -> Path | None:
        """The log file of the last ``apply()``."""
        return self._log_path

    def apply(self, launch: LaunchSpec) -> ProcessIdentity:
        """Stop the running group, then start ``launch.argv`` with ``launch.env`` added."""
        if not launch.argv:
            raise ServiceStartError(
                f"no command to launch for config {launch.label!r}: give a launch command"
            )
        self.stop()
        self._port = launch.port
        if launch.port is not None:
            self._check_port_free(launch)
        self._log_dir.mkdir(parents=True, exist_ok=True)
        self._count += 1
        self._log_path = self._log_dir / f"{self._name}-{self._count}.log"
        log = open(self._log_path, "wb")  # noqa: SIM115 - closed in stop()
        tracked = lineage.Launch()
        tracked.begin()
        env = {**os.environ, **launch.env, **tracked.env}
        try:
            self._proc = subprocess.Popen(
                list(launch.argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self._cwd,
                start_new_session=True,
                # Nothing the run started outlives it: the server ends with this process.
                # Not under xdist (a registry): other workers may use it after this one
                # exits; there whoever outlives the owner stops it through the record.
                preexec_fn=(
                    parent_death_signal()
                    if self.registry is None and not self._outlives_run
                    else None
                ),
            )
        except OSError as exc:
            log.close()
            tracked.close()
            raise ServiceStartError(
                f"cannot start {launch.argv[0]!r} for config {launch.label!r}: "
                f"{exc.strerror or exc}; check the launch command {launch.shell!r}"
            ) from exc
        self._log_file = log
        tracked.started(self._proc.pid)
        self._lineage = tracked
        if self.registry is not None:  # before the readiness wait: a kill there is covered
            self.registry.record(
                self._proc.pid, port=launch.port, label=launch.label, marker=tracked.token
            )
        started = datetime.now().isoformat(sep=" ", timespec="seconds")
        self._identity = ProcessIdentity(
            kind=self.kind, pid=self._proc.pid, started=started, command=launch.shell
        )
        return self._identity

    def _check_port_free(self, launch: LaunchSpec) -> None:
        # A server already on the port would answer the gate while the new
        # one fails to bind: the gate would verify the wrong process.
        assert launch.port is not None
        if not identity.port_busy(launch.host, launch.port):
            return
        holder = identity.listener(launch.port)
        who = holder.describe() if holder is not None else "a process"
        raise ServiceStartError(
            f"port {launch.port} on {launch.host} is already served by another process "
            f"({who}) before starting config {launch.label!r}: stop it, or give the plugin "
            "another port (--dflash-port), or --dflash-restart=never to test that server as it is",
            reason="port-busy",
            config=launch.label,
        )

    def check_listener(self) -> ListenerCheck:
        """Whether the process listening on the launched port belongs to the started server.

        The server was started as a session leader, so each of its processes
        (SGLang's HTTP server may be a child) has the leader's pid as session id,
        unless it left the session: then it is the launch's by lineage or marker.
        """
        if self._proc is None or self._port is None:
            return UNKNOWN_LISTENER
        holder = identity.listener(self._port)
        if holder is None or not holder.pids:
            return UNKNOWN_LISTENER
        launched = set(self._lineage.processes()) if self._lineage is not None else set()
        ours = {
            pid
            for pid in holder.pids
            if identity.session_of(pid) == self._proc.pid or pid in launched
        }
        if ours:
            shown = ", ".join(map(str, sorted(ours)))
            return ListenerCheck(True, f"port {self._port} is served by pid {shown} (started here)")
        return ListenerCheck(
            False,
            f"port {self._port} is served by {holder.describe()}, not by the server started "
            f"here (pid {self._proc.pid})",
        )

    def alive(self) -> bool:
        """Whether the started process (the group leader) still runs."""
        return self._proc is not None and self._proc.poll() is None

    def failure(self) -> str | None:
        """``exited with status N`` / ``killed by signal SIGX``, or None while running."""
        if self._proc is None:
            return None
        code = self._proc.poll()
        if code is None:
            return None
        return describe_exit(code)

    def logs(self, tail: int = 30) -> str:
        """The last ``tail`` lines of the current log file."""
        return "" if self._log_path is None else read_tail(self._log_path, tail)

    def process_log(self) -> str | None:
        """The current process's whole log (its own file, from its start), up to 16 MB."""
        if self._log_path is None:
            return None
        try:
            with open(self._log_path, "rb") as fh:
                return fh.read(16 * 1024 * 1024).decode("utf-8", "replace")
        except OSError:
            return None

    def log_location(self) -> str | None:
        """Path of the current log file."""
        return None if self._log_path is None else str(self._log_path)

    def stop(self) -> None:
        """SIGTERM the whole process group and every process of the launch outside it,
        SIGKILL after the grace, reap, close the log."""
        proc, self._proc = self._proc, None
        tracked, self._lineage = self._lineage, None
        self._identity = None
        try:
            if proc is not None and tracked is not None:
                _stop_launch(proc, tracked, self._stop_grace, self._clock, self._sleep)
                if self.registry is not None:
                    self.registry.forget(proc.pid)
        finally:
            if tracked is not None:
                tracked.close()
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None

    def restore(self) -> None:
        """Nothing to undo locally beyond stopping the process."""
        self.stop()


def read_tail(path: str | os.PathLike[str], tail: int) -> str:
    """The last ``tail`` lines of a log file ("" when unreadable)."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - _TAIL_BYTES))
            data = fh.read()
    except OSError:
        return ""
    return last_lines(data.decode("utf-8", "replace"), tail)


def describe_exit(code: int) -> str:
    """A ``Popen.returncode`` in words."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"killed by signal {name}"
    return f"exited with status {code}"


def group_running(pgid: int) -> bool:
    """Whether any non-zombie process is left in group ``pgid``.

    Orphaned children are reparented to PID 1, which in containers often does
    not reap them: their zombies keep the group "existing" for ``killpg``
    although nothing runs. On Linux, /proc tells zombies apart.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc/self"):
        return True
    return any(e.pgrp == pgid and e.running for e in lineage.table().values())


def stop_group_id(
    pgid: int,
    grace: float = 10.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Stop a process group this process did not start (another xdist worker's server)."""
    _signal_group(pgid, signal.SIGTERM)
    deadline = clock() + grace
    while group_running(pgid):
        if clock() > deadline:
            _signal_group(pgid, signal.SIGKILL)
            break
        sleep(0.05)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _stop_launch(
    proc: subprocess.Popen[bytes],
    tracked: lineage.Launch,
    grace: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> None:
    # start_new_session made the child a group leader: its pid is the pgid.
    # Children may outlive the leader (SGLang's scheduler processes), so wait
    # for the group to vanish, not only for the leader.
    # The leader is reaped only at the end: until then its zombie keeps the
    # pgid taken, so no other process can be signalled under that number.
    # The launch's processes outside the group are signalled first, while the
    # leader still links them to the launch (setsid -w's child, say).
    pgid = proc.pid
    tracked.signal(signal.SIGTERM)
    signal_group(proc, signal.SIGTERM)
    deadline = clock() + grace
    while clock() < deadline:
        if peek_exit(proc) is not None and not group_running(pgid) and not tracked.processes():
            break
        sleep(0.05)
    else:
        signal_group(proc, signal.SIGKILL)
        tracked.kill(grace, clock, sleep)
    proc.wait()
    tracked.reap()
