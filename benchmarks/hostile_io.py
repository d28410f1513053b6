"""Bounds of the control path against a hostile server: time and memory to refuse it.

A loopback server sends (1) one SSE line of ``--line-mb`` MB, (1b) a line
just under the cap in 1 KiB pieces (the quadratic case of a growing buffer;
read in under ``--max-seconds`` within ``--max-mb``), (2) a stream
that never ends, (3) a ``/health_generate`` that answers after 60 s. The
client must refuse (1) at the line cap in under ``--max-seconds`` with a
Python heap peak (tracemalloc) under ``--max-mb``, end (2) at its whole
deadline (``--deadline`` s) and the readiness gate must end (3) at its ready
timeout (``--deadline`` s): that is the requirement. Prints the figures; exits 1
past any bound.

    .venv/bin/python benchmarks/hostile_io.py [--line-mb 200] [--max-seconds 5] [--max-mb 64]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pytest_specdecode.client.limits import Limits
from pytest_specdecode.client.sglang import LimitError, SGLangClient
from pytest_specdecode.service.readiness import ServiceNotReady, wait_until_ready

STOP = threading.Event()
LINE_BYTES = [200 << 20]
MODE = ["huge"]  # what POST /generate sends: "huge" or "endless"


class Hostile(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _head(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._head()
        try:
            if MODE[0] == "near":  # a line just under the cap, in 1 KiB pieces
                self._chunk(b'data: {"meta_info": {"completion_tokens": 1}, "text": "')
                for _ in range(((4 << 20) - 4096) // 1024):
                    self._chunk(b"x" * 1024)
                self._chunk(b'"}\n\ndata: [DONE]\n\n')
                self._chunk(b"")
            elif MODE[0] == "huge":
                self._chunk(b"data: ")
                piece = b"x" * (1 << 16)
                for _ in range(LINE_BYTES[0] // len(piece)):
                    self._chunk(piece)
            else:  # endless
                n = 0
                while not STOP.wait(0.005):
                    n += 1
                    event = {"text": "t", "meta_info": {"completion_tokens": n}}
                    self._chunk(b"data: " + json.dumps(event).encode() + b"\n\n")
        except OSError:
            return  # the client hung up: that is the point

    def do_GET(self) -> None:
        STOP.wait(60)  # /health_generate busy "generating"
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--line-mb", type=int, default=200)
    parser.add_argument("--max-seconds", type=float, default=5.0)
    parser.add_argument("--max-mb", type=float, default=64.0)
    parser.add_argument("--deadline", type=float, default=1.0)
    args = parser.parse_args()
    LINE_BYTES[0] = args.line_mb << 20
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    failed = []
    kind = reason = "nothing"
    try:
        tracemalloc.start()
        start = time.monotonic()
        with SGLangClient(url) as client:
            try:
                client.generate("x", max_new_tokens=16, stream=True)
            except LimitError as exc:
                kind = exc.kind
        took = time.monotonic() - start
        peak = tracemalloc.get_traced_memory()[1] / (1 << 20)
        tracemalloc.stop()
        print(f"{args.line_mb} MB SSE line: refused ({kind}) in {took:.2f} s, "
              f"heap peak {peak:.1f} MB")  # fmt: skip
        if kind != "line" or took > args.max_seconds or peak > args.max_mb:
            failed.append("huge line")

        MODE[0] = "near"
        tracemalloc.start()
        start = time.monotonic()
        with SGLangClient(url) as client:
            text = client.generate("x", max_new_tokens=16, stream=True).text
        took = time.monotonic() - start
        peak = tracemalloc.get_traced_memory()[1] / (1 << 20)
        tracemalloc.stop()
        print(f"{len(text) / (1 << 20):.1f} MB line in 1 KiB pieces: read in {took:.2f} s, "
              f"heap peak {peak:.1f} MB")  # fmt: skip
        if took > args.max_seconds or peak > args.max_mb:
            failed.append("near-cap line")

        MODE[0] = "endless"
        limits = Limits(base=args.deadline, per_token=0.0, stall=30.0)
        start = time.monotonic()
        with SGLangClient(url, limits=limits) as client:
            try:
                client.generate("x", max_new_tokens=16, stream=True)
            except LimitError as exc:
                kind = exc.kind
        took = time.monotonic() - start
        print(f"endless stream: ended ({kind}) after {took:.2f} s (deadline {args.deadline:g} s)")
        if kind != "deadline" or took > args.deadline + 1.0:
            failed.append("endless stream")

        start = time.monotonic()
        try:
            wait_until_ready(url, verify=lambda info: [], label="x", timeout=args.deadline)
        except ServiceNotReady as exc:
            reason = exc.reason
        took = time.monotonic() - start
        print(f"slow /health_generate: gate ended ({reason}) after {took:.2f} s "
              f"(ready timeout {args.deadline:g} s)")  # fmt: skip
        if reason != "timeout" or took > args.deadline + 1.0:
            failed.append("slow health")
    finally:
        STOP.set()
        server.shutdown()
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
