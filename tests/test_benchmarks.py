"""Benchmarks that state a requirement exit non-zero when they miss it."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(ROOT.glob("*.py")) if ROOT.is_dir() else []


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # A dataclass of the script looks its module up by name while it is built.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_script_with_a_requirement_exits_with_mains_status(script: Path) -> None:
    source = script.read_text(encoding="utf-8")
    assert "requirement" in source, f"{script.name} states no requirement"
    tree = ast.parse(source)
    (main,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
    assert main.returns is not None, f"{script.name}: main() must return the exit status"
    assert ast.unparse(main.returns) == "int", f"{script.name}: main() must return an int"
    assert "raise SystemExit(main())" in source or "sys.exit(main())" in source


@pytest.mark.parametrize(
    ("serial", "parallel", "status"), [(80.0, 25.0, 0), (80.0, 28.0, 0), (80.0, 40.0, 1)]
)
def test_xdist_scaling_fails_above_the_ratio(serial: float, parallel: float, status: int) -> None:
    assert load("xdist_scaling").verdict(serial, parallel, 0.35) == status


def test_sim_throughput_fails_below_its_minimum(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load("sim_throughput")
    assert bench.verdict(19_999.0, bench.REQUIREMENT_TOK_S) == 1
    assert bench.verdict(20_000.0, bench.REQUIREMENT_TOK_S) == 0
    # A real short run against a requirement no machine meets.
    status = bench.main(["--seconds", "0.3", "--concurrency", "2", "--min-tok-s", "1e12"])
    assert status == 1
    out = capsys.readouterr().out
    assert "requirement >= 1,000,000,000,000" in out
    assert out.rstrip().endswith("FAIL")


@pytest.mark.parametrize(
    ("same", "slower", "status"),
    [([0] * 5, [1] * 5, 0), ([0, 0, 1, 0, 0], [1] * 5, 1), ([0] * 5, [1, 1, 0, 1, 1], 1)],
)
def test_compare_gate_needs_every_trial(same: list[int], slower: list[int], status: int) -> None:
    assert load("compare_gate").verdict(same, slower) == status


@pytest.mark.parametrize(
    ("same", "slower", "status"),
    [([0] * 5, 1, 0), ([0, 0, 1, 0, 0], 1, 1), ([0] * 5, 0, 1), ([], 1, 1)],
)
def test_restart_noise_gate_needs_every_compare(same: list[int], slower: int, status: int) -> None:
    assert load("restart_noise_gate").verdict(same, slower) == status


def test_html_scale_fails_a_slow_page_or_superlinear_growth() -> None:
    bench = load("html_scale")
    linear = {400: (0.4, 1.2), 3000: (3.0, 9.0)}
    assert bench.verdict_of(linear, 10.0, 2.0) == (0, [])
    slow_status, slow = bench.verdict_of({400: (0.4, 1.5), 3000: (3.0, 10.5)}, 10.0, 2.0)
    assert slow_status == 1
    assert slow == ["the page for 3,000 configs took 10.50 s (requirement < 10 s)"]
    # Quadratic: 7.5x the seconds per config at 3,000 against 400, though under 10 s.
    grown_status, grown = bench.verdict_of({400: (0.1, 0.1), 3000: (0.75, 5.6)}, 10.0, 2.0)
    assert grown_status == 1
    assert grown == [
        "page: seconds per config grew 7.47x from 400 to 3,000 configs (requirement <= 2x: linear)"
    ]


@pytest.mark.parametrize(
    ("caught", "alarms", "status"),
    [
        ({"window-ignored": 20, "batch-collapse": 20}, 0, 0),
        ({"window-ignored": 20, "batch-collapse": 19}, 0, 1),
        ({"window-ignored": 20, "batch-collapse": 20}, 1, 1),
    ],
)
def test_acceptance_integrity_needs_every_catch_and_no_alarm(
    caught: dict[str, int], alarms: int, status: int
) -> None:
    assert load("acceptance_integrity").verdict(caught, alarms, 20) == status


def test_verdict_stability_sees_an_unmarked_unchecked_config() -> None:
    bench = load("verdict_stability")
    report = {
        "configs": [
            {"label": "B16", "config": {}, "throughput": [{"case": "c1"}], "coding": []},
            {
                "label": "B8",
                "config": {},
                "throughput": [{"case": "c1"}],
                "coding": [{"problem": "gcd", "passed": True}],
            },
        ],
        "verdict": {"groups": [{"load": "c1", "domain": "chat", "best_set": ["B16", "B8"]}]},
    }
    head = "[dflash 4/4] verdict (simulated): per load and domain, the best speedup"
    table = [head, "load  domain  best config", "----  ------  -----------"]
    marked = "c1    chat    tie within noise: B16 (correctness not checked), B8"
    assert bench.unmarked(report, "\n".join([*table, marked, ""])) == []
    bare = "c1    chat    tie within noise: B16, B8"
    assert bench.unmarked(report, "\n".join([*table, bare, ""])) == [
        "c1 chat: B16 shown as checked"
    ]
    assert bench.verdict_sets(report) == {("c1", "chat"): frozenset({"B16", "B8"})}


@pytest.mark.parametrize(
    ("detected", "false", "seeds", "status"),
    [(16, 1, 20, 0), (15, 0, 20, 1), (20, 2, 20, 1), (4, 0, 5, 0), (3, 0, 5, 1)],
)
def test_coding_gate_power_needs_80_percent_and_one_false_in_20(
    detected: int, false: int, seeds: int, status: int
) -> None:
    assert load("coding_gate_power").verdict(detected, false, seeds) == status


def test_coding_gate_power_reads_the_paired_gate_from_the_report() -> None:
    bench = load("coding_gate_power")
    line = (
        "paired coding: DFLASH sim-quality=0.75 against NONE sim-quality=0.8 on 164 problems: "
        "12 lost, 0 won (exact sign test p = 0.000244 < 0.05): the config changes answers"
    )
    found = bench.gate_outcome({"gates": {"failed": [line], "summary": []}}, 1)
    assert (found.failed, found.lost, found.won, found.p) == (True, 12, 0, 0.000244)
    passed = bench.gate_outcome({"gates": {"failed": [], "summary": []}}, 0)
    assert (passed.failed, passed.lost, passed.p) == (False, 0, 1.0)


def test_coding_busy_fails_on_any_failed_test() -> None:
    bench = load("coding_busy")
    report: dict[str, Any] = {
        "tests": [
            {
                "nodeid": "suite/test_coding.py::test_coding[gcd]",
                "when": "call",
                "outcome": "passed",
            },
            {
                "nodeid": "suite/test_coding.py::test_coding[fib]",
                "when": "call",
                "outcome": "failed",
            },
        ],
        "configs": [{"coding": [{"rechecked": 1}, {"rechecked": 0}]}],
    }
    run = bench.tally(report, 1, 2.0)
    assert (run.passed, run.failed, run.rechecked) == (1, 1, 1)
    assert bench.verdict([run]) == 1
    clean = bench.tally({**report, "tests": report["tests"][:1]}, 0, 2.0)
    assert bench.verdict([clean, clean]) == 0
    assert bench.verdict([]) == 1


def test_search_budget_fails_a_far_pick_or_an_overrun(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load("search_budget")
    assert bench.good(97.0, 100.0, 200.0, 200.0)
    assert not bench.good(96.9, 100.0, 200.0, 200.0)  # more than 3% below the best
    assert not bench.good(100.0, 100.0, 200.1, 200.0)  # over a fifth of the grid's seconds
    assert not bench.good(None, 100.0, 10.0, 200.0)  # nothing feasible picked
    assert bench.main(["--seeds", "1"]) == 0  # simulated seconds: well under a second
    out = capsys.readouterr().out
    assert "grid: 48 configs" in out
    assert out.rstrip().endswith("met")
