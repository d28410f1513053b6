"""The plugin's load client against SGLang 0.5.23's own bench client, side by side.

Starts one simulator (``--sim-time-scale 0``, as fast as it streams), then at
each concurrency runs, alternately and twice each (best of two):

- the built-in suite in external mode: ``pytest --pyargs pytest_specdecode.suite
  -m throughput --dflash-restart=never --dflash-port P --dflash-contexts 1024
  --dflash-output-tokens 512 --dflash-rounds 2 --dflash-concurrency C``
  with ``--dflash-load-mode continuous --dflash-continuous-requests 4C`` (the
  same load as SGLang's client gets; ``--plugin-mode rounds`` for C at once),
  aggregate output tok/s from the run's report;
- ``python -m sglang.benchmark.serving --backend sglang`` at
  ``--max-concurrency C`` (its "output_throughput"), 4 x C prompts.

SGLang's client runs from a virtualenv of its own that this script makes
(``--venv``, default ``~/.cache/specdecode-bench/sglang-venv``): ``pip install
sglang==0.5.23 --no-deps`` plus only what its bench module imports (no torch:
the one torch-importing module it touches, for a constant, is stubbed).
Offline: a word-level tokenizer built here with ``tokenizers`` and saved as a
Hugging Face tokenizer directory, and a ShareGPT-shaped JSON file of prompts
cut to 1024 of the simulator's tokens; ``HF_HUB_OFFLINE=1``.

Requirement: plugin tok/s >= SGLang bench tok/s (ratio >= 1.0) at every
concurrency; exits 1 otherwise. Two more checks of issue 21, each also a
requirement of the exit status:

- tokens: on the same simulator, one round at each of ``--token-levels``
  (1, 8, 32, 256) sent by the load client in-process; the tokens it counts
  equal the simulator's own ``sglang:generation_tokens_total`` delta within
  0.5%;
- ``--overhead``: a second simulator at ``--sim-time-scale 1`` and the suite
  at concurrency 256 (``--dflash-load-mode rounds``, the default), whose
  report's ``client_overhead_ms_p99`` must be at most 5 ms (client e2e minus
  the server's own ``meta_info.e2e_latency``), with ``--dflash-client-wait poll``
  (the loop a server on another machine gets; on 127.0.0.1 it would sleep).

Figures are the simulator's and measure the *clients*; they say nothing about
a GPU. On a busy machine the two clients and the simulator compete for CPU:
run it on an idle one for firm figures.

    .venv/bin/python benchmarks/vs_sglang_bench.py [--concurrency 32,128,256] [--tries 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import requests

from pytest_specdecode.processes.children import free_port

SGLANG = "sglang==0.5.23"
# What sglang.benchmark.serving imports at module level, pinned as the wheel asks.
SGLANG_DEPS = [
    "aiohttp", "numpy", "orjson", "msgspec", "requests", "tqdm", "psutil", "pyzmq",
    "transformers==5.19.0", "tokenizers==0.23.2", "pillow", "pybase64",
]  # fmt: skip
DEFAULT_VENV = Path.home() / ".cache" / "specdecode-bench" / "sglang-venv"
REQUIREMENT = 1.0
TOKEN_TOLERANCE = 0.005  # the client's token count against the server's own counter
OVERHEAD_MS = 5.0  # client_overhead_ms_p99 at concurrency 256, --sim-time-scale 1
# The built-in suite's default config (DFLASH, full-attention drafter), so external
# mode runs it instead of skipping.
SIM_FLAGS = [
    "--speculative-algorithm", "DFLASH",
    "--speculative-draft-model-path", "d",
    "--speculative-num-draft-tokens", "8",
    "--sim-load-seconds", "0",
    "--sim-warmup-seconds", "0",
    "--enable-metrics",
]  # fmt: skip

# Runs SGLang's bench module as __main__ without torch: the package __init__s on
# its import path (sglang, sglang.srt, sglang.srt.utils, sglang.srt.disaggregation)
# import torch, so they become bare packages; the one torch-importing module it
# needs a constant from (FAKE_BOOTSTRAP_HOST) and the hub-only ``datasets`` are stubbed.
RUNNER = """\
import importlib.util, runpy, sys, types
root = importlib.util.find_spec("sglang").submodule_search_locations[0]
for name in ("sglang", "sglang.srt", "sglang.srt.utils", "sglang.srt.disaggregation"):
    mod = types.ModuleType(name)
    mod.__path__ = [root + name[len("sglang"):].replace(".", "/")]
    sys.modules[name] = mod
stub = types.ModuleType("sglang.srt.disaggregation.utils")
stub.FAKE_BOOTSTRAP_HOST = "2.2.2.2"
sys.modules["sglang.srt.disaggregation.utils"] = stub
def load_dataset(*args, **kwargs):
    raise RuntimeError("offline: nothing is fetched from a hub")
datasets = types.ModuleType("datasets")
datasets.load_dataset = load_dataset
sys.modules.setdefault("datasets", datasets)
sys.argv[0] = "sglang.benchmark.serving"
runpy.run_module("sglang.benchmark.serving", run_name="__main__", alter_sys=True)
"""

# Builds a small word-level tokenizer and saves it as a Hugging Face tokenizer directory.
TOKENIZER = """\
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
texts = json.load(open(sys.argv[1]))
tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>", "</s>"]))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="<s>",
                               eos_token="</s>")
fast.save_pretrained(sys.argv[2])
"""


def ensure_venv(venv: Path) -> Path:
    """SGLang's bench client in its own virtualenv; made once, reused after."""
    python = venv / "bin" / "python"
    marker = venv / ".specdecode-ready"
    if marker.exists() and python.exists():
        return python
    print(f"making {venv} with {SGLANG} (--no-deps) and its bench client's imports ...")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-deps", SGLANG], check=True)
    subprocess.run([*pip, *SGLANG_DEPS], check=True)
    marker.write_text(SGLANG + "\n")
    return python


@contextlib.contextmanager
def simulator(time_scale: float, log: Path) -> Iterator[tuple[str, int]]:
    """The simulator on a free loopback port until the block ends."""
    port = free_port()
    cmd = [sys.executable, "-m", "pytest_specdecode.sim", "--host", "127.0.0.1",
           "--port", str(port), *SIM_FLAGS, "--sim-time-scale", str(time_scale)]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        with requests.Session() as session:
            while True:
                if proc.poll() is not None:
                    tail = log.read_text()[-800:]
                    raise SystemExit(f"simulator exited {proc.returncode}: {tail}")
                with contextlib.suppress(requests.RequestException):
                    if session.get(url + "/health_generate", timeout=5).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise SystemExit(f"simulator not ready after 60 s: {log.read_text()[-800:]}")
                time.sleep(0.05)
        yield url, port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def write_inputs(python: Path, url: str, n: int, work: Path) -> tuple[Path, Path]:
    """A ShareGPT-shaped prompt file (1024 simulator tokens each) and a tokenizer dir."""
    from pytest_specdecode.client import SGLangClient
    from pytest_specdecode.throughput.workload import PromptBuilder

    with SGLangClient(url) as client:
        prompts = PromptBuilder(client.count_tokens, domain="chat").build(1024, n)
    rows = [
        {
            "id": f"p{i}",
            "conversations": [
                {"from": "human", "value": p.text},
                {"from": "gpt", "value": "ok " * 64},
            ],
        }
        for i, p in enumerate(prompts)
    ]
    data = work / "sharegpt.json"
    data.write_text(json.dumps(rows))
    texts = work / "texts.json"
    texts.write_text(json.dumps([p.text for p in prompts]))
    tokenizer = work / "tokenizer"
    subprocess.run([str(python), "-c", TOKENIZER, str(texts), str(tokenizer)], check=True)
    return data, tokenizer


def token_check(url: str, levels: list[int]) -> list[tuple[int, int, float]]:
    """(concurrency, client tokens, server counter delta) for one round at each level."""
    from pytest_specdecode.client import SGLangClient
    from pytest_specdecode.throughput.accuracy import GENERATION_TOKENS
    from pytest_specdecode.throughput.load import run_round
    from pytest_specdecode.throughput.workload import PromptBuilder

    rows = []
    with SGLangClient(url) as client:
        for conc in levels:
            prompts = PromptBuilder(client.count_tokens, domain="chat").build(1024, conc)
            before = client.metric_value(GENERATION_TOKENS)
            result = run_round(client, prompts, 512)
            after = client.metric_value(GENERATION_TOKENS)
            if result.errors or before is None or after is None:
                raise SystemExit(f"token check at c{conc} failed: {result.errors[:1]}")
            mine = sum(r.completion_tokens for r in result.results)
            rows.append((conc, mine, after - before))
    return rows


def overhead_p99(concurrency: int, work: Path) -> tuple[float, float]:
    """The suite at ``concurrency`` on a simulator at scale 1: overhead p50, p99 (ms)."""
    with simulator(1, work / "sim-scale1.log") as (_, port):
        report = work / f"overhead-c{concurrency}.json"
        # The loop a server on another machine (a GPU host) gets: this simulator is on
        # 127.0.0.1, where the client would sleep between reads (--dflash-client-wait).
        run_suite(port, concurrency, work, "rounds", report, "--dflash-client-wait", "poll")
        data = json.loads(report.read_text())
    return _find_metric(data, "client_overhead_ms_p50"), _find_metric(
        data, "client_overhead_ms_p99"
    )


def plugin_tok_s(port: int, concurrency: int, work: Path, mode: str) -> float:
    """The built-in suite's throughput case at ``concurrency``, external mode.

    ``continuous``: 4 x C requests per round with C in flight, the load SGLang's
    client is given (``--num-prompts 4C --max-concurrency C``); ``rounds``: C at once.
    """
    report = work / f"report-c{concurrency}-{time.monotonic_ns()}.json"
    run_suite(port, concurrency, work, mode, report)
    return float(_find_metric(json.loads(report.read_text()), "tok_s"))


def run_suite(
    port: int, concurrency: int, work: Path, mode: str, report: Path, *extra: str
) -> None:
    """The built-in suite's throughput case in external mode, its report at ``report``."""
    load = ["--dflash-load-mode", mode, *extra]
    if mode == "continuous":
        load += ["--dflash-continuous-requests", str(4 * concurrency)]
    cmd = [
        sys.executable, "-m", "pytest", "--pyargs", "pytest_specdecode.suite", "-m", "throughput",
        "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
        "--dflash-restart=never", "--dflash-port", str(port),
        "--dflash-contexts", "1024", "--dflash-output-tokens", "512", "--dflash-rounds", "2",
        "--dflash-concurrency", str(concurrency), "--dflash-report", str(report), *load,
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"plugin run failed ({done.returncode}):\n{done.stdout[-3000:]}")


def _find_metric(data: object, name: str) -> float:
    """The one throughput record's ``metrics[name]`` anywhere in a report."""
    if isinstance(data, dict):
        metrics = data.get("metrics")
        if isinstance(metrics, dict) and isinstance(metrics.get(name), (int, float)):
            return float(metrics[name])
        for value in data.values():
            with contextlib.suppress(LookupError):
                return _find_metric(value, name)
    elif isinstance(data, list):
        for value in data:
            with contextlib.suppress(LookupError):
                return _find_metric(value, name)
    raise LookupError(name)


def sglang_tok_s(
    python: Path, port: int, concurrency: int, data: Path, tokenizer: Path, work: Path
) -> float:
    """SGLang's bench client at ``--max-concurrency concurrency``: its output tok/s."""
    out = work / f"sglang-c{concurrency}-{time.monotonic_ns()}.jsonl"
    cmd = [
        str(python), "-c", RUNNER, "--backend", "sglang", "--host", "127.0.0.1",
        "--port", str(port), "--dataset-name", "sharegpt", "--dataset-path", str(data),
        "--tokenizer", str(tokenizer), "--model", str(tokenizer),
        "--num-prompts", str(4 * concurrency), "--sharegpt-output-len", "512",
        "--max-concurrency", str(concurrency), "--request-rate", "inf",
        "--output-file", str(out), "--disable-tqdm",
    ]  # fmt: skip
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0 or not out.exists():
        raise SystemExit(
            f"SGLang bench failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    line = out.read_text().strip().splitlines()[-1]
    return float(json.loads(line)["output_throughput"])


def verdict(ratios: list[float], requirement: float = REQUIREMENT) -> int:
    """0 when every ratio meets the requirement, else 1."""
    return 0 if ratios and min(ratios) >= requirement else 1


def main(argv: list[str] | None = None) -> int:
    """Race both clients; print the table; exit 1 below the requirement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="32,128,256", help="Default: %(default)r")
    parser.add_argument("--tries", type=int, default=2, help="best of N. Default: %(default)r")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="Default: %(default)s")
    parser.add_argument(
        "--plugin-mode", choices=("continuous", "rounds"), default="continuous",
        help="the plugin's --dflash-load-mode. Default: %(default)r",
    )  # fmt: skip
    parser.add_argument("--token-levels", default="1,8,32,256", help="Default: %(default)r")
    parser.add_argument(
        "--overhead", action="store_true",
        help="also measure client_overhead_ms_p99 at c256 on a --sim-time-scale 1 simulator. "
        "Default: off",
    )  # fmt: skip
    parser.add_argument("--no-race", action="store_true", help="skip the race. Default: off")
    args = parser.parse_args(argv)
    levels = [] if args.no_race else [int(c) for c in args.concurrency.split(",")]
    token_levels = [int(c) for c in args.token_levels.split(",") if c]
    python = ensure_venv(args.venv) if levels else Path(sys.executable)
    rows: list[tuple[int, float, float]] = []
    tokens: list[tuple[int, int, float]] = []
    overhead: tuple[float, float] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with simulator(0, work / "sim.log") as (url, port):
            tokens = token_check(url, token_levels)
            if levels:
                data, tokenizer = write_inputs(python, url, 4 * max(levels), work)
            for conc in levels:
                plugin: list[float] = []
                bench: list[float] = []
                for _ in range(args.tries):
                    plugin.append(plugin_tok_s(port, conc, work, args.plugin_mode))
                    bench.append(sglang_tok_s(python, port, conc, data, tokenizer, work))
                print(f"c{conc}: plugin {plugin} SGLang bench {bench}", flush=True)
                rows.append((conc, max(plugin), max(bench)))
        if args.overhead:
            overhead = overhead_p99(256, work)
    status = 0
    print("\ntokens: the load client's count against sglang:generation_tokens_total's delta")
    for conc, counted, server in tokens:
        off = abs(counted - server) / server if server else 1.0
        ok = off <= TOKEN_TOLERANCE
        status |= 0 if ok else 1
        print(f"  c{conc}: client {counted} server {server:.0f} off {off:.3%} "
              f"{'ok' if ok else f'FAIL (> {TOKEN_TOLERANCE:.1%})'}")  # fmt: skip
    if overhead is not None:
        ok = overhead[1] <= OVERHEAD_MS
        status |= 0 if ok else 1
        print(f"overhead at c256, --sim-time-scale 1: p50 {overhead[0]:.2f} ms, "
              f"p99 {overhead[1]:.2f} ms (requirement <= {OVERHEAD_MS:g} ms): "
              f"{'PASS' if ok else 'FAIL'}")  # fmt: skip
    if not levels:
        return status
    print(
        f"\nbest of {args.tries}, simulator --sim-time-scale 0, input 1024, output 512 tokens, "
        f"plugin --dflash-load-mode {args.plugin_mode}"
    )
    print("| concurrency | plugin tok/s | SGLang bench tok/s | ratio |")
    print("|---|---|---|---|")
    ratios = []
    for conc, mine, theirs in rows:
        ratio = mine / theirs if theirs else 0.0
        ratios.append(ratio)
        print(f"| {conc} | {mine:,.0f} | {theirs:,.0f} | {ratio:.2f} |")
    raced = verdict(ratios)
    print(f"requirement: ratio >= {REQUIREMENT} at every concurrency: "
          f"{'PASS' if raced == 0 else 'FAIL'}")  # fmt: skip
    return status | raced


if __name__ == "__main__":
    raise SystemExit(main())
