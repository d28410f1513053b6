"""Server starts per config under pytest-xdist: each config must start exactly once.

Twelve tests alternate between two configs (``budget=4`` and ``budget=8``) in
file order, against the one local simulator, under ``-n 2`` and ``-n 4``. Each
run counts the simulator starts per config from the server logs of every
worker; any config started more than once (the order 4, 8, 4 of a worker
that joined late) is an extra restart, which on a GPU host is a full model
load. Prints one line per run and exits 1 on any extra start.

    .venv/bin/python benchmarks/xdist_restarts.py [--runs 20] [--workers 2 4]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

TESTS = "import pytest\n\n" + "\n".join(
    f"@pytest.mark.dflash(budget={4 if i % 2 == 0 else 8}, window=2048)\n"
    f"def test_{i:02d}(dflash_service):\n"
    f"    assert dflash_service.server_info['speculative_num_draft_tokens'] == "
    f"{4 if i % 2 == 0 else 8}\n"
    for i in range(12)
)

FAST_SIM = (
    f"{sys.executable} -m pytest_specdecode.sim --sim-load-seconds 0.3 "
    "--sim-warmup-seconds 0.2 --sim-time-scale 0"
)
BLOCK = re.compile(r"block_size=(\d+)")


def starts(basetemp: Path) -> list[int]:
    """The budget of every server start, in no particular order, across all workers."""
    found: list[int] = []
    for log in sorted(basetemp.glob("**/dflash-logs/server-*.log")):
        text = log.read_text(errors="replace")
        if "fired up" in text:
            match = BLOCK.search(text)
            found.append(int(match.group(1)) if match else -1)
    return found


def one_run(project: Path, workers: int, index: int) -> tuple[Counter[int], str]:
    basetemp = project / f"tmp-{workers}-{index}"
    result = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
            "-n", str(workers), f"--basetemp={basetemp}",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    last = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else "no output"
    if result.returncode != 0:
        last = f"pytest exited {result.returncode}: {last}"
    return Counter(starts(basetemp)), last


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    options = parser.parse_args()
    bad = 0
    with tempfile.TemporaryDirectory(prefix="dflash-restarts-") as tmp:
        project = Path(tmp)
        (project / "pytest.ini").write_text(
            f"[pytest]\ndflash_launch = {FAST_SIM}\ndflash_ready_timeout = 60\n"
            "dflash_report = report.json\n"
        )
        (project / "test_interleaved.py").write_text(TESTS)
        for workers in options.workers:
            exact = 0
            started = time.monotonic()
            for index in range(1, options.runs + 1):
                counts, last = one_run(project, workers, index)
                ok = counts == Counter({4: 1, 8: 1}) and "12 passed" in last
                exact += ok
                shown = ", ".join(f"budget={b}: {n}" for b, n in sorted(counts.items()))
                print(
                    f"-n {workers} run {index:2d}/{options.runs}: starts {shown or 'none'}"
                    f"{'' if ok else '  <-- EXTRA START OR FAILURE'} ({last})",
                    flush=True,
                )
            bad += options.runs - exact
            print(
                f"-n {workers}: each config started exactly once in {exact}/{options.runs} "
                f"runs ({time.monotonic() - started:.0f} s)",
                flush=True,
            )
    print("requirement: every config starts exactly once in every run")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
