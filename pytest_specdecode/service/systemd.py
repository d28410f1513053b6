"""ssh + systemd: restart a unit with the config's command line via a drop-in.

``apply()`` writes ``<unit_dir>/<unit>.d/50-specdecode.conf`` (an empty
``ExecStart=`` to clear the unit's own, then the full command line, plus
``Environment=`` lines), runs ``systemctl daemon-reload`` and ``systemctl
restart``. ``systemctl restart`` returns after the old main process is gone
and the new one is started, so the process that answers HTTP afterwards is
the new one; its identity (``MainPID``, ``ExecMainStartTimestamp``) must
differ from the one before the restart.

No value becomes an option of a remote program: the unit name is checked
against systemd.unit(5)'s grammar (never starting with ``-``), and every
value stands after ``--`` (systemctl's unit, the paths of ``mkdir``, ``rm``,
``mv``, journalctl's matches) or glued to its option (``--unit=UNIT``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_specdecode.config import parsers, render
from pytest_specdecode.output import redact
from pytest_specdecode.service.base import (
    LaunchSpec,
    ProcessIdentity,
    ServiceError,
    ServiceStartError,
    last_lines,
)
from pytest_specdecode.service.remote import RemoteController
from pytest_specdecode.service.start_phases import LOG_GREP

# What the gate reads of a start's journal: the drafter's lines and the phases'.
LOG_LINES = f"Initialized (DFLASH draft runner|DDTree worker)|{LOG_GREP}"

DEFAULT_UNIT_DIR = "/etc/systemd/system"
DROPIN_NAME = "50-specdecode.conf"
# Beside the drop-in; systemd reads only *.conf there as unit settings.
SECRETS_SUFFIX = ".secrets"

# Reading a log tail is quick, or the connection is in trouble.
LOGS_TIMEOUT = 10.0


@dataclass(frozen=True)
class Split:
    """A command line with its secrets taken out.

    ``argv`` holds :class:`render.EnvRef` words where a secret was (systemd
    fills them in from ``secrets`` at exec time), ``secrets`` maps the
    variable names to the values, for a mode-0600 ``EnvironmentFile=``.
    """

    argv: tuple[render.Word, ...]
    secrets: dict[str, str]

    def environment_file(self) -> str:
        """The ``EnvironmentFile=`` text holding the secrets."""
        return "".join(render.environment_file_line(k, v) for k, v in self.secrets.items())


def split_secrets(argv: Iterable[str], known: Iterable[str | None] = ()) -> Split:
    """Take API keys out of ``argv``: the value of every ``--*-api-key`` flag (as
    ``--api-key KEY`` or ``--api-key=KEY``) and any word equal to a ``known`` secret."""
    secrets: dict[str, str] = {}
    literal = {k for k in known if k}

    def ref(flag: str, value: str) -> render.EnvRef:
        base = "SPECDECODE_" + (re.sub(r"[^A-Za-z0-9]+", "_", flag.strip("-")).upper() or "SECRET")
        name, n = base, 1
        while name in secrets and secrets[name] != value:
            n += 1
            name = f"{base}_{n}"
        secrets[name] = value
        return render.EnvRef(name)

    out: list[render.Word] = []
    after: str | None = None
    for word in argv:
        flag, eq, value = word.partition("=")
        if after is not None:
            out.append(ref(after, word))
            after = None
        elif redact.is_secret_flag(word):
            out.append(word)
            after = word
        elif eq and redact.is_secret_flag(flag) and value:
            out.append(render.EnvRef(ref(flag, value).name, prefix=flag + "="))
        elif word in literal and out:
            out.append(ref("secret", word))
        else:
            out.append(word)
    return Split(tuple(out), secrets)


def render_dropin(
    argv: Iterable[render.Word],
    env: Mapping[str, str],
    *,
    label: str = "",
    environment_file: str | None = None,
) -> str:
    """The drop-in text replacing the unit's ``ExecStart`` and adding ``env``.

    ``environment_file`` (an absolute path) is read by systemd before it runs
    the command: :class:`render.EnvRef` words of ``argv`` are filled from it.
    """
    # The label is the config's own text: as data in a comment, never a line of its own.
    shown = f" for config {label!r}" if label and render.control_character(label) is None else ""
    lines = [
        f"# Written by pytest-specdecode{shown}; removed by --dflash-restore.",
        "[Service]",
        "ExecStart=",
        *_exec_lines(argv, env, environment_file, "drop-in"),
    ]
    return "\n".join(lines) + "\n"


def _exec_lines(
    argv: Iterable[render.Word], env: Mapping[str, str], environment_file: str | None, what: str
) -> list[str]:
    """``[Service]``'s command and environment lines, as a drop-in and a unit write them."""
    words = list(argv)
    if not words:
        raise ValueError(f"cannot render a systemd {what} without a command line")
    lines = ["ExecStart=" + render.systemd_command(words)]
    lines.extend(render.systemd_environment(k, v) for k, v in sorted(env.items()))
    if environment_file is not None:
        lines.append("EnvironmentFile=" + render.systemd_path(environment_file))
    return lines


def render_unit(
    argv: Iterable[render.Word],
    env: Mapping[str, str],
    *,
    label: str = "",
    environment_file: str | None = None,
    runtime_directory: str | None = None,
) -> str:
    """A whole service unit of its own running ``argv`` (a weight-cache daemon).

    ``runtime_directory``: a directory under ``/run`` systemd creates before the
    start and removes at the stop (``RuntimeDirectory=``), for its sockets.
    """
    if runtime_directory is not None and not re.fullmatch(r"[A-Za-z0-9_.-]+", runtime_directory):
        raise ValueError(f"not a RuntimeDirectory= name: {runtime_directory!r}")
    shown = label if label and render.control_character(label) is None else "a server"
    shown = shown.replace("%", "%%")  # Description= expands specifiers
    lines = [
        "# Written by pytest-specdecode; removed at the end of its run unless kept.",
        "[Unit]",
        f"Description=pytest-specdecode {shown}",
        "[Service]",
        "Type=simple",
        *_exec_lines(argv, env, environment_file, "unit"),
    ]
    if runtime_directory is not None:
        lines.append(f"RuntimeDirectory={runtime_directory}")
    return "\n".join(lines) + "\n"


def parse_properties(text: str) -> dict[str, str]:
    """``systemctl show`` output (``Key=value`` lines) as a dict."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


class SystemdController(RemoteController):
    """Reconfigures and restarts ``unit`` on a remote host over SSH.

    ``connect`` opens a fabric connection (see :func:`ssh.connection_factory`);
    ``where`` names the host in messages. ``sudo`` prefixes privileged commands
    with ``sudo -n`` (never prompts). ``unit_dir`` is where the drop-in
    directory goes. API keys on the command line (``--*-api-key`` values and
    the ``secrets`` given) never go into the drop-in (mode 0644) or an SSH
    command: they go over the session's stdin into a mode-0600 file beside it,
    which the drop-in names as its ``EnvironmentFile=``. ``command_prefix`` is
    raw shell text put before every remote command (e.g. ``PATH=/opt/bin:$PATH; export PATH; ``).
    The listener stays the base's "unknown": ``MainPID`` is the identity ``apply()`` proves.
    """

    kind = "systemd"

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
        secrets: Iterable[str | None] = (),
        whole_unit: bool = False,
        runtime_directory: str | None = None,
    ) -> None:
        super().__init__(connect, where=where, command_prefix=command_prefix)
        # Settings check it first (one line at option parsing); this holds for any caller.
        self.unit = parsers.unit_name(unit)
        self._sudo = "sudo -n " if sudo else ""
        # whole_unit: the unit is ours (a weight-cache daemon): its own file, not a drop-in,
        # stopped and removed by restore().
        self.whole_unit = whole_unit
        self._runtime_directory = runtime_directory
        if whole_unit:
            self.dropin_dir = unit_dir.rstrip("/")
            self.dropin_path = f"{self.dropin_dir}/{self.unit}"
            self.secrets_path = f"{self.dropin_path}{SECRETS_SUFFIX}"
        else:
            self.dropin_dir = f"{unit_dir.rstrip('/')}/{self.unit}.d"
            self.dropin_path = f"{self.dropin_dir}/{dropin_name}"
            stem = dropin_name.removesuffix(".conf")
            self.secrets_path = f"{self.dropin_dir}/{stem}{SECRETS_SUFFIX}"
        self._secrets = tuple(secrets)
        self._timeout = command_timeout
        self._since: str | None = None
        self._touched = False

    # -- remote plumbing -------------------------------------------------

    def _run(self, command: str, timeout: float | None = None, stdin: str | None = None) -> Any:
        return super()._run(command, self._timeout if timeout is None else timeout, stdin)

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
        return f"{self._sudo}systemctl {args} -- {render.shell_word(self.unit)}"

    # -- ServiceController -----------------------------------------------

    def apply(self, launch: LaunchSpec) -> ProcessIdentity:
        """Write the drop-in, daemon-reload, restart; return the new MainPID identity.

        Three SSH round trips (four with secrets): read the old identity; write
        the secrets file; write + reload + read the remote clock (for
        ``journalctl --since``); restart + read the new identity.
        """
        split = split_secrets(launch.argv, self._secrets)
        secrets = self.secrets_path if split.secrets else None
        try:
            if self.whole_unit:
                text = render_unit(
                    split.argv,
                    launch.env,
                    label=launch.label,
                    environment_file=secrets,
                    runtime_directory=self._runtime_directory,
                )
            else:
                text = render_dropin(
                    split.argv, launch.env, label=launch.label, environment_file=secrets
                )
        except ValueError as exc:
            # The collection refuses such values first; this holds for any caller.
            raise ServiceStartError(
                f"cannot write the command line of config {launch.label!r} into a systemd "
                f"unit: {redact.Redactor(split.secrets.values()).text(str(exc))}"
            ) from None
        show = "show -p MainPID -p ExecMainStartTimestamp"
        before = parse_properties(self._check(self._systemctl(show)).stdout)
        self._touched = True
        self._identity = None
        if split.secrets:
            self._write_secrets(split)
        self._since = self._write_dropin_and_reload(text, keep_secrets=bool(split.secrets))
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

    def _as_root(self, script: str) -> str:
        return f"{self._sudo}sh -c -- {render.shell_word(script)}" if self._sudo else script

    def _write_secrets(self, split: Split) -> None:
        """The secrets file, over stdin: created 0600 (umask 077, noclobber) before a
        byte is written (the drop-in write removes it for a config without secrets)."""
        q = render.shell_word
        tmp = self.secrets_path + ".tmp"
        write = (
            f"umask 022 && mkdir -p -- {q(self.dropin_dir)} && umask 077 && rm -f -- {q(tmp)} && "
            f"set -C && cat > {q(tmp)} && mv -f -- {q(tmp)} {q(self.secrets_path)}"
        )
        result = self._run(self._as_root(write), stdin=split.environment_file())
        if result.exited != 0:
            stderr = last_lines((result.stderr or "").strip(), 1) or "no output"
            raise ServiceStartError(
                f"cannot write {self.secrets_path!r} on {self._where} ({stderr}); "
                "connect as root or pass the sudo option (passwordless sudo needed)"
            )

    def _write_dropin_and_reload(self, text: str, *, keep_secrets: bool) -> str:
        q = render.shell_word
        tmp = self.dropin_path + ".tmp"
        stale = "" if keep_secrets else f"rm -f -- {q(self.secrets_path)} && "
        write = self._as_root(
            f"umask 022 && mkdir -p -- {q(self.dropin_dir)} && {stale}rm -f -- {q(tmp)} && "
            f"cat > {q(tmp)} && mv -f -- {q(tmp)} {q(self.dropin_path)}"
        )
        # The text goes over stdin: no value is ever part of a remote command line.
        # Distinct exit statuses tell the steps apart in one round trip.
        result = self._run(
            f"{{ {write}; }} || exit 90; {self._sudo}systemctl daemon-reload || exit 91; date +%s",
            stdin=text,
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
        """``journalctl --unit=UNIT --since=@<restart time>``; errors come back as text."""
        if self._since is None or tail <= 0:
            return ""
        command = (
            f"{self._sudo}journalctl --unit={render.shell_word(self.unit)} "
            f"--since=@{int(self._since)} --no-pager -o cat -n {int(tail)}"
        )
        try:
            result = self._run(command, timeout=LOGS_TIMEOUT)
        except ServiceError as exc:
            return f"(cannot read the journal: {exc})"
        return last_lines(result.stdout or "", tail)

    def process_log(self) -> str | None:
        """The drafter's start-up lines and the start's phase lines
        (:data:`~.start_phases.LOG_GREP`) from the journal of the unit's *current* MainPID.

        ``_PID=`` (journald files a service's stdout under its main PID, children
        included) and the restart time keep older processes' lines out.
        """
        pid = self._identity.pid if self._identity is not None else None
        if not pid:
            return None
        since = f" --since=@{int(self._since)}" if self._since else ""
        # journalctl's matches are operands: after "--", as any value.
        command = (
            f"{self._sudo}journalctl{since} --no-pager -o cat -- "
            f"_SYSTEMD_UNIT={render.shell_word(self.unit)} _PID={int(pid)} | grep -a -E "
            f"{render.shell_word(LOG_LINES)} | tail -n 200"
        )
        result = self._run(command, timeout=60.0)
        return str(result.stdout or "")

    def log_location(self) -> str | None:
        """The journalctl command that shows the full log."""
        since = f" --since=@{self._since}" if self._since else ""
        return f"`journalctl --unit={render.shell_word(self.unit)}{since}` on {self._where}"

    def restore(self) -> None:
        """Remove the drop-in, daemon-reload and restart, if ``apply()`` touched the unit
        (a whole unit of ours: stop it, remove it, daemon-reload)."""
        if not self._touched:
            return
        q = render.shell_word
        files = f"{q(self.dropin_path)} {q(self.secrets_path)}"
        reload = f"{self._sudo}systemctl daemon-reload"
        if self.whole_unit:  # ours: stopped, then gone
            self._check(f"{self._systemctl('stop')} && {self._sudo}rm -f -- {files} && {reload}")
        else:
            self._check(f"{self._sudo}rm -f -- {files} && {reload} && {self._systemctl('restart')}")
        self._touched = False
        self._identity = None


def _tail_block(text: str) -> str:
    return f"\n--- last log lines ---\n{text}" if text.strip() else ""
