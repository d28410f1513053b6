"""What every service controller shares: the launch it is given, the process
identity it proves, the errors it raises and the protocol it implements.

A controller brings one server to one config. It does not render configs:
the caller hands it a :class:`LaunchSpec` that a dialect already rendered, so
the same controller serves every dialect and user template.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pytest_specdecode.config import render
from pytest_specdecode.errors import SpecDecodeError


class ServiceError(SpecDecodeError, RuntimeError):
    """A service could not be brought to a config.

    The first line of the message is the one-line summary meant for users;
    further lines, if any, hold a log tail.
    """


class ServiceStartError(ServiceError):
    """``apply()`` failed: the command could not be started or restarted."""


class ScriptFailed(ServiceStartError):
    """The user's reconfigure script exited with a non-zero status."""

    def __init__(self, message: str, *, exit_status: int, output: str) -> None:
        super().__init__(message)
        self.exit_status = exit_status
        self.output = output


class SSHError(ServiceError):
    """Connecting to or running a command on the remote host failed."""


@dataclass(frozen=True)
class LaunchSpec:
    """What to run for one config, rendered by the caller.

    ``argv`` is the full command line (base launch command plus the dialect's
    flags), used by the local and systemd controllers; ``env`` holds the
    variables the dialect adds on top of the inherited environment.
    ``script`` is the user's reconfigure command for script mode, with the
    config's values already shell-quoted by the caller. ``label`` names the
    config in error messages. ``host`` and ``port`` are where the server
    will answer HTTP (the gate polls there); a local controller given a port
    checks it is free before launching and who listens on it afterwards.
    """

    argv: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    script: str | None = None
    label: str = ""
    host: str = "127.0.0.1"
    port: int | None = None

    @property
    def shell(self) -> str:
        """``argv`` as one shell-quoted line (what ``launch_command`` shows)."""
        return render.shell_join(self.argv)


@dataclass(frozen=True)
class ProcessIdentity:
    """Which process serves: proof that a restart produced a new one.

    ``pid`` and ``started`` come from the service manager (the local
    ``Popen``, systemd's ``MainPID`` / ``ExecMainStartTimestamp``); either may
    be ``None`` where the mode cannot know it (script, external). ``proof``
    says how the controller knows the process is new (systemd: the MainPID
    changed), or is None where it cannot tell by itself.
    """

    kind: str
    pid: int | None = None
    started: str | None = None
    command: str | None = None
    proof: str | None = None

    def describe(self) -> str:
        """Short human form, e.g. ``local pid 4242 started 2026-11-29 23:05:17``."""
        parts = [self.kind]
        if self.pid is not None:
            parts.append(f"pid {self.pid}")
        if self.started:
            parts.append(f"started {self.started}")
        return " ".join(parts)


@dataclass(frozen=True)
class ListenerCheck:
    """Whether the process answering on the server's port is the one started.

    ``ok`` is True (proven, ``detail`` says how), False (another process
    answers, ``detail`` says which) or None (this controller cannot see it).
    """

    ok: bool | None
    detail: str = ""


UNKNOWN_LISTENER = ListenerCheck(None)


@runtime_checkable
class ServiceController(Protocol):
    """Brings a server to a config and reports on the process it started.

    ``may_answer_stale`` is True where an old process may still answer HTTP
    for a moment after ``apply()`` returned (script mode: the script may
    restart the server in the background). The readiness gate then treats a
    config mismatch as "old process still answering" for a grace period
    instead of failing at once. Local and systemd controllers stop the old
    process before ``apply()`` returns, so a mismatch there is final.

    Cleanup (``stop``, ``restore``) is safe to call twice and after a
    half-finished setup.
    """

    kind: str
    may_answer_stale: bool

    def apply(self, launch: LaunchSpec) -> ProcessIdentity:
        """(Re)start the server with ``launch``; return the new process's identity."""
        ...

    def alive(self) -> bool:
        """Whether the started process is still running (True where unknowable)."""
        ...

    def failure(self) -> str | None:
        """Why the started process is gone (exit status, failed unit), or None."""
        ...

    def logs(self, tail: int = 30) -> str:
        """The last ``tail`` log lines written since the last ``apply()``."""
        ...

    def log_location(self) -> str | None:
        """Where the full log is, for error messages (a path, a journalctl command)."""
        ...

    def identity(self) -> ProcessIdentity | None:
        """The identity returned by the last successful ``apply()``."""
        ...

    def check_listener(self) -> ListenerCheck:
        """Who listens on the launched port: the started process, another one, or unknown."""
        ...

    def stop(self) -> None:
        """End what this controller started and release its resources.

        Local: stops the process group. Remote modes leave the remote service
        running (stopping a production unit at session end would be wrong) and
        close the SSH connection; :meth:`restore` is the explicit undo.
        """
        ...

    def restore(self) -> None:
        """Undo the config changes (systemd: remove the drop-in and restart)."""
        ...


class BaseController(ABC):
    """A controller that knows nothing beyond what it started: the "unknown" answers.

    Each controller subclasses it and overrides only what its mode can see:
    ``apply()`` always; the others where it knows more than "unknown" (alive:
    True, no failure, no logs, no log location, listener unknown, nothing to
    stop or restore). ``identity()`` is what the last ``apply()`` stored in
    ``_identity``.
    """

    kind: str
    may_answer_stale: bool = False
    _identity: ProcessIdentity | None = None

    @abstractmethod
    def apply(self, launch: LaunchSpec) -> ProcessIdentity:
        """(Re)start the server with ``launch``; return the new process's identity."""

    def alive(self) -> bool:
        """Unknown: True (the gate sees a dead server as refused connections or a timeout)."""
        return True

    def failure(self) -> str | None:
        """None: no process is watched here."""
        return None

    def logs(self, tail: int = 30) -> str:
        """No logs are reachable."""
        return ""

    def log_location(self) -> str | None:
        """None: the logs are nowhere this controller can point to."""
        return None

    def identity(self) -> ProcessIdentity | None:
        """The identity of the last successful ``apply()``."""
        return self._identity

    def check_listener(self) -> ListenerCheck:
        """Unknown: this controller cannot see who listens on the server's port."""
        return UNKNOWN_LISTENER

    def stop(self) -> None:
        """Nothing to stop."""
        return None

    def restore(self) -> None:
        """Nothing to undo."""
        return None


# A log line in a tail is cut past this: SGLang logs its whole ServerArgs on one line of
# several kB (``server_args=ServerArgs(...)``), which would bury the lines that say why.
LINE_CHARS = 300


def last_lines(text: str, tail: int, width: int = LINE_CHARS) -> str:
    """The last ``tail`` non-empty-trailing lines of ``text``, each cut at ``width``."""
    if tail <= 0:
        return ""
    lines = text.rstrip("\n").splitlines()
    return "\n".join(_cut(line, width) for line in lines[-tail:])


def _cut(line: str, width: int) -> str:
    if len(line) <= width:
        return line
    return f"{line[:width]}... ({len(line) - width:,} more characters)"
