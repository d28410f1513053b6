"""The acceptance-integrity gate against its two faults and a clean simulator.

Each trial is one default 3-round throughput run of the built-in suite under
``--dflash-config budget=8,window=1024`` with contexts 60 and 4096 (within and
past the window) at concurrency 1 and 8, 512 output tokens (a real server run's
default), no modelled delay, and its own simulator seed. Requirement:
``--sim-fault window-ignored`` and ``--sim-fault batch-collapse`` each fail the
run with an ``acceptance:`` gate line in every trial, and clean runs raise no
acceptance line (and exit 0) in any trial. Prints each fault's ``caught N/R``
and the clean ``false alarms N/R`` with an example line (a miss or an alarm
first), and exits 1 below the requirement. Figures come from the simulator, not
a GPU.

    .venv/bin/python benchmarks/acceptance_integrity.py [--runs 20] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

RUN = (
    "--pyargs",
    "pytest_specdecode.suite",
    "-m",
    "throughput",
    "-q",
    "-p",
    "no:cacheprovider",
    "--dflash-config",
    "budget=8,window=1024",
    "--dflash-contexts",
    "60,4096",
    "--dflash-concurrency",
    "1,8",
    "--dflash-output-tokens",
    "512",
    "--dflash-sim-time-scale",
    "0",
    "--dflash-html",
    "none",
)
FAULTS = ("window-ignored", "batch-collapse")


def trial(fault: str | None, seed: int) -> tuple[int, list[str], str]:
    """One run: its exit status, its acceptance failure lines, its gate's summary line."""
    with tempfile.TemporaryDirectory(prefix="accept-") as tmp:
        report = Path(tmp) / "report.json"
        args = [*RUN, "--dflash-report", str(report), "--dflash-sim-args", f"--sim-seed {seed}"]
        if fault:
            args += ["--dflash-sim-fault", fault]
        done = subprocess.run(
            [sys.executable, "-m", "pytest", *args],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if not report.exists():
            print(done.stdout[-3000:], done.stderr[-2000:], sep="\n", file=sys.stderr)
            return done.returncode, [], "no report"
        gates = json.loads(report.read_text())["gates"]
    lines = [line for line in gates["failed"] if line.startswith("acceptance:")]
    shown = [s for s in gates["summary"] if s.startswith("acceptance gate")]
    if done.returncode and not lines:  # failed for another reason: say which, not the gate
        other = gates["failed"] or [
            line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))
        ]
        return done.returncode, lines, f"exit {done.returncode}: {'; '.join(other[:3])}"
    return done.returncode, lines, shown[0] if shown else "no acceptance verdict"


def verdict(caught: dict[str, int], false_alarms: int, runs: int) -> int:
    """0 when every fault was caught in every run and no clean run raised a line."""
    return 0 if runs > 0 and all(n == runs for n in caught.values()) and not false_alarms else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    args = parser.parse_args()
    started = time.monotonic()
    caught: dict[str, int] = {}
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for fault in (*FAULTS, None):
            name = fault or "clean"
            results = list(pool.map(trial, [fault] * args.runs, range(args.runs)))
            hits = sum(1 for status, lines, _ in results if status == 1 and lines)
            if fault is None:
                alarms = sum(1 for status, lines, _ in results if status != 0 or lines)
                print(f"clean: false alarms {alarms}/{args.runs}", flush=True)
                example = next((s for status, lines, s in results if status or lines), "")
                shown = example or results[0][2]
            else:
                caught[fault] = hits
                print(f"{name}: caught {hits}/{args.runs}", flush=True)
                missed = next((s for status, lines, s in results if not lines), "")
                shown = missed or results[0][2]
            print(f"  e.g. {shown}", flush=True)
    status = verdict(caught, alarms, args.runs)
    print(
        f"requirement: each fault caught {args.runs}/{args.runs}, false alarms 0/{args.runs}; "
        f"{time.monotonic() - started:.0f} s; simulated figures, not a GPU: "
        f"{'pass' if status == 0 else 'FAIL'}"
    )
    return status


if __name__ == "__main__":
    raise SystemExit(main())
