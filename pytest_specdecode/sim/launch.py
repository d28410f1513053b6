"""``main()``: parse and validate flags, "load weights", then serve like SGLang.

Phases, each logged with SGLang's own lines: the port stays closed while
"loading weights" for ``--sim-load-seconds`` (a fraction of it as the client
of a weight-cache daemon, :mod:`.weight_cache`), allocating the KV cache for
``--sim-kv-seconds`` and capturing CUDA graphs for ``--sim-graph-seconds``;
then uvicorn listens and health answers 503 until ``--sim-warmup-seconds`` after the
engine was done; then
the "fired up" line is logged at the moment health turns 200. These are wall
seconds, as a start's are (``--sim-time-scale`` scales modelled GPU steps).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import replace

import uvicorn

from pytest_specdecode.eventloop import run_fresh
from pytest_specdecode.sim import arrival, cli, weight_cache
from pytest_specdecode.sim.answers import AnswersFileError, Scripted, load_scripted
from pytest_specdecode.sim.collector import IdleCollector
from pytest_specdecode.sim.faults import first_start, stale_window
from pytest_specdecode.sim.model import SpecSettings
from pytest_specdecode.sim.restarts import next_start, speed_factor
from pytest_specdecode.sim.server import SimServer

log = logging.getLogger("pytest_specdecode.sim")
# SGLang's scheduler processes log with a " TP0" suffix in the bracket; the
# simulator has one process and marks those lines with this prefix instead.
TP0 = "TP0 "


def setup_logging() -> None:
    """SGLang's log format on stderr (milliseconds under ``SGLANG_LOG_MS``, as SGLang's
    ``configure_logger``); uvicorn's own loggers go through it too."""
    handler = logging.StreamHandler(sys.stderr)
    ms = ".%(msecs)03d" if os.environ.get("SGLANG_LOG_MS", "").lower() in ("1", "true") else ""
    handler.setFormatter(logging.Formatter(f"[%(asctime)s{ms}] %(message)s", "%Y-%m-%d %H:%M:%S"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


def fail(message: str, kind: str = "ValueError") -> int:
    """Stop like SGLang when resolving its args raises: a traceback, exit status 1."""
    sys.stderr.write(
        "Traceback (most recent call last):\n"
        '  File "sglang/launch_server.py", line 84, in <module>\n'
        "    run_server(server_args)\n"
        '  File "sglang/srt/server_args.py", line 286, in resolve_once\n'
        "    run_resolution_pipeline(self)\n"
        '  File "pytest_specdecode/sim/spec_rules.py", in resolve\n'
        f"{kind}: {message}\n"
        if message
        else f"{kind}\n"
    )
    sys.stderr.flush()
    return 1


def launch_command(argv: Sequence[str]) -> str:
    """SGLang's ``launch_command``: the argv after the launcher, joined with spaces.

    SGLang redacts the watermark config; the simulator also hides the API key
    (SGLang shows it to whoever holds it; this project never prints a key).
    """
    secret = ("--api-key", "--admin-api-key", "--watermark-config")
    out: list[str] = []
    for arg in argv:
        flag, eq, _ = arg.partition("=")
        if out and out[-1] in secret:  # the value after a secret's flag
            out.append(cli.REDACTED)
        else:
            out.append(f"{flag}={cli.REDACTED}" if eq and flag in secret else arg)
    return " ".join(out)


def effective_spec(args: cli.ServerArgs) -> SpecSettings:
    """What the server runs: the flags, or another window under a fault.

    ``stale-config``: another window, reported as such. ``drafter-ignores-window``
    (the original incident): the flags and ``/server_info`` keep the window, but
    the drafter attends to the full context and its start-up line says so.
    """
    spec = args.spec
    if args.faults.stale_config and spec.speculative:
        spec = replace(spec, window=stale_window(spec.window, spec.num_draft_tokens))
    if args.faults.drafter_ignores_window and spec.algorithm in ("DFLASH", "DDTREE"):
        spec = replace(spec, window=None)
    return spec


def load_weights(args: cli.ServerArgs) -> float:
    """ "Load" the weights: from the weight-cache daemon when it answers, else from disk."""
    began = time.perf_counter()
    cached = args.weight_cache_mode == "client" and weight_cache.fetch(
        weight_cache.socket_path(args.weight_cache_socket, os.environ)
    )
    time.sleep(args.load_seconds * (args.cached_load_fraction if cached else 1.0))
    elapsed = time.perf_counter() - began
    if cached:  # SGLang's IpcModelLoader line
        log.info("[IpcModelLoader] Loaded model via IPC (mode=client), total=%.2fs", elapsed)
    return elapsed


def log_loaded(args: cli.ServerArgs, spec: SpecSettings, elapsed: float) -> None:
    """The lines SGLang prints once weights and drafter are up."""
    log.info(
        "Load weight end. elapsed=%.2f s, type=SimForCausalLM, avail mem=62.12 GB, "
        "mem usage=16.40 GB.",
        elapsed,
    )
    window = spec.window
    if spec.algorithm in ("DFLASH", "DDTREE"):
        # Printed by tp rank 0 of the scheduler process, as in dflash_worker_v2.py.
        log.info(
            "%sInitialized DFLASH draft runner. attention_backend=flashinfer, "
            "model=DFlashDraftModel, block_size=%s, draft_window_size=%s, compact_cache=%s",
            TP0,
            spec.num_draft_tokens,
            window,
            window is not None,
        )
    if spec.algorithm == "DDTREE":
        log.info(
            "%sInitialized DDTree worker. block_size=%s, tree_budget=%s, max_tree_nodes=%s",
            TP0,
            spec.num_draft_tokens,
            spec.budget,
            (spec.budget or 0) + 1,
        )
    if spec.algorithm == "EAGLE":
        log.info(
            "%sInitialized EAGLE draft worker. model=%s, num_steps=%s, topk=%s, "
            "num_draft_tokens=%s",
            TP0,
            args.draft_model_path,
            spec.num_steps,
            spec.topk,
            spec.num_draft_tokens,
        )


def prepare_engine(args: cli.ServerArgs, spec: SpecSettings) -> float:
    """The KV cache and the CUDA graphs, with SGLang's lines (memory_pool.py,
    cuda_graph_setup.py); returns when (``time.monotonic()``) the engine was done."""
    time.sleep(args.kv_seconds)
    log.info(
        "%sKV Cache is allocated. dtype: torch.bfloat16, #tokens: 262144, K size: 12.00 GB, "
        "V size: 12.00 GB",
        TP0,
    )
    log.info("%sMemory pool end. avail mem=38.10 GB", TP0)
    what = "verify" if spec.speculative else "decode"
    log.info(
        "%sCapture target %s CUDA graph begin. backend=full, num_tokens_per_req=%d, "
        "avail mem=38.10 GB",
        TP0,
        what,
        spec.num_draft_tokens or 1 if spec.speculative else 1,
    )
    began = time.perf_counter()
    time.sleep(args.graph_seconds)
    log.info(
        "%sCapture target %s CUDA graph end. bs=[1, 2, 4, 8], elapsed=%.2f s, "
        "mem usage=0.90 GB, avail mem=37.20 GB.",
        TP0,
        what,
        time.perf_counter() - began,
    )
    return time.monotonic()


async def serve(server: SimServer, args: cli.ServerArgs, engine_done: float) -> int:
    """Listen, warm up, flip health to 200, and serve until stopped.

    The warm-up counts from ``engine_done``, as a start's does: the HTTP
    server's own start is part of it (health answers 503 once it listens).
    """
    stamping = arrival.protocol_class()
    config = uvicorn.Config(
        server.app(),
        host=args.host,
        port=args.port,
        http=stamping if stamping is not None else "auto",
        log_config=None,
        access_log=False,
        proxy_headers=False,  # nothing stands in front of the simulator; one layer less per request
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    uv = uvicorn.Server(config)
    engine = asyncio.ensure_future(server.engine.run())

    def engine_died(task: asyncio.Future[None]) -> None:
        # A bug in a step would otherwise hang every request silently.
        if not task.cancelled() and task.exception() is not None:
            log.error("Engine loop died: %r; exiting", task.exception())
            uv.should_exit = True

    engine.add_done_callback(engine_died)
    serving = asyncio.ensure_future(uv.serve())
    try:
        while not uv.started:
            if serving.done():
                return 1
            await asyncio.sleep(0.005)
        await asyncio.sleep(max(0.0, engine_done + args.warmup_seconds - time.monotonic()))
        server.collector = IdleCollector()
        server.collector.start()
        server.mark_ready()
        await serving
    except SystemExit as exc:  # uvicorn exits this way when it cannot bind
        return int(exc.code or 1)
    finally:
        engine.cancel()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the simulator; returns the process exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parsed = cli.parse(argv)
    setup_logging()
    try:
        args = cli.resolve(parsed, os.environ)
    except cli.InvalidArgs as exc:
        for warning in exc.warnings:
            log.warning(warning)
        return fail(str(exc), exc.kind)
    scripted: list[Scripted] | None = None
    if args.answers is not None:
        try:
            scripted = load_scripted(args.answers)
        except AnswersFileError as exc:
            return fail(str(exc))
    spec = effective_spec(args)
    for warning in args.warnings:
        log.warning(warning)
    if args.restart_noise > 0 and args.start_count_file is not None:
        try:
            start = next_start(args.start_count_file)
        except OSError as exc:
            return fail(f"--sim-start-count-file {args.start_count_file!r}: {exc}", "OSError")
        args = replace(args, speed_factor=speed_factor(args.seed, start, args.restart_noise))
        log.info(
            "Simulated restart noise: start %d runs at speed factor %.4f (--sim-restart-noise %g)",
            start,
            args.speed_factor,
            args.restart_noise,
        )
    log.info("server_args=%r", args)
    log.info("Load weight begin. avail mem=78.52 GB")
    if args.faults.hang_on_load:
        while True:
            time.sleep(3600)
    loaded = load_weights(args)
    first = args.faults.first_start
    if first is not None and args.state_file is not None and first_start(args.state_file):
        if first == "sigkill":
            log.error("Simulated: killed by the kernel's OOM killer (--sim-fault %s)", first)
            logging.shutdown()
            os.kill(os.getpid(), signal.SIGKILL)
        log.error(
            "Scheduler hit an exception: Traceback (most recent call last):\n"
            '  File "sglang/srt/model_executor/model_runner.py", line 412, in load_model\n'
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
            "a total capacity of 79.25 GiB of which 1.06 GiB is free (simulated by --sim-fault "
            "oom-on-first-start)"
        )
        return 1
    if args.faults.crash_on_start:
        log.error(
            "Scheduler hit an exception: Traceback (most recent call last):\n"
            '  File "sglang/srt/managers/scheduler.py", line 2794, in run_scheduler_process\n'
            "RuntimeError: CUDA error: an illegal memory access was encountered "
            "(simulated by --sim-fault crash-on-start)"
        )
        return 1
    log_loaded(args, spec, loaded)
    engine_done = prepare_engine(args, spec)
    server = SimServer(args, spec, launch_command(argv), scripted)
    # uvloop where installed, as SGLang's server: a burst of 256 requests is read and
    # a step's 256 events written at a fraction of asyncio's cost per callback.
    return run_fresh(serve(server, args, engine_done))
