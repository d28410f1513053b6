"""The paired-coding gate's power and false-failure rate on the 164 HumanEval problems.

For each seed, two runs of the HumanEval suite against the simulator, each
with two configs launched with the same ``--sim-seed`` (so their answers are
nested: every problem right at 0.75 is right at 0.80):

1. NONE at ``--sim-quality 0.80`` against DFLASH at 0.75: *detected* when the
   run's paired-coding gate fails for DFLASH;
2. NONE at 0.80 against DFLASH at 0.80: a *false failure* when it fails.

Each config gets its quality as an extra flag of its marker
(``sim_quality=0.75`` becomes ``--sim-quality 0.75`` on its launch line), the
verdict is read from the gates of the run's JSON report. Requirement (issue
34): detected in at least 16 of 20 seeds, at most 1 false failure in 20. The
script prints each seed's lost/won and p-value and the totals, and exits 1
below the requirement. The figures come from the simulator, not a GPU.

    .venv/bin/python benchmarks/coding_gate_power.py [--seeds 20] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

TEST = """
import pytest


@pytest.mark.coding
@pytest.mark.dflash(algorithm="NONE", sim_quality={base})
def test_none(dflash_problem, dflash_coding):
    dflash_coding.check(dflash_problem)


@pytest.mark.coding
@pytest.mark.dflash(algorithm="DFLASH", sim_quality={other})
def test_dflash(dflash_problem, dflash_coding):
    dflash_coding.check(dflash_problem)
"""
BASE, WORSE = 0.80, 0.75
MIN_DETECTED, MAX_FALSE = 16, 1  # of 20 seeds (scaled to --seeds)
PAIRED = re.compile(r"(\d+) lost, (\d+) won \(exact sign test p = ([\d.e+-]+)")


@dataclass(frozen=True)
class Outcome:
    """One run's paired-coding gate for DFLASH: failed or not, and its figures."""

    failed: bool
    lost: int
    won: int
    p: float
    exit_status: int

    def show(self) -> str:
        verdict = "FAILED" if self.failed else "passed"
        return f"{self.lost} lost {self.won} won p={self.p:.3g} gate {verdict}"


def gate_outcome(report: dict[str, object], exit_status: int) -> Outcome:
    """The paired-coding gate's line in a JSON report's gates (failed or passed)."""
    gates = report.get("gates")
    if not isinstance(gates, dict):
        raise SystemExit("the JSON report has no gates")
    failed_lines = [str(g) for g in gates.get("failed") or []]
    lines = [*failed_lines, *(str(g) for g in gates.get("summary") or [])]
    paired = [line for line in lines if "paired coding" in line or "paired-coding" in line]
    found = next((m for line in paired if (m := PAIRED.search(line))), None)
    failed = any(line.startswith("paired coding") for line in failed_lines)
    if found is None:
        # A passing gate with no disagreement: the sign test's p is 1.
        return Outcome(failed, 0, 0, 1.0, exit_status)
    lost, won, p = found.groups()
    return Outcome(failed, int(lost), int(won), float(p), exit_status)


def run(project: Path, seed: int, other: float, workers: int | None) -> Outcome:
    (project / "test_pair.py").write_text(TEST.format(base=BASE, other=other))
    report = project / "report.json"
    report.unlink(missing_ok=True)
    sim = f"--sim-seed {seed} --sim-load-seconds 0 --sim-warmup-seconds 0"
    argv = [
        sys.executable, "-m", "pytest", "-q", "--tb=no", "-rN", "-p", "no:cacheprovider",
        "-p", "no:randomly", "--dflash-dataset", "humaneval", "--dflash-sim-args", sim,
        "--dflash-sim-time-scale", "0", "--dflash-max-tokens", "768",
        "--dflash-report", str(report), "--dflash-html", "none",
    ]  # fmt: skip
    if workers is not None:
        argv += ["--dflash-check-workers", str(workers)]
    done = subprocess.run(
        argv, cwd=project, capture_output=True, text=True, timeout=580, check=False
    )
    if done.returncode not in (0, 1) or not report.exists():
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n", file=sys.stderr)
        raise SystemExit(f"seed {seed}: pytest exited {done.returncode} without a report")
    return gate_outcome(json.loads(report.read_text()), done.returncode)


def verdict(detected: int, false: int, seeds: int) -> int:
    """0 when detected >= 80% of the seeds and false failures <= 1 in 20."""
    return 0 if detected * 20 >= MIN_DETECTED * seeds and false * 20 <= MAX_FALSE * seeds else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="Default: 20")
    parser.add_argument("--first-seed", type=int, default=1, help="Default: 1")
    parser.add_argument("--check-workers", type=int, default=None, help="Default: all cores")
    parser.add_argument("--jobs", type=int, default=1, help="seeds run at once. Default: 1")
    args = parser.parse_args(argv)
    started = time.monotonic()
    seeds = range(args.first_seed, args.first_seed + args.seeds)

    def both(seed: int) -> tuple[int, Outcome, Outcome]:
        with tempfile.TemporaryDirectory(prefix=f"coding-gate-power-{seed}-") as tmp:
            worse = run(Path(tmp), seed, WORSE, args.check_workers)
            same = run(Path(tmp), seed, BASE, args.check_workers)
        print(
            f"seed {seed}: {BASE:.2f} vs {WORSE:.2f}: {worse.show()}; "
            f"{BASE:.2f} vs {BASE:.2f}: {same.show()} [{time.monotonic() - started:.0f} s]",
            flush=True,
        )
        return seed, worse, same

    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(both, seeds))
    detected = sum(worse.failed for _, worse, _ in results)
    false = sum(same.failed for _, _, same in results)
    status = verdict(detected, false, args.seeds)
    print(
        f"detected {detected}/{args.seeds} (requirement >= {MIN_DETECTED}/20), false failures "
        f"{false}/{args.seeds} (requirement <= {MAX_FALSE}/20); 164 HumanEval problems; "
        f"{time.monotonic() - started:.0f} s; simulated figures, not a GPU: "
        f"{'pass' if status == 0 else 'FAIL'}"
    )
    return status


if __name__ == "__main__":
    raise SystemExit(main())
