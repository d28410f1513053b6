"""ssh + systemd: restart a unit with the config's command line via a drop-in.

``apply()`` writes ``<unit_dir>/<unit>.d/50-specdecode.conf`` (an empty
``ExecStart=`` to clear the unit's own, then the full command line, plus
``Environment=`` lines), runs ``systemctl daemon-reload`` and ``systemctl
restart``. ``systemctl restart`` returns after the old main process is gone
and the new one is started, so the process that answers HTTP afterwards is
the new one; its identity (``MainPID``, ``ExecMainStartTimestamp``) must
differ from the one before the restart.
"""

from __future__ import annotations

import contextlib
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pytest_specdecode.service import ssh
from pytest_specdecode.service.base import (
    UNKNOWN_LISTENER,
    LaunchSpec,
    ListenerCheck,
    ProcessIdentity,
    ServiceError,
    ServiceStartError,
    SSHError,
    last_lines,
)

DEFAULT_UNIT_DIR = "/etc/systemd/system"
DROPIN_NAME = "50-specdecode.conf"

_SAFE_WORD = re.compile(r"[A-Za-z0-9_./:=,+@%$-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Reading a log tail is quick, or the connection is in trouble.
LOGS_TIMEOUT = 10.0


def quote_exec_word(word: str) -> str:
    """Quote one argv element for ``ExecStart=`` (systemd.service(5) command lines).

    systemd expands ``%`` specifiers and ``$VAR`` in command lines, so both are
    doubled; anything beyond a safe character set is double-quoted with C-style
    escapes.
    """
    word = word.replace("%", "%%").replace("$", "$$")
    if word == ";":
        return "\\;"
    if _SAFE_WORD.fullmatch(word):
        return word
    escaped = (
        word.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    )
    return f'"{escaped}"'


def quote_environment(name: str, value: str) -> str:
    """One ``Environment="NAME=VALUE"`` line, quoted for systemd."""
    if not _ENV_NAME.fullmatch(name):
        raise ValueError(f"invalid environment variable name {name!r} for a systemd unit")
    assignment = f"{name}={value}".replace("%", "%%")
    escaped = assignment.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'Environment="{escaped}"'


def render_dropin(argv: Iterable[str], env: Mapping[str, str], *, label: str = "") -> str:
    """The drop-in text replacing the unit's ``ExecStart`` and adding ``env``."""
    words = list(argv)
    if not words:
        raise ValueError("cannot render a systemd drop-in without a command line")
    lines = [
        "# Written by pytest-specdecode"
        + (f" for config {label!r}" if label else "")
        + "; removed by --dflash-restore.",
        "[Service]",
        "ExecStart=",
        "ExecStart=" + " ".join(quote_exec_word(w) for w in words),
    ]
    lines.extend(quote_environment(k, v) for k, v in sorted(env.items()))
    return "\n".join(lines) + "\n"


def parse_properties(text: str) -> dict[str, str]:
    """``systemctl show`` output (``Key=value`` lines) as a dict."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


class SystemdController:
    """Reconfigures and restarts ``unit`` on a remote host over SSH.

    ``connect`` opens a fabric connection (see :func:`ssh.connection_factory`);
    ``where`` names the host in messages. ``sudo`` prefixes privileged commands
    with ``sudo -n`` (never prompts). ``unit_dir`` is where the drop-in
    directory goes. ``command_prefix`` is raw shell text put before every
    remote command (e.g. ``PATH=/opt/bin:$PATH; export PATH; ``).
    """

    kind = "systemd"
    may_answer_stale = False

    def __init__(
        self,
        connect: Callable[[], Any],
        unit: str,
        *,
        where: str = "remote host",
        sudo: bool = False,
        unit_dir: str = DEFAULT_UNIT_DIR,
        dropin_name: str = DROPIN_NAME,
        command_prefix: str = "",
        command_timeout: float = 180.0,
    ) -> None:
        self._connect = connect
        self.unit = unit
        self._where = where
        self._sudo = "sudo -n " if sudo else ""
        self.dropin_dir = f"{unit_dir.rstrip('/')}/{unit}.d"
        self.dropin_path = f"{self.dropin_dir}/{dropin_name}"
        self._prefix = command_prefix
        self._timeout = command_timeout
        self._conn: Any = None
        self._identity: ProcessIdentity | None = None
        self._since: str | None = None
        self._touched = False

    # -- remote plumbing -------------------------------------------------

    def _run(self, command: str, *, timeout: float | None = None) -> Any:
        if self._conn is None:
            self._conn = self._connect()
        try:
            return ssh.run(
                self._conn,
                self._prefix + command,
                timeout=self._timeout if timeout is None else timeout,
                where=self._where,
            )
        except SSHError:
            # A stalled or broken connection is not reused: the next step reconnects.
            conn, self._conn = self._conn, None
            ssh.close_quietly(conn)
            raise

    def _check(self, command: str) -> Any:
        result = self._run(command)
        if result.exited != 0:
            output = (result.stderr or result.stdout or "").strip()
            raise ServiceStartError(
                f"{command!r} on {self._where} failed with exit status {result.exited}: "
                f"{last_lines(output, 1) or 'no output'}; run it there by hand to see why"
            )
        return result

    def _systemctl(self, args: str) -> str:
        return f"{self._sudo}systemctl {args} {shlex.quote(self.unit)}"

    def _show(self) -> dict[str, str]:
        result = self._check(self._systemctl("show -p MainPID -p ExecMainStartTimestamp"))
        return parse_properties(result.stdout)

    # -- ServiceController -----------------------------------------------

    def apply(self, launch: LaunchSpec) -> ProcessIdentity:
        """Write the drop-in, daemon-reload, restart; return the new MainPID identity.

        Three SSH round trips: read the old identity; write + reload + read the
        remote clock (for ``journalctl --since``); restart + read the new identity.
        """
        text = render_dropin(launch.argv, launch.env, label=launch.label)
        show = "show -p MainPID -p ExecMainStartTimestamp"
        before = parse_properties(self._check(self._systemctl(show)).stdout)
        self._touched = True
        self._identity = None
        self._since = self._write_dropin_and_reload(text)
        restart = self._run(self._systemctl("restart") + " && " + self._systemctl(show))
        if restart.exited != 0:
            output = (restart.stderr or restart.stdout or "").strip()
            raise ServiceStartError(
                f"systemctl restart {self.unit!r} on {self._where} failed for config "
                f"{launch.label!r} (exit status {restart.exited}): "
                f"{last_lines(output, 1) or 'no output'}; see {self.log_location()}"
                + _tail_block(self.logs())
            )
        after = parse_properties(restart.stdout)
        pid = int(after.get("MainPID") or 0)
        started = after.get("ExecMainStartTimestamp") or None
        if pid and (after.get("MainPID"), started) == (
            before.get("MainPID"),
            before.get("ExecMainStartTimestamp") or None,
        ):
            raise ServiceStartError(
                f"systemctl restart {self.unit!r} on {self._where} left the same process "
                f"running (MainPID {pid}, started {started!r}); check the unit's type and "
                f"ExecReload/RefuseManualStart settings"
            )
        # MainPID 0 means the process already exited: the gate's failure() says so.
        old = before.get("MainPID") or "0"
        self._identity = ProcessIdentity(
            kind=self.kind,
            pid=pid or None,
            started=started,
            command=launch.shell,
            proof=f"MainPID {old} -> {pid}, started {started}" if pid else None,
        )
        return self._identity

    def _write_dropin_and_reload(self, text: str) -> str:
        tmp = self.dropin_path + ".tmp"
        write = (
            f"umask 022 && mkdir -p {shlex.quote(self.dropin_dir)} && "
            f"printf %s {shlex.quote(text)} > {shlex.quote(tmp)} && "
            f"mv -f {shlex.quote(tmp)} {shlex.quote(self.dropin_path)}"
        )
        if self._sudo:
            write = f"{self._sudo}sh -c {shlex.quote(write)}"
        # Distinct exit statuses tell the steps apart in one round trip.
        result = self._run(
            f"{{ {write}; }} || exit 90; {self._sudo}systemctl daemon-reload || exit 91; date +%s"
        )
        stderr = last_lines((result.stderr or "").strip(), 1) or "no output"
        if result.exited == 90:
            raise ServiceStartError(
                f"cannot write {self.dropin_path!r} on {self._where} ({stderr}); "
                "connect as root or pass the sudo option (passwordless sudo needed)"
            )
        if result.exited != 0:
            raise ServiceStartError(
                f"systemctl daemon-reload on {self._where} failed with exit status "
                f"{result.exited} ({stderr}); run it there by hand to see why"
            )
        since = (result.stdout or "").strip().splitlines()
        return since[-1] if since and since[-1].isdigit() else "0"

    def alive(self) -> bool:
        """True while :meth:`failure` sees nothing wrong."""
        return self.failure() is None

    def failure(self) -> str | None:
        """The unit failed, went inactive, is auto-restarting, or its MainPID changed."""
        result = self._run(
            self._systemctl("is-failed")
            + "; "
            + self._systemctl(
                "show -p ActiveState -p SubState -p Result -p MainPID -p ExecMainStatus"
            )
        )
        lines = (result.stdout or "").splitlines()
        state = lines[0].strip() if lines else "unknown"
        props = parse_properties("\n".join(lines[1:]))
        detail = (
            f"Result={props.get('Result', '?')}, exit status {props.get('ExecMainStatus', '?')}"
        )
        sub = props.get("SubState", "")
        if state in ("failed", "inactive") or props.get("ActiveState") in ("failed", "inactive"):
            return f"unit {self.unit!r} is {state} ({detail})"
        if sub == "auto-restart":
            return f"unit {self.unit!r} crashed and waits to be restarted by systemd ({detail})"
        pid = props.get("MainPID", "0")
        if (
            self._identity is not None
            and self._identity.pid
            and pid not in ("0", str(self._identity.pid))
        ):
            return (
                f"unit {self.unit!r} restarted since the reconfigure (MainPID "
                f"{self._identity.pid} -> {pid}): the server exited ({detail})"
            )
        return None

    def logs(self, tail: int = 30) -> str:
        """``journalctl -u UNIT --since @<restart time>``; errors come back as text."""
        if self._since is None or tail <= 0:
            return ""
        command = (
            f"{self._sudo}journalctl -u {shlex.quote(self.unit)} --since @{self._since} "
            f"--no-pager -o cat -n {int(tail)}"
        )
        try:
            result = self._run(command, timeout=LOGS_TIMEOUT)
        except ServiceError as exc:
            return f"(cannot read the journal: {exc})"
        return last_lines(result.stdout or "", tail)

    def process_log(self) -> str | None:
        """The drafter's start-up lines from the journal of the unit's *current* MainPID.

        ``_PID=`` (journald files a service's stdout under its main PID, children
        included) and the restart time keep older processes' lines out.
        """
        pid = self._identity.pid if self._identity is not None else None
        if not pid:
            return None
        since = f" --since @{self._since}" if self._since else ""
        command = (
            f"{self._sudo}journalctl _SYSTEMD_UNIT={shlex.quote(self.unit)} _PID={int(pid)}"
            f"{since} --no-pager -o cat | grep -a -E "
            "'Initialized (DFLASH draft runner|DDTree worker)' | tail -n 20"
        )
        result = self._run(command, timeout=60.0)
        return str(result.stdout or "")

    def log_location(self) -> str | None:
        """The journalctl command that shows the full log."""
        since = f" --since @{self._since}" if self._since else ""
        return f"`journalctl -u {self.unit}{since}` on {self._where}"

    def identity(self) -> ProcessIdentity | None:
        """Identity from the last successful ``apply()``."""
        return self._identity

    def check_listener(self) -> ListenerCheck:
        """Unknown remotely: ``MainPID`` is the identity ``apply()`` proves."""
        return UNKNOWN_LISTENER

    def restore(self) -> None:
        """Remove the drop-in, daemon-reload and restart, if ``apply()`` touched the unit."""
        if not self._touched:
            return
        self._check(
            f"{self._sudo}rm -f {shlex.quote(self.dropin_path)} && "
            f"{self._sudo}systemctl daemon-reload && {self._systemctl('restart')}"
        )
        self._touched = False
        self._identity = None

    def stop(self) -> None:
        """Close the SSH connection; the unit keeps running."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(OSError, SSHError):
                conn.close()


def _tail_block(text: str) -> str:
    return f"\n--- last log lines ---\n{text}" if text.strip() else ""
