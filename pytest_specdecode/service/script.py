"""ssh + script: run the user's own reconfigure script over SSH.

The script may restart the server synchronously (``systemctl restart``) or in
the background (kill, then ``nohup ... &``); either way nothing here can see
the server process, so ``alive()`` is always True and ``failure()`` only
reports what ``logs_command`` cannot: the readiness gate decides. Because a
backgrounded restart can leave the old process answering for a moment,
``may_answer_stale`` is True: the gate gives a config mismatch a grace period
before it counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pytest_specdecode.service import ssh
from pytest_specdecode.service.base import (
    LaunchSpec,
    ProcessIdentity,
    ScriptFailed,
    ServiceError,
    ServiceStartError,
    last_lines,
)
from pytest_specdecode.service.remote import RemoteController

# Reading a log tail is quick, or the connection is in trouble.
LOGS_TIMEOUT = 10.0


class ScriptController(RemoteController):
    """Runs ``launch.script`` (values already shell-quoted) on the remote host.

    A non-zero exit raises :class:`ScriptFailed` whose first line holds the
    exit status and the last output lines. ``logs_command`` (optional, with a
    ``{tail}`` placeholder, e.g. ``tail -n {tail} /var/log/sglang.log``) is
    run remotely by :meth:`logs`; without it the logs are the script's output.
    ``timeout`` bounds the script (the plugin passes the ready timeout); a
    host or network that stalls is an error ``answer_margin`` s after that.
    """

    kind = "script"
    may_answer_stale = True

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        where: str = "remote host",
        logs_command: str | None = None,
        command_prefix: str = "",
        timeout: float = 1800.0,
        answer_margin: float = ssh.ANSWER_MARGIN,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(
            connect, where=where, command_prefix=command_prefix, answer_margin=answer_margin
        )
        self._logs_command = logs_command
        self.timeout = timeout
        self._clock = clock
        self._output = ""

    @property
    def output(self) -> str:
        """stdout then stderr of the last script run."""
        return self._output

    def apply(self, launch: LaunchSpec) -> ProcessIdentity:
        """Run the script; raise :class:`ScriptFailed` on a non-zero exit status."""
        if not launch.script:
            raise ServiceStartError(
                f"no reconfigure command for config {launch.label!r}: give --dflash-restart-cmd"
            )
        self._identity = None
        started = self._clock()
        result = self._run(launch.script, self.timeout)
        self._output = (result.stdout or "") + (result.stderr or "")
        if result.exited != 0:
            tail = last_lines(self._output, 30)
            brief = " | ".join(line.strip() for line in last_lines(self._output, 3).splitlines())
            raise ScriptFailed(
                f"reconfigure script {launch.script!r} on {self._where} exited with status "
                f"{result.exited} after {self._clock() - started:.1f} s for config "
                f"{launch.label!r}: {brief[-300:] or 'no output'}; run it there by hand to see why"
                + (f"\n--- script output (last lines) ---\n{tail}" if tail else ""),
                exit_status=result.exited,
                output=self._output,
            )
        self._identity = ProcessIdentity(
            kind=self.kind,
            started=datetime.now().isoformat(sep=" ", timespec="seconds"),
            command=launch.script,
        )
        return self._identity

    def logs(self, tail: int = 30) -> str:
        """``logs_command``'s output if configured, else the script's output."""
        if self._logs_command and tail > 0:
            try:
                result = self._run(self._logs_line(tail), LOGS_TIMEOUT)
            except ServiceError as exc:
                return f"(cannot read the logs: {exc})"
            return last_lines((result.stdout or "") + (result.stderr or ""), tail)
        return last_lines(self._output, tail)

    def process_log(self) -> str | None:
        """``logs_command``'s output (the current process's log, as the user defines it)."""
        if not self._logs_command:
            return None
        result = self._run(self._logs_line(100000), 60.0)
        return (result.stdout or "") + (result.stderr or "")

    def _logs_line(self, tail: int) -> str:
        # Only {tail} is filled in: any other brace (awk '{print}') is the user's shell text.
        assert self._logs_command is not None
        return self._logs_command.replace("{tail}", str(int(tail)))

    def log_location(self) -> str | None:
        """Where to look: the logs command, or the script's output."""
        if self._logs_command:
            return f"`{self._logs_line(200)}` on {self._where}"
        return f"the reconfigure script's output on {self._where}"
