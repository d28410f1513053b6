"""The numerics-aware lossless gate on the simulator: false failures, catches, cost.

Requirement (issue 34), each run one pytest session of a NONE baseline and a
DFLASH budget=8 config against the bundled simulator (``--sim-seed`` = the
run's number, so each run draws its own margins and flips):

1. ``--sim-fault near-tie`` (greedy tokens flip at top-2 margins < 0.02, NONE
   runs too, like BF16 numerics): 0 lossless false failures in ``--runs``;
2. ``--sim-fault near-tie --sim-fault lossy:0.1`` (also a wrong token at a
   large margin in one reply of ten: a drafter defect): caught in every run;
3. the gate's time (its own requests and judging, from the lossless records'
   ``seconds``) as a share of a run that also measures the default throughput
   cases (contexts 60/1024/4096 x concurrency 1/8/32, 512 tokens, 3 rounds, at
   a tenth of the simulator's modelled speed): under 10%. It is the whole
   gate's time, so an upper bound on what the numerics-aware parts added.

Figures come from the simulator, not a GPU.

    .venv/bin/python benchmarks/lossless_numerics.py [--runs 50]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEST = """
import pytest

@pytest.mark.lossless
@pytest.mark.dflash(algorithm="NONE")
def test_baseline(dflash_lossless):
    dflash_lossless.check()

@pytest.mark.lossless
@pytest.mark.dflash(budget=8)
def test_lossless(dflash_lossless):
    dflash_lossless.check()

@pytest.mark.throughput
@pytest.mark.dflash(budget=8)
def test_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
"""
SIM = "-m pytest_specdecode.sim --sim-load-seconds 0 --sim-warmup-seconds 0"
INI = """[pytest]
dflash_launch = {python} {sim} {extra}
dflash_sim_time_scale = {scale}
dflash_ready_timeout = 60
dflash_output_tokens = 512
dflash_report = report.json
dflash_html =
"""
MAX_SHARE = 0.10


def run(
    project: Path, extra: str, scale: float, *args: str
) -> tuple[int, dict[str, object], float, float]:
    """One pytest session: its exit status, the DFLASH config's lossless record, its
    seconds, and the seconds of the gate's own requests (every lossless record's)."""
    (project / "pytest.ini").write_text(
        INI.format(python=sys.executable, sim=SIM, extra=extra, scale=scale)
    )
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            *args,
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    seconds = time.monotonic() - started
    record: dict[str, object] = {}
    gate = 0.0
    report = project / "report.json"
    if report.exists():
        for config in json.loads(report.read_text()).get("configs") or []:
            gate += sum(float(r.get("seconds") or 0.0) for r in config.get("lossless") or [])
            if config.get("label") == "DFLASH budget=8" and config.get("lossless"):
                record = config["lossless"][0]
        report.unlink()
    if done.returncode not in (0, 1) or (not record and "lossless" in " ".join(args)):
        print(done.stdout[-3000:], done.stderr[-2000:], sep="\n", file=sys.stderr)
    return done.returncode, record, seconds, gate


def verdict(false_failures: int, caught: int, runs: int, share: float) -> int:
    """0 when no near-tie run failed, every lossy run was caught and the gate took < 10%."""
    return 0 if runs > 0 and false_failures == 0 and caught == runs and share < MAX_SHARE else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lossless-numerics-") as tmp:
        project = Path(tmp)
        (project / "test_ll.py").write_text(TEST)
        only = ("-m", "lossless")
        false_failures = numerics = 0
        for seed in range(args.runs):
            status, record, _, _ = run(project, f"--sim-fault near-tie --sim-seed {seed}", 0, *only)
            false_failures += status != 0 or not record.get("passed")
            numerics += int(str(record.get("numerics") or 0))
        print(f"near-tie: {false_failures}/{args.runs} false failures "
              f"({numerics} divergences classified numerics)", flush=True)  # fmt: skip
        caught = defects = 0
        for seed in range(args.runs):
            faults = f"--sim-fault near-tie --sim-fault lossy:0.1 --sim-seed {seed}"
            status, record, _, _ = run(project, faults, 0, *only)
            caught += status == 1 and record.get("passed") is False
            defects += int(str(record.get("defects") or 0))
        print(f"lossy:0.1: caught in {caught}/{args.runs} runs "
              f"({defects} drafter defects in {100 * args.runs} replies)", flush=True)  # fmt: skip
        _, _, whole, gate = run(project, "--sim-fault near-tie", 0.1)
        share = gate / whole
        print(f"gate time: {gate:.1f} s of a {whole:.1f} s run ({share:.1%}: the baseline's two "
              "runs and the config's one, logprobs and judging included)")  # fmt: skip
    status = verdict(false_failures, caught, args.runs, share)
    print(
        f"requirement: 0/{args.runs} false failures, {args.runs}/{args.runs} caught, gate "
        f"< {MAX_SHARE:.0%} of the run (simulated): {'PASS' if status == 0 else 'FAIL'}"
    )
    return status


if __name__ == "__main__":
    raise SystemExit(main())
