"""An incremental SSE splitter with bounded, linear buffering.

Bytes are fed as they arrive; complete ``data:`` lines come out. The buffer is
one ``bytearray``: each feed appends, scans for newlines only from where the
last scan stopped, and drops the consumed prefix, so a stream costs time
linear in its size however it is split (``buffer += data; split`` rescans the
whole pending line on every read, quadratic for a long line in small reads).
A line longer than :data:`~pytest_specdecode.limits.MAX_SSE_LINE` or a body
longer than :data:`~pytest_specdecode.limits.MAX_RESPONSE` is an error naming
the cap; nothing is buffered past it.
"""

from __future__ import annotations

from pytest_specdecode.errors import SpecDecodeError
from pytest_specdecode.limits import MAX_RESPONSE, MAX_SSE_LINE


class SSELimitError(SpecDecodeError):
    """A stream passed a size cap; the message names the cap and its value."""


class SSESplitter:
    """Splits a byte stream into the payloads of its SSE ``data:`` lines."""

    __slots__ = ("_buf", "_scanned", "examined", "max_line", "max_total", "total")

    def __init__(self, *, max_line: int = MAX_SSE_LINE, max_total: int = MAX_RESPONSE) -> None:
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf already known to hold no newline
        self.max_line = max_line
        self.max_total = max_total
        self.total = 0
        self.examined = 0  # bytes searched for newlines: linear buffering keeps it <= total

    def feed(self, data: bytes) -> list[bytes]:
        """Payloads (after ``data:``, stripped) of the lines ``data`` completed."""
        self.total += len(data)
        if self.total > self.max_total:
            raise SSELimitError(
                f"response body passed {self.max_total} bytes (MAX_RESPONSE); "
                "a stream that long is not a real answer"
            )
        buf = self._buf
        buf += data
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
        if start:
            del buf[:start]  # CPython drops a bytearray's prefix without copying the rest
        self._scanned = len(buf)
        if len(buf) > self.max_line:
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
        raise SSELimitError(
            f"an SSE line passed {self.max_line} bytes (MAX_SSE_LINE); "
            "the server sent one event larger than any real answer"
        )
