"""Identical demo runs give the same verdict sets (issue 35).

Runs the demo (``conftest_examples``, as ``make demo`` does, against the bundled
simulator) ``--runs`` times, each in a fresh copy of the project, and reads each
run's JSON report. Per load and domain the verdict's answer is a set (the top
config and every config whose 95% interval overlaps it); the script prints the
sets of every run and exits 1 unless (the requirement)

- every run gives the same set for every load and domain, and
- no config that no coding or lossless test checked is shown in the terminal's
  verdict table without "correctness not checked" beside its name.

The figures are simulated (the simulator's time scale as the demo sets it), never
a GPU result.

    .venv/bin/python benchmarks/verdict_stability.py [--runs 10]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_specdecode.report import tables
from pytest_specdecode.report.model import Report

DEMO = Path(__file__).resolve().parent.parent / "conftest_examples"
RUN_SECONDS = 540.0
"""One demo run's deadline (it takes about a minute on an idle machine)."""

Sets = dict[tuple[str, str], frozenset[str]]


def run_demo(where: Path) -> tuple[dict[str, Any], str]:
    """One demo run in a fresh copy of the project: its report and its terminal output."""
    project = where / "project"
    shutil.copytree(DEMO, project)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
    )
    report_path = project / ".dflash" / "report.json"
    if not report_path.is_file():
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise SystemExit(f"the demo wrote no report (exit {done.returncode}):\n{tail}")
    report: dict[str, Any] = json.loads(report_path.read_text(encoding="utf-8"))
    return report, done.stdout


def verdict_sets(report: dict[str, Any]) -> Sets:
    """Per (load, domain), the verdict's set of configs."""
    return {
        (str(g["load"]), str(g["domain"])): frozenset(g.get("best_set") or [])
        for g in (report.get("verdict") or {}).get("groups") or []
    }


def figures(report: dict[str, Any]) -> list[str]:
    """Per group, each ranked config's score and interval, the configs left out and why,
    and the cases the calibration marked client-limited: what a differing set came from."""
    short = tables.short_labels(Report.from_dict(report).configs)
    out = []
    for g in (report.get("verdict") or {}).get("groups") or []:
        shown = ", ".join(
            f"{'*' if m.get('best') else ''}{short.get(m['config'], m['config'])} "
            f"{m['score']:.2f} [{m['low'] or 0:.2f}, {m['high'] or 0:.2f}]"
            for m in g.get("members") or []
        )
        left = "; ".join(
            f"{short.get(u['config'], u['config'])} not ranked: {u['reason']}"
            for u in g.get("unranked") or []
        )
        out.append(f"{g['load']} {g['domain']}: {shown}" + (f" ({left})" if left else ""))
    ceilings = ", ".join(
        f"c{c['concurrency']} {c['tok_s']:.0f} tok/s"
        for c in (report.get("calibration") or {}).get("ceilings") or []
    )
    limited = [
        f"{case['case']} ({short.get(c['label'], c['label'])}): {case['client_limited']['why']}"
        for c in report.get("configs") or []
        for case in c.get("throughput") or []
        if case.get("client_limited")
    ]
    out.append(f"client ceiling {ceilings or 'none'}; client-limited: {len(limited)}")
    out += [f"  {line}" for line in limited]
    return out


def unchecked(report: dict[str, Any]) -> set[str]:
    """Configs of the run that no coding and no lossless test checked (read from the
    records, not from the verdict's own coverage)."""
    return {
        str(c["label"])
        for c in report.get("configs") or []
        if not c.get("coding") and not c.get("lossless")
    }


def unmarked(report: dict[str, Any], output: str) -> list[str]:
    """Verdict rows of the terminal summary naming an unchecked config without
    "correctness not checked" beside it."""
    short = tables.short_labels(Report.from_dict(report).configs)
    lines = output.splitlines()
    # The live progress line may precede it on the same line: found, not matched at the start.
    heading = re.compile(r"verdict( \(simulated\))?: per load and domain")
    start = next((i for i, line in enumerate(lines) if heading.search(line)), None)
    if start is None:
        return ["the terminal summary has no verdict table"]
    rows = lines[start + 3 :]
    rows = rows[: next((i for i, r in enumerate(rows) if not r.strip()), len(rows))]
    never = unchecked(report)
    found = []
    for group in (report.get("verdict") or {}).get("groups") or []:
        row = next(
            (r for r in rows if r.split()[:2] == [str(group["load"]), str(group["domain"])]),
            None,
        )
        for label in group.get("best_set") or []:
            name = short.get(label, label)
            if row is None:
                found.append(f"{group['load']} {group['domain']}: no row in the summary")
            elif label in never and f"{name} (correctness not checked)" not in row:
                found.append(f"{group['load']} {group['domain']}: {name} shown as checked")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="demo runs. Default: %(default)r")
    args = parser.parse_args(argv)
    seen: list[Sets] = []
    problems: list[str] = []
    for n in range(1, args.runs + 1):
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="verdict-stability-") as tmp:
            report, output = run_demo(Path(tmp))
        sets = verdict_sets(report)
        seen.append(sets)
        problems += [f"run {n}: {p}" for p in unmarked(report, output)]
        shown = "; ".join(
            f"{load} {domain}: {', '.join(sorted(s))}" for (load, domain), s in sorted(sets.items())
        )
        print(f"run {n} ({time.monotonic() - start:.0f} s): {shown}", flush=True)
        for line in figures(report):
            print(f"  {line}", flush=True)
    differing = sorted(
        {key for sets in seen for key in sets if len({s.get(key) for s in seen}) > 1}
    )
    for load, domain in differing:
        problems.append(f"{load} {domain}: the verdict sets differ between runs")
    print(
        f"{len(seen)} runs, {len(seen[0]) if seen else 0} groups each: "
        f"{len(differing)} group(s) with differing sets, "
        f"{len(problems) - len(differing)} unchecked config(s) shown without 'not checked'"
    )
    for line in problems:
        print(f"FAIL: {line}")
    return 1 if problems or not seen or not seen[0] else 0


if __name__ == "__main__":
    sys.exit(main())
