"""``--dflash-search`` end to end against the fast simulator: a small search, its dry run
and a resumed search. Cheap: time scale 0, one case, tiny outputs."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# Loaded here, before pytester's in-process runs: numpy (under optuna) cannot be imported
# again once a run's modules are dropped.
import pytest_specdecode.search.optimizer  # noqa: F401

TESTS = """
import pytest

@pytest.mark.throughput(contexts=[60], concurrency=[1], output_tokens=32)
def test_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
"""
SPACE = "--dflash-search=budget=2,4,8;window=512,1024"


def starts(basetemp: Path) -> list[str]:
    """(block size, window) of every server start of one run."""
    found = []
    for log in sorted((basetemp / "dflash-logs").glob("server-*.log")):
        match = re.search(r"block_size=(\d+), draft_window_size=(\d+)", log.read_text())
        found.append(f"{match[1]}/{match[2]}" if match else "?")
    return found


def run(pytester: pytest.Pytester, name: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "no:randomly", SPACE, "--dflash-search-seed=4",
        "--dflash-rounds=1", f"--basetemp={pytester.path / name}", "-rs", *args,
    )  # fmt: skip


def report(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / "report.json").read_text())
    return data


@pytest.fixture
def project(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> pytest.Pytester:
    sim_project(pytester, "--sim-load-seconds 0.1 --sim-warmup-seconds 0.1")
    pytester.makepyfile(test_search=TESTS)
    return pytester


def test_a_search_starts_only_the_configs_it_visits_and_skips_the_others(
    project: pytest.Pytester,
) -> None:
    # Budget 2 accepts at most 2 tokens per step (one draft and the bonus): infeasible.
    result = run(project, "run", "--dflash-search-restarts=3", "--dflash-min-accept-length=2.01")
    result.assert_outcomes(passed=3, skipped=3)
    result.stdout.fnmatch_lines(
        ["*SKIPPED [[]*[]] *: not visited by the search (best so far: DFLASH budget=* window=* *, "
         "predicted *)"]
    )  # fmt: skip
    result.stdout.fnmatch_lines(
        ["search (tok_s): 3 of 6 configs started (budget 3), 3 restarts saved against the "
         "grid; stopped: restart budget spent (3 configs started)"]
    )  # fmt: skip
    data = report(project)["search"]
    visited = data["visited"]
    assert len(starts(project.path / "run")) == 3 == len(visited)
    assert [(v["label"], v["restart"]) for v in visited] == [
        (v["label"], n) for n, v in enumerate(visited, 1)
    ]
    for visit in visited:
        assert visit["objective"] > 0
        assert visit["feasible"] == ("budget=2 " not in visit["label"]), visit
    best = data["best"]
    assert best["feasible"]
    assert best["objective"] == max(v["objective"] for v in visited if v["feasible"])
    assert data["stopped"] == "restart budget spent (3 configs started)"
    assert data["space_size"] == 6
    assert data["restarts_saved"] == 3
    # The same ids as a sweep: every config's test, the unvisited ones skipped.
    tests = {t["nodeid"]: t["outcome"] for t in report(project)["tests"]}
    assert "test_search.py::test_throughput[DFLASH-b8-w1024-ctx60-c1-t32-chat]" in tests
    assert sorted(tests.values()) == ["passed"] * 3 + ["skipped"] * 3


def test_a_search_without_optuna_is_one_line_naming_the_extra(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Optuna is an extra: without it (None in sys.modules: `import optuna` fails and
    # find_spec finds nothing) the run stops at once with the extra to install.
    monkeypatch.setitem(sys.modules, "optuna", None)
    result = run(project, "no-optuna", "--dflash-search-restarts=3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.errlines == [
        "ERROR: --dflash-search needs Optuna, which is not installed: "
        "pip install 'pytest-specdecode[search]'",
        "",
    ]
    assert starts(project.path / "no-optuna") == []


@pytest.mark.slow
def test_a_dry_run_prints_the_space_the_budget_and_the_first_configs(
    project: pytest.Pytester,
) -> None:
    result = run(project, "dry", "--dflash-dry-run", "--dflash-search-restarts=4")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["*dflash search (dry run)*",
         "dflash search: 6 configs in the space, restart budget 4 (metric tok_s, seed 4, *)",
         "dflash search: start 1: DFLASH budget=4 window=1024",
         "dflash search: start 2: DFLASH budget=*",
         "dflash search: then each next config is chosen from the results so far"]
    )  # fmt: skip
    assert starts(project.path / "dry") == []
    first = [line for line in result.outlines if line.startswith("dflash search: start ")]
    # The run starts the configs the dry run named, in that order.
    run(project, "real", "--dflash-search-restarts=4")
    labels = [v["label"] for v in report(project)["search"]["visited"]]
    assert [line.split(": ", 2)[2] for line in first] == labels[: len(first)]


def test_a_resumed_search_carries_the_visited_configs_and_starts_new_ones(
    project: pytest.Pytester,
) -> None:
    first = run(project, "first", "--dflash-search-restarts=2")
    first.assert_outcomes(passed=2, skipped=4)
    before = [v["label"] for v in report(project)["search"]["visited"]]
    again = run(project, "again", "--dflash-search-restarts=4", "--dflash-resume")
    again.assert_outcomes(passed=2, skipped=2, deselected=2)
    assert len(starts(project.path / "again")) == 2, "only new configs started"
    data = report(project)["search"]
    carried = [v["label"] for v in data["visited"] if v.get("carried")]
    fresh = [v["label"] for v in data["visited"] if not v.get("carried")]
    assert sorted(carried) == sorted(before)
    assert len(fresh) == 2
    assert not set(fresh) & set(before), "a finished config ran again"
    assert data["stopped"] == "restart budget spent (4 configs started)"


def test_with_n_2_and_one_host_a_search_runs_in_the_controller(project: pytest.Pytester) -> None:
    # One server for both workers: a throughput figure would share it, so no workers start.
    result = run(project, "n2", "-n", "2", "--dflash-search-restarts=2")
    result.stdout.fnmatch_lines(
        ["dflash: --dflash-search runs in this process, one config at a time (-n 2 starts no "
         "workers: it needs two --dflash-hosts or more*"]
    )  # fmt: skip
    result.assert_outcomes(passed=2, skipped=4)
    assert len(starts(project.path / "n2")) == 2
    assert all(v["feasible"] for v in report(project)["search"]["visited"])


TWO_CASES = """
import pytest

@pytest.mark.throughput(contexts=[60, 120], concurrency=[1], output_tokens=96)
def test_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
"""


@pytest.fixture
def timed_project(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> pytest.Pytester:
    """Two cases a config, modelled step times (budget 2 is clearly slower than budget 8),
    a start of at least 0.6 s."""
    sim_project(pytester, "--sim-time-scale 1 --sim-load-seconds 0.6 --sim-warmup-seconds 0.1")
    pytester.makepyfile(test_search=TWO_CASES)
    return pytester


def test_a_time_budget_charges_each_config_its_start_and_its_measurement(
    timed_project: pytest.Pytester,
) -> None:
    # Each start takes >= 0.6 s: after the first config, one more would overrun 1 s.
    result = run(timed_project, "timed", "--dflash-search-budget=1s")
    result.assert_outcomes(passed=2, skipped=10)
    data = report(timed_project)
    search = data["search"]
    (visit,) = search["visited"]
    assert len(starts(timed_project.path / "timed")) == 1
    assert search["budget_seconds"] == 1.0
    assert search["stopped"].startswith("time budget spent (")
    config = next(c for c in data["configs"] if c["label"] == visit["label"])
    calls = [t["duration"] for t in data["tests"] if t["config_key"] == config["key"]]
    assert config["service"]["ready_seconds"] >= 0.6
    spent = config["service"]["ready_seconds"] + sum(calls)
    assert visit["seconds"] == pytest.approx(spent, abs=2e-3)
    assert search["spent_seconds"] == pytest.approx(visit["seconds"], abs=2e-3)
    result.stdout.fnmatch_lines(["search (tok_s): 1 of 6 configs started (time budget 1 s, *"])


@pytest.mark.slow
def test_a_config_clearly_worse_after_its_first_case_skips_the_rest(
    timed_project: pytest.Pytester,
) -> None:
    # The initial design starts budget 8 (the centre) first; budget 2 accepts at most two
    # tokens a step: after its first case it is in the worse half, its second is skipped.
    result = run(timed_project, "pruned", "--dflash-search=budget=2,8", "--dflash-search-budget=1h")
    result.assert_outcomes(passed=3, skipped=1)
    result.stdout.fnmatch_lines(
        ["*SKIPPED [[]1[]] *: stopped by the search after 1 throughput case(s): clearly worse "
         "than the configs measured that far (successive halving)"]
    )  # fmt: skip
    search = report(timed_project)["search"]
    assert [(v["label"], v.get("pruned", False)) for v in search["visited"]] == [
        ("DFLASH budget=8", False),
        ("DFLASH budget=2", True),
    ]
    assert search["best"]["label"] == "DFLASH budget=8"
    assert search["stopped"] == "every config of the space visited"
