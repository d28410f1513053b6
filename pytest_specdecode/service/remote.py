"""What the two SSH controllers (systemd, script) share: one connection, opened on
first use, dropped after an SSH error, closed by ``stop()``.

fabric is imported by :mod:`pytest_specdecode.service.ssh`; only the SSH modes load this.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from pytest_specdecode.service import ssh
from pytest_specdecode.service.base import BaseController, SSHError


class RemoteController(BaseController):
    """A controller that runs its commands on a remote host over SSH.

    ``connect`` opens a fabric connection (see :func:`ssh.connection_factory`);
    ``where`` names the host in messages; ``command_prefix`` is raw shell text put
    before every remote command (e.g. ``PATH=/opt/bin:$PATH; export PATH; ``).
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        where: str = "remote host",
        command_prefix: str = "",
        answer_margin: float = ssh.ANSWER_MARGIN,
    ) -> None:
        self._connect = connect
        self._where = where
        self._prefix = command_prefix
        self._margin = answer_margin
        self._conn: Any = None

    def _run(self, command: str, timeout: float, stdin: str | None = None) -> Any:
        """``command`` on the host, exit status in the result; an SSH error drops the connection."""
        if self._conn is None:
            self._conn = self._connect()
        try:
            return ssh.run(
                self._conn,
                self._prefix + command,
                timeout=timeout,
                where=self._where,
                answer_margin=self._margin,
                stdin=stdin,
            )
        except SSHError:
            # A stalled or broken connection is not reused: the next step reconnects.
            conn, self._conn = self._conn, None
            ssh.close_quietly(conn)
            raise

    def stop(self) -> None:
        """Close the SSH connection; the remote server keeps running."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(OSError, SSHError):
                conn.close()
