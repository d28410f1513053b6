"""Reading a reply off the socket within its bounds: whole deadline, stall, size caps.

The bounds themselves live in :mod:`pytest_specdecode.client.limits`; this module
enforces them for a ``requests``/urllib3 response (the control path). Every
read is given a socket timeout of the smaller of the stall limit and the time
left before the whole deadline, and the monotonic clock is checked after each
read, so no sequence of slow bytes outlives the deadline. Nothing is buffered
past a cap: an SSE line is split with a scan offset over one ``bytearray``
(:class:`SSESplitter`, linear in the bytes read, however long the line; the
aiohttp load generator uses the same splitter), and the line, like the whole
body, is refused as soon as it passes its cap.

It imports nothing from the plugin: callers turn :class:`BoundExceeded` into
their own one-line error.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

READ_SIZE = 1 << 16

DEADLINE = "deadline"
STALL = "stall"
LINE = "line"
RESPONSE = "response"
ENCODING = "encoding"

ACCEPTED_ENCODINGS = "gzip, deflate"
"""What a whole-body request accepts: exactly what :func:`decoded` undoes (urllib3 would
also offer br and zstd when their packages happen to be installed)."""

# Each Content-Encoding token the plugin undoes, as zlib's window bits: gzip's header
# (16 + 15), zlib's (15). HTTP's "deflate" is zlib-wrapped; a raw deflate stream (-15)
# is what some servers send under that name, so it is tried after.
_WBITS = {"gzip": (31,), "x-gzip": (31,), "deflate": (15, -15)}


class BoundExceeded(Exception):
    """A reply passed one of its bounds; ``kind``: deadline, stall, line, response or
    encoding (a body it cannot decode)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _socket_of(raw: Any) -> socket.socket | None:
    """The socket under a urllib3 response, where it can be reached."""
    connection = getattr(raw, "connection", None)
    sock = getattr(connection, "sock", None)
    return sock if isinstance(sock, socket.socket) else None


def read_chunks(
    raw: Any,
    *,
    deadline: float,
    stall: float,
    cap: int,
    monotonic: Callable[[], float] = time.monotonic,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[tuple[float, bytes]]:
    """Yield ``(arrival, data)`` for each socket read of ``raw`` until its end.

    ``deadline`` is a ``monotonic()`` time; ``stall`` the longest wait for one
    read; ``cap`` the most bytes of the whole body. ``arrival`` is ``clock()``
    when the read returned. Raises :class:`BoundExceeded` past any bound.
    """
    total = 0
    sock = _socket_of(raw)
    while True:
        left = deadline - monotonic()
        if left <= 0:
            raise BoundExceeded(DEADLINE, "did not finish within its whole deadline")
        wait = min(stall, left)
        if sock is not None:
            sock.settimeout(max(wait, 0.001))
        try:
            data = raw.read1(READ_SIZE)
        except Exception as exc:
            if not _is_timeout(exc):
                raise
            if monotonic() >= deadline or wait < stall:
                raise BoundExceeded(DEADLINE, "did not finish within its whole deadline") from None
            raise BoundExceeded(STALL, f"sent nothing for {stall:g} s (stall limit)") from None
        if not data:
            return
        now = clock()
        total += len(data)
        if total > cap:
            raise BoundExceeded(RESPONSE, f"sent more than {cap} bytes (response cap)")
        if monotonic() > deadline:
            raise BoundExceeded(DEADLINE, "did not finish within its whole deadline")
        yield now, data


def _is_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` (urllib3's ReadTimeoutError, a socket timeout, ...) is a read timeout."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, (TimeoutError, socket.timeout)) or "Timeout" in type(cur).__name__:
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def decoded(body: bytes, content_encoding: str | None, *, cap: int) -> bytes:
    """``body`` with its ``Content-Encoding`` undone (the codings in reverse order of
    their listing), never more than ``cap`` bytes of it decoded: a small compressed
    body can expand a thousandfold. Raises :class:`BoundExceeded` (``response``) past
    the cap, (``encoding``) for a coding it does not know or a body that is not one."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
    for coding in reversed([c for c in codings if c and c != "identity"]):
        tries = _WBITS.get(coding)
        if tries is None:
            raise BoundExceeded(
                ENCODING,
                f"sent Content-Encoding {coding[:40]!r}, which the plugin does not decode "
                f"(it asks for {ACCEPTED_ENCODINGS} or identity)",
            )
        body = _inflate(body, coding, tries, cap)
    return body


def _inflate(body: bytes, coding: str, tries: tuple[int, ...], cap: int) -> bytes:
    for wbits in tries[:-1]:
        with contextlib.suppress(zlib.error):
            return _inflate_with(body, wbits, cap)
    try:
        return _inflate_with(body, tries[-1], cap)
    except zlib.error as exc:
        raise BoundExceeded(ENCODING, f"sent a body that is not valid {coding} ({exc})") from None


def _inflate_with(body: bytes, wbits: int, cap: int) -> bytes:
    out = bytearray()
    rest = body
    # gzip allows several members one after another; each gets a decoder of its own.
    while rest:
        inflater = zlib.decompressobj(wbits)
        data = rest
        while data:
            out += inflater.decompress(data, cap + 1 - len(out))
            if len(out) > cap:
                raise BoundExceeded(RESPONSE, f"sent more than {cap} bytes decoded (response cap)")
            data = inflater.unconsumed_tail
        if not inflater.eof:
            raise zlib.error("the compressed body ends early")
        rest = inflater.unused_data if wbits == 31 else b""
    return bytes(out)


def read_body(chunks: Iterator[tuple[float, bytes]]) -> bytes:
    """The whole body of ``chunks`` (already bounded by :func:`read_chunks`)."""
    return b"".join(data for _, data in chunks)


class SSESplitter:
    """Splits a byte stream into the payloads of its SSE ``data:`` lines, as it arrives.

    The one splitter of both paths (:func:`sse_data` for a ``requests``
    response, the aiohttp load generator feeding it reads). The buffer is one
    ``bytearray``: each feed appends, scans for newlines only from where the
    last scan stopped and drops the consumed prefix, so a stream costs time
    linear in its size however it is split. A line longer than ``max_line``
    or a body longer than ``max_total`` raises :class:`BoundExceeded`
    (``line`` / ``response``) at once; nothing is buffered past it.
    """

    __slots__ = ("_buf", "_scanned", "examined", "max_line", "max_total", "total")

    def __init__(self, *, max_line: int, max_total: int | None = None) -> None:
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf already known to hold no newline
        self.max_line = max_line
        self.max_total = max_total
        self.total = 0
        self.examined = 0  # bytes searched for newlines: linear buffering keeps it <= total

    def feed(self, data: bytes) -> list[bytes]:
        """Payloads (after ``data:``, stripped) of the lines ``data`` completed."""
        self.total += len(data)
        if self.max_total is not None and self.total > self.max_total:
            raise BoundExceeded(RESPONSE, f"sent more than {self.max_total} bytes (response cap)")
        # With nothing pending (the usual case: a read holds whole events) ``data`` is
        # split as it is, one copy per payload; else it joins the pending line.
        pending = bool(self._buf)
        buf: bytes | bytearray = self._buf
        if pending:
            self._buf += data
        else:
            buf, self._scanned = bytes(data), 0
        self.examined += len(buf) - self._scanned
        out: list[bytes] = []
        start = 0
        pos = buf.find(b"\n", self._scanned)
        while pos >= 0:
            if pos - start > self.max_line:
                self._too_long()
            if buf.startswith(b"data:", start):
                out.append(bytes(buf[start + 5 : pos]).strip())
            start = pos + 1
            pos = buf.find(b"\n", start)
        if pending:
            if start:
                del self._buf[:start]  # CPython drops a bytearray's prefix without copying
        elif start < len(buf):
            self._buf += memoryview(buf)[start:]
        self._scanned = len(self._buf)
        if len(self._buf) > self.max_line:
            self._too_long()
        return out

    def close(self) -> list[bytes]:
        """The payload of a last line without its newline, if the stream ended in one."""
        buf, self._buf = self._buf, bytearray()
        self._scanned = 0
        if buf.startswith(b"data:"):
            return [bytes(buf[5:]).strip()]
        return []

    def _too_long(self) -> None:
        raise BoundExceeded(LINE, f"sent an SSE line over {self.max_line} bytes (line cap)")


def sse_data(
    chunks: Iterator[tuple[float, bytes]], *, line_cap: int
) -> Iterator[tuple[float, bytes]]:
    """Yield ``(arrival, payload)`` for each SSE ``data:`` line of ``chunks``.

    Every event in one read gets that read's arrival time: they did arrive
    together. A line longer than ``line_cap`` bytes raises at once (the
    body's cap is :func:`read_chunks`'s).
    """
    splitter = SSESplitter(max_line=line_cap)
    for now, data in chunks:
        for payload in splitter.feed(data):
            yield now, payload
    for payload in splitter.close():
        yield time.perf_counter(), payload


def scrub_location(location: str, limit: int = 200) -> str:
    """A redirect's ``Location`` fit to print: no user info, no query values, one line."""
    text = "".join(ch if ch.isprintable() else f"%{ord(ch):02X}" for ch in location[: limit * 4])
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        if parts.port is not None:
            netloc += f":{parts.port}"
    except ValueError:
        return repr(text[:limit])
    query = "?..." if parts.query else ""
    shown = urlunsplit((parts.scheme, netloc, parts.path, "", "")) + query
    return repr(shown[:limit])


# -- the header phase: a watchdog, since no per-read timeout bounds a dribbled header --

_ACTIVE = threading.local()


class DeadlineGuard:
    """Shuts the request's socket down at its deadline, whatever phase it is in.

    ``requests`` reads the status line and headers itself, one socket read
    at a time, each within the read timeout: a server that sends one header
    byte every few seconds would keep it waiting for ever. The guard is armed
    around ``session.request``; the connections of :class:`GuardedAdapter`
    hand it their socket once the request is sent.
    """

    def __init__(self, seconds: float) -> None:
        self.fired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True

    def __enter__(self) -> DeadlineGuard:
        _ACTIVE.guard = self
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        _ACTIVE.guard = None

    def watch(self, sock: socket.socket | None) -> None:
        with self._lock:
            self._sock = sock
            if self.fired:
                _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            _shut(self._sock)


def _shut(sock: socket.socket | None) -> None:
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _watched(base: type[Any]) -> type[Any]:
    class Watched(base):  # type: ignore[misc]
        def request(self, *args: Any, **kwargs: Any) -> None:
            super().request(*args, **kwargs)
            guard = getattr(_ACTIVE, "guard", None)
            if guard is not None:
                guard.watch(self.sock)

    return Watched


class GuardedAdapter(HTTPAdapter):
    """An adapter whose connections report their socket to the armed :class:`DeadlineGuard`."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        http = type(
            "GuardedPool", (HTTPConnectionPool,), {"ConnectionCls": _watched(HTTPConnection)}
        )
        https = type(
            "GuardedHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": _watched(HTTPSConnection)}
        )
        self.poolmanager.pool_classes_by_scheme = {"http": http, "https": https}
