"""SSH connections with fabric: a factory that honours ``~/.ssh/config``,
refuses unknown host keys unless told otherwise, and turns SSH failures into
one-line errors naming the host and what to do.

fabric's own default is to accept any unknown host key silently
(``AutoAddPolicy``) and it does not read ``known_hosts`` at all; this module
loads the known_hosts files and installs a refusing policy instead.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import paramiko
from fabric import Config, Connection
from fabric.runners import Remote

from pytest_specdecode.config import render
from pytest_specdecode.errors import SpecDecodeError
from pytest_specdecode.service.base import SSHError

_ACCEPT_VALUES = ("no", "off", "accept-new")


@dataclass(frozen=True)
class SSHTarget:
    """Where and how to connect. ``None`` fields fall back to ``~/.ssh/config``.

    ``accept_unknown_host_keys`` accepts a host key that is in no known_hosts
    file, for this session only (nothing is written to known_hosts); a key
    that *differs* from a known one is always refused. ``ssh_config_path``
    replaces the system and user ssh config files (as ``ssh -F`` does), and
    ``known_hosts_files`` replaces the known_hosts files read.
    """

    host: str
    user: str | None = None
    port: int | None = None
    key_filename: str | None = None
    connect_timeout: float = 10.0
    accept_unknown_host_keys: bool = False
    ssh_config_path: str | None = None
    known_hosts_files: Sequence[str] | None = None


class UnknownHostKey(SpecDecodeError, paramiko.SSHException):  # type: ignore[misc]
    """The server's host key is in no known_hosts file and accepting is off.

    A paramiko ``SSHException`` too: it is raised inside paramiko's connect,
    which lets an ``SSHException`` from a host key policy through.
    """

    def __init__(self, hostname: str, key: paramiko.PKey) -> None:
        super().__init__(f"unknown host key for {hostname}")
        self.hostname = hostname
        self.key_type = key.get_name()
        self.fingerprint = key.fingerprint


class _RefuseUnknown(paramiko.MissingHostKeyPolicy):  # type: ignore[misc]
    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        raise UnknownHostKey(hostname, key)


class _AcceptForSession(paramiko.MissingHostKeyPolicy):  # type: ignore[misc]
    # In memory only: writing the user's known_hosts is their call, not ours.
    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)


def describe(target: SSHTarget, conn: Any = None) -> str:
    """``user@host:port`` as far as known, for messages."""
    host = getattr(conn, "host", None) or target.host
    user = getattr(conn, "user", None) or target.user
    port = getattr(conn, "port", None) or target.port or 22
    return f"{user}@{host}:{port}" if user else f"{host}:{port}"


class _WholeCharacters(Remote):  # type: ignore[misc]
    """fabric's runner, each output stream decoded as one stream.

    invoke decodes every chunk it reads (1000 bytes at most) on its own, so a
    multi-byte character that two reads split came back as two replacement
    characters, in any command's output. One incremental decoder per stream
    keeps an incomplete character's bytes until the rest of it comes.
    """

    def read_proc_output(self, reader: Callable[[int], bytes | None]) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder(self.encoding)("replace")
        while data := reader(self.read_chunk_size):
            if text := decoder.decode(data):
                yield text
        if tail := decoder.decode(b"", final=True):
            yield tail


def open_connection(target: SSHTarget) -> Any:
    """Open a fabric ``Connection`` to ``target``; raise :class:`SSHError` on failure."""
    config = Config(
        runtime_ssh_path=target.ssh_config_path,
        overrides={"runners": {"remote": _WholeCharacters}},
    )
    connect_kwargs: dict[str, Any] = {}
    if target.key_filename:
        connect_kwargs["key_filename"] = [os.path.expanduser(target.key_filename)]
    conn = Connection(
        target.host,
        user=target.user,
        port=target.port,
        config=config,
        connect_timeout=target.connect_timeout,
        connect_kwargs=connect_kwargs,
    )
    ssh_config: dict[str, Any] = dict(conn.ssh_config)
    for path in _known_hosts_files(target, ssh_config):
        if os.path.isfile(path):
            try:
                conn.client.load_system_host_keys(path)
            except (OSError, paramiko.SSHException) as exc:
                raise SSHError(f"cannot read known_hosts file {path!r}: {exc}") from exc
    strict = str(ssh_config.get("stricthostkeychecking", "")).lower()
    accept = target.accept_unknown_host_keys or strict in _ACCEPT_VALUES
    conn.client.set_missing_host_key_policy(_AcceptForSession() if accept else _RefuseUnknown())
    try:
        conn.open()
    except BaseException as exc:
        conn.close()
        # fabric closes only a connected transport; a half-open one (refused host
        # key, failed auth) keeps its reader thread until paramiko closes it.
        conn.client.close()
        if isinstance(exc, (paramiko.SSHException, OSError, EOFError)):
            message, reason = _connect_error(target, conn, exc)
            raise SSHError(message, reason=reason) from exc
        raise
    return conn


def connection_factory(target: SSHTarget) -> Callable[[], Any]:
    """A zero-argument callable opening a new connection to ``target``."""

    def connect() -> Any:
        return open_connection(target)

    return connect


# The remote timeout(1) sends SIGKILL this long after SIGTERM.
KILL_GRACE = 1.0
# Locally, the remote kill must have reported back this long after that.
ANSWER_MARGIN = 3.0


def run(
    conn: Any,
    command: str,
    *,
    timeout: float | None,
    where: str,
    answer_margin: float = ANSWER_MARGIN,
    stdin: str | None = None,
) -> Any:
    """Run ``command`` remotely without raising on non-zero exit; return the invoke Result.

    ``stdin`` is sent as the command's standard input, then end of file: how
    a secret or a file's content reaches the host without being part of the
    command line (which the remote host's process list and logs may show).

    Raises :class:`SSHError` when the command times out or the transport fails.
    The deadline holds on both sides: remotely with coreutils' timeout(1)
    (invoke's own timer thread can fire after the connection is closed), and
    locally, because a stalled network or host sends nothing back at all,
    not even the remote timeout's exit status: ``answer_margin`` seconds after
    the remote kill, the connection is closed (the caller opens a new one) and
    the error says so.
    """
    if timeout is None:
        return _run(conn, command, command, where, stdin)
    # "--": a command that starts with "-" is still the command, never options of sh.
    wrapped = f"timeout -k {KILL_GRACE:g} {timeout:g} sh -c -- {render.shell_word(command)}"
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append(_run(conn, wrapped, command, where, stdin))
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)

    worker = threading.Thread(target=target, name="specdecode-ssh", daemon=True)
    worker.start()
    deadline = timeout + KILL_GRACE + answer_margin
    worker.join(deadline)
    if worker.is_alive():
        close_quietly(conn)
        worker.join(5.0)
        raise SSHError(
            f"no answer from {where} within {deadline:g} s while running {command!r} "
            f"(its own limit is {timeout:g} s): the network or the host stalled; check the "
            "connection (ssh there by hand)",
            reason="stalled",
        )
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    if result.exited == -1:
        # paramiko's status when the channel closed without one: sshd or the host went away.
        raise SSHError(
            f"the connection to {where} was lost while running {command!r} (no exit status): "
            "is the host still up?",
            reason="ssh-lost",
        )
    if result.exited in (124, 137):
        raise SSHError(
            f"command {command!r} on {where} did not finish within {timeout:g} s; "
            "run it by hand there to see why it hangs",
            reason="timeout",
        )
    return result


class _WholeStream(io.StringIO):
    """A stdin text handed over in one piece.

    invoke reads a stream that is not a terminal one character per 10 ms
    (600 bytes take 6 s); a read here returns all that is left, then "" (end
    of file, after which invoke closes the remote stdin: no pty).
    """

    def read(self, size: int | None = -1) -> str:
        return super().read()


def _run(conn: Any, command: str, shown: str, where: str, stdin: str | None = None) -> Any:
    in_stream: Any = False if stdin is None else _WholeStream(stdin)
    try:
        return conn.run(command, hide=True, warn=True, in_stream=in_stream, pty=False)
    except (paramiko.SSHException, OSError, EOFError) as exc:
        raise SSHError(
            f"SSH command {shown!r} on {where} failed: {exc}", reason="ssh-lost"
        ) from None


def close_quietly(conn: Any) -> None:
    """Close a fabric connection and its paramiko client; errors do not matter here."""
    for close in (
        getattr(conn, "close", None),
        getattr(getattr(conn, "client", None), "close", None),
    ):
        if close is not None:
            with contextlib.suppress(Exception):
                close()


def _known_hosts_files(target: SSHTarget, ssh_config: dict[str, Any]) -> list[str]:
    if target.known_hosts_files is not None:
        return [os.path.expanduser(p) for p in target.known_hosts_files]
    user_files = str(ssh_config.get("userknownhostsfile", "~/.ssh/known_hosts ~/.ssh/known_hosts2"))
    global_files = str(
        ssh_config.get("globalknownhostsfile", "/etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2")
    )
    return [os.path.expanduser(p) for p in (user_files + " " + global_files).split()]


def _connect_error(target: SSHTarget, conn: Any, exc: BaseException) -> tuple[str, str]:
    """The one-line message for a failed connection, and its reason (see service/retry.py)."""
    where = describe(target, conn)
    if isinstance(exc, UnknownHostKey):
        port = getattr(conn, "port", None) or 22
        host = getattr(conn, "host", target.host)
        scan = f"ssh-keyscan -p {port} {host}" if port != 22 else f"ssh-keyscan {host}"
        return (
            f"SSH host key of {where} is unknown ({exc.key_type} {exc.fingerprint}) and unknown "
            f"keys are refused: check the fingerprint and add it to ~/.ssh/known_hosts "
            f"(e.g. `{scan} >> ~/.ssh/known_hosts`, or ssh there once by hand), or opt in with "
            "--dflash-ssh-accept-new-host-key to trust it for this session",
            "ssh-hostkey",
        )
    if isinstance(exc, paramiko.BadHostKeyException):
        return (
            f"SSH host key of {where} does not match known_hosts (host reinstalled, or someone "
            "in between?): verify the new key, then fix the entry with `ssh-keygen -R HOST`",
            "ssh-hostkey",
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return (
            f"SSH login to {where} failed ({exc}): check the user and key "
            "(--dflash-ssh-user, --dflash-ssh-key, ssh-agent or ~/.ssh/config)",
            "ssh-auth",
        )
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve SSH host {target.host!r} ({exc}): check --dflash-host", (
            "ssh-unresolved"
        )
    if isinstance(exc, (paramiko.ssh_exception.NoValidConnectionsError, ConnectionRefusedError)):
        return (
            f"SSH connection to {where} refused: is sshd running there and is the port right "
            "(--dflash-ssh-port or Port in ~/.ssh/config)?",
            "ssh-refused",
        )
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return (
            f"SSH connection to {where} timed out after {target.connect_timeout} s: "
            "check the host, the port and any firewall in between",
            "ssh-timeout",
        )
    # Reset, no route, EOF during the handshake: the host did not hold a connection.
    return f"SSH connection to {where} failed: {type(exc).__name__}: {exc}", "ssh-lost"
