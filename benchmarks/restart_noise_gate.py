"""The compare gate under noise that spans restarts, on the simulator.

One project, one pytest-benchmark storage, the simulator with
``--dflash-sim-restart-noise 0.06`` (each server start runs at its own speed
within 1 +- 6%, the starts counted in ``.dflash/sim-starts``, so every pytest
run below is a new start with a new factor):

1. three ``--dflash-config budget=8 --benchmark-save=b8`` runs (three starts);
2. five more ``budget=8`` runs with ``--benchmark-compare --dflash-compare-fail
   tok_s:5%``: each must exit 0 (the between-run spread of the three saved
   runs widens the gate's interval; within-run noise alone would cry wolf);
3. one ``budget=1`` run (no speculation, still paying the drafter) against the
   same storage: it must exit 1.

Prints each run's exit status, its start's speed factor, and the gate's
findings by status and by the noise they used; exits 1 when the requirement
is missed. Figures come from the simulator, not a GPU.

    .venv/bin/python benchmarks/restart_noise_gate.py [--noise 0.06] [--compares 5]
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

from pytest_specdecode.sim.restarts import speed_factor
from pytest_specdecode.throughput.comparison import check, load_run, pair, parse_fail_spec

TEST = """
import pytest

@pytest.mark.throughput
def test_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
"""
SIM = "-m pytest_specdecode.sim --sim-load-seconds 0.3 --sim-warmup-seconds 0.2"
INI = """[pytest]
dflash_launch = {python} {sim}
dflash_sim_time_scale = 0.25
dflash_sim_restart_noise = {noise}
dflash_ready_timeout = 60
dflash_contexts = 60,1024
dflash_concurrency = 1,8
dflash_output_tokens = 128
dflash_rounds = 3
dflash_report = report.json
"""
GATE = ("--dflash-compare-fail", "tok_s:5%")
JSON = ("--benchmark-json", "now.json")
NOISE = [0.06]


def within_only(project: Path) -> Counter[str]:
    """What the gate would have said with the within-run interval alone (the old gate)."""
    runs = sorted((project / ".benchmarks").glob("*/[0-9][0-9][0-9][0-9]_*.json"))
    deltas = pair(load_run(runs[-1]), load_run(project / "now.json"))
    return Counter(f.status for f in check(deltas, [parse_fail_spec(GATE[1])]))


def pytest_run(project: Path, *args: str) -> tuple[int, Counter[str], str]:
    """Run pytest in ``project``: its exit status, the gate's findings, the start's factor."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    findings: Counter[str] = Counter()
    report = project / "report.json"
    factor = "?"
    if report.exists():
        data = json.loads(report.read_text())
        compare = data.get("compare") or {}
        findings.update(f"{f['status']}/{f.get('noise')}" for f in compare.get("findings") or [])
        starts = project / ".dflash" / "sim-starts"
        if starts.exists():  # the simulator's own draw for this start (seed 0)
            start = int(starts.read_text().strip())
            factor = f"#{start} {speed_factor(0, start, NOISE[0]):.4f}"
    if done.returncode not in (0, 1):
        print(done.stdout[-3000:], done.stderr[-2000:], sep="\n", file=sys.stderr)
    return done.returncode, findings, factor


def verdict(same: list[int], slower: int) -> int:
    """0 when every same-config compare exited 0 and the slower config exited 1."""
    return 0 if same and all(s == 0 for s in same) and slower == 1 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--noise", type=float, default=0.06)
    parser.add_argument("--saves", type=int, default=3)
    parser.add_argument("--compares", type=int, default=5)
    args = parser.parse_args()
    NOISE[0] = args.noise
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="restart-noise-") as tmp:
        project = Path(tmp)
        (project / "test_tp.py").write_text(TEST)
        (project / "pytest.ini").write_text(
            INI.format(python=sys.executable, sim=SIM, noise=args.noise)
        )
        for n in range(1, args.saves + 1):
            status, _, factor = pytest_run(
                project, "--dflash-config", "budget=8", "--benchmark-save=b8"
            )
            print(f"save {n}: budget=8 exit {status} (start {factor})", flush=True)
            if status != 0:
                return 1
        same: list[int] = []
        for n in range(1, args.compares + 1):
            status, found, factor = pytest_run(
                project, "--dflash-config", "budget=8", "--benchmark-compare", *GATE, *JSON
            )
            same.append(status)
            print(
                f"compare {n}: budget=8 exit {status} (start {factor}; {dict(found)}; "
                f"within-run interval alone: {dict(within_only(project))})",
                flush=True,
            )
        slower, found, factor = pytest_run(
            project, "--dflash-config", "budget=1", "--benchmark-compare", *GATE, *JSON
        )
        print(
            f"budget=1: exit {slower} (start {factor}; {dict(found)}; within-run interval "
            f"alone: {dict(within_only(project))})",
            flush=True,
        )
        starts = (project / ".dflash" / "sim-starts").read_text().strip()
    status = verdict(same, slower)
    print(
        f"budget=8 compares passed {same.count(0)}/{len(same)}, budget=1 exit {slower} "
        f"(requirement: all 0, then 1); {starts} server starts; "
        f"{time.monotonic() - started:.0f} s; simulated figures, not a GPU: "
        f"{'pass' if status == 0 else 'FAIL'}"
    )
    return status


if __name__ == "__main__":
    raise SystemExit(main())
