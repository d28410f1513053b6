"""SGLang's weight-cache daemon, played: a process that "holds the weights" and a client.

``python -m pytest_specdecode.sim.weight_cache [launch args]`` stands for
``python -m sglang.srt.weight_cache.daemon [server args]`` (SGLang 0.5.23's
standalone daemon, ``srt/weight_cache/daemon.py``): it "loads" for
``--sim-load-seconds``, listens on a Unix socket, writes its ready file
(``pid=...``) and logs SGLang's lines, ending with ``All 1 weight cache daemons
on node 0 are ready (...)``; it serves until SIGTERM or SIGINT. The paths are
SGLang's: ``SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE`` and
``SGLANG_WEIGHT_CACHE_READY_TEMPLATE`` with ``{device_uuid}`` (the
simulator's one "GPU" is :data:`DEVICE_UUID`).

A server started with ``--weight-cache-mode client`` asks the socket
(``--weight-cache-socket``, else the template) for the weights; when nobody
answers it logs SGLang's fallback lines and loads from disk.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from types import FrameType

log = logging.getLogger("pytest_specdecode.sim")

DEVICE_UUID = "GPU-sim-0"
SOCKET_TEMPLATE = "/tmp/sglang_weight_cache_{device_uuid}.sock"
READY_TEMPLATE = "/tmp/sglang_weight_cache_{device_uuid}.ready"
GREETING = b"weights?\n"
ANSWER = b"weights\n"


def socket_path(explicit: str | None, env: Mapping[str, str]) -> str:
    """Where the daemon listens: the explicit path, else SGLang's template for this GPU."""
    if explicit:
        return explicit
    template = env.get("SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE") or SOCKET_TEMPLATE
    return template.replace("{device_uuid}", DEVICE_UUID)


def ready_path(env: Mapping[str, str]) -> str:
    template = env.get("SGLANG_WEIGHT_CACHE_READY_TEMPLATE") or READY_TEMPLATE
    return template.replace("{device_uuid}", DEVICE_UUID)


def fetch(path: str, timeout: float = 5.0) -> bool:
    """Whether the daemon at ``path`` hands over the weights; logs SGLang's lines when not."""
    if not os.path.exists(path):
        log.info("[IpcModelLoader] Daemon socket not found at %s.", path)
        ok = False
    else:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(timeout)
                sock.connect(path)
                sock.sendall(GREETING)
                ok = sock.recv(64) == ANSWER
        except OSError as exc:
            log.warning("[IpcModelLoader] Failed to fetch from daemon at %s: %s", path, exc)
            ok = False
    if not ok:
        log.warning(
            "[IpcModelLoader] Weight cache not available or config mismatch, "
            "falling back to disk load"
        )
    return ok


def _load_seconds(argv: Sequence[str]) -> float:
    from pytest_specdecode.sim.options import sim_parser

    known, _ = sim_parser().parse_known_args(list(argv))
    return float(known.sim_load_seconds)


def serve(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Load, listen, say ready, and answer every client until stopped."""
    from pytest_specdecode.sim.launch import setup_logging

    setup_logging()
    path, ready = socket_path(None, env), ready_path(env)
    stop = False

    def stopping(signum: int, frame: FrameType | None) -> None:
        nonlocal stop
        log.info("[WeightCacheDaemon gpu=0] Received signal %d, shutting down", signum)
        stop = True

    signal.signal(signal.SIGTERM, stopping)
    signal.signal(signal.SIGINT, stopping)
    log.info("Launched weight cache daemon gpu=0 pp_rank=0 tp_rank=0 pid=%d", os.getpid())
    log.info("[WeightCacheDaemon gpu=0 tp_rank=0] Loading model from disk: sim")
    began = time.perf_counter()
    time.sleep(_load_seconds(argv))
    log.info(
        "[WeightCacheDaemon gpu=0 tp_rank=0] Model loaded from disk in %.2fs",
        time.perf_counter() - began,
    )
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
    except OSError as exc:
        log.error("[WeightCacheDaemon gpu=0] cannot listen on %s: %s", path, exc)
        return 1
    try:
        sock.listen(8)
        sock.settimeout(0.2)
        with open(ready, "w", encoding="utf-8") as f:
            f.write(f"pid={os.getpid()}\n")
        log.info("[WeightCacheDaemon gpu=0] Listening on %s", path)
        log.info("Weight cache daemon pp_rank=0 tp_rank=0 is ready")
        log.info(
            "All 1 weight cache daemons on node 0 are ready "
            "(pp_ranks=0..0, tp_ranks=0..0, dist_init_method=None)"
        )
        while not stop:
            try:
                conn, _ = sock.accept()
            except (TimeoutError, InterruptedError):
                continue
            with conn:
                conn.settimeout(2.0)
                try:
                    if conn.recv(64) == GREETING:
                        conn.sendall(ANSWER)
                except OSError:
                    continue
    finally:
        sock.close()
        for leftover in (path, ready):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)
        log.info("[WeightCacheDaemon gpu=0] Shutdown complete")
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a program
    sys.exit(serve(sys.argv[1:], os.environ))
