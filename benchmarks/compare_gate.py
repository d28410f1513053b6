"""The interval-aware compare gate on the simulator: noise passes, a slower config fails.

Five trials, each in a fresh project with its own pytest-benchmark storage:

1. ``--dflash-config budget=8 --benchmark-save=b8`` saves a run;
2. the same config again with ``--benchmark-compare --dflash-compare-fail
   tok_s:5%`` (pytest-benchmark's own option as the only baseline source)
   must exit 0: two runs of one config differ only by noise;
3. ``budget=1`` (no speculation, still paying the drafter) with
   ``--benchmark-compare=0001 --dflash-compare-fail tok_s:5%`` must exit 1.

Requirement: 5 of 5 trials exit 0 in step 2 and 1 in step 3. The script
prints each trial's exit statuses and how many cases the gate found within
the limit, inconclusive or beyond it, and exits 1 when the requirement is
missed. Figures come from the simulator, not a GPU.

    .venv/bin/python benchmarks/compare_gate.py [--trials 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

TEST = """
import pytest

@pytest.mark.throughput
def test_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
"""
SIM = (
    "-m pytest_specdecode.sim --sim-time-scale 0.05 --sim-load-seconds 0.3 --sim-warmup-seconds 0.2"
)
INI = """[pytest]
dflash_launch = {python} {sim}
dflash_ready_timeout = 60
dflash_contexts = 60,1024
dflash_concurrency = 1,8
dflash_output_tokens = 128
dflash_rounds = 3
dflash_report = report.json
"""
GATE = ("--dflash-compare-fail", "tok_s:5%")


def pytest_run(project: Path, *args: str) -> tuple[int, Counter[str]]:
    """Run pytest in ``project``; the exit status and the gate's findings by status."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    findings: Counter[str] = Counter()
    report = project / "report.json"
    if report.exists():
        compare = json.loads(report.read_text()).get("compare") or {}
        findings.update(f["status"] for f in compare.get("findings") or [])
    if done.returncode not in (0, 1):
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n", file=sys.stderr)
    return done.returncode, findings


def trial(base: Path, number: int) -> tuple[int, int, Counter[str], Counter[str]]:
    project = base / f"trial{number}"
    project.mkdir()
    (project / "test_tp.py").write_text(TEST)
    (project / "pytest.ini").write_text(INI.format(python=sys.executable, sim=SIM))
    saved, _ = pytest_run(project, "--dflash-config", "budget=8", "--benchmark-save=b8")
    if saved != 0:
        raise SystemExit(f"trial {number}: saving the budget=8 run exited {saved}")
    same, same_found = pytest_run(
        project, "--dflash-config", "budget=8", "--benchmark-compare", *GATE
    )
    slower, slower_found = pytest_run(
        project, "--dflash-config", "budget=1", "--benchmark-compare=0001", *GATE
    )
    return same, slower, same_found, slower_found


def verdict(same: list[int], slower: list[int]) -> int:
    """0 when every same-config run exited 0 and every slower run exited 1."""
    return 0 if all(s == 0 for s in same) and all(s == 1 for s in slower) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    same: list[int] = []
    slower: list[int] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="compare-gate-") as tmp:
        for number in range(1, args.trials + 1):
            a, b, found_a, found_b = trial(Path(tmp), number)
            same.append(a)
            slower.append(b)
            print(
                f"trial {number}: budget=8 vs budget=8 exit {a} ({dict(found_a)}); "
                f"budget=1 vs budget=8 exit {b} ({dict(found_b)})",
                flush=True,
            )
    status = verdict(same, slower)
    print(
        f"same config passed {same.count(0)}/{len(same)}, slower config failed "
        f"{slower.count(1)}/{len(slower)} (requirement: all); "
        f"{time.monotonic() - started:.0f} s; simulated figures, not a GPU: "
        f"{'pass' if status == 0 else 'FAIL'}"
    )
    return status


if __name__ == "__main__":
    raise SystemExit(main())
