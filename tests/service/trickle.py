"""A loopback server whose ``/health_generate`` (and ``/server_info``) answer comes one
byte at a time.

Its status line and headers trickle in, a byte every ``gap`` seconds: each
read of the client gets a byte well within any per-read timeout, so only a
whole deadline on the request ends the wait. ``/model_info`` answers at once
(the server does answer HTTP: it is slow, not a silent listener); every other
path is a 404. The gaps wait on an event, which closing the server sets, so
nothing outlives a test.
"""

from __future__ import annotations

import contextlib
import socketserver
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

HEADER_BYTES = 10_000
"""Bytes of the health answer's one long header: the trickle takes this many gaps."""


@dataclass
class Trickle:
    """What the server saw and how slowly it answers."""

    gap: float
    stop: threading.Event = field(default_factory=threading.Event)
    paths: list[str] = field(default_factory=list)
    bytes_sent: int = 0

    @property
    def takes(self) -> float:
        """Seconds the whole health answer would take."""
        return self.gap * (HEADER_BYTES + 20)


class _Handler(socketserver.StreamRequestHandler):
    trickle: Trickle

    def handle(self) -> None:
        line = self.rfile.readline(4096).decode("latin-1")
        while self.rfile.readline(4096) not in (b"\r\n", b"\n", b""):
            pass  # the request's headers
        parts = line.split()
        path = parts[1] if len(parts) > 1 else ""
        self.trickle.paths.append(path)
        if path == "/model_info":
            body = b'{"model_path": "trickle"}'
            self.wfile.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
        elif path in ("/health_generate", "/server_info"):
            answer = b"HTTP/1.1 200 OK\r\nX-Trickle: " + b"x" * HEADER_BYTES + b"\r\n\r\n"
            for i in range(len(answer)):
                if self.trickle.stop.wait(self.trickle.gap):
                    return
                self.wfile.write(answer[i : i + 1])
                self.wfile.flush()
                self.trickle.bytes_sent += 1
        else:
            self.wfile.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the client hanging up mid-trickle is what the tests make it do


@contextlib.contextmanager
def trickling(gap: float) -> Iterator[tuple[int, Trickle]]:
    """Serve on a free 127.0.0.1 port: ``(port, trickle)``."""
    trickle = Trickle(gap)
    handler = type("Handler", (_Handler,), {"trickle": trickle})
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1], trickle
    finally:
        trickle.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
