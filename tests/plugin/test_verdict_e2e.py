"""Issue 35's list, replayed as commands: each run's exit status and its one-line reason.

The bullets the other modules already replay: pytest-benchmark's own
``--benchmark-compare-fail`` (test_throughput_e2e.py), ``--dflash-host HOST:PORT``
without SSH (test_options.py); a measuring marker whose every test skipped, for any
reason (test_nothing_ran.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode.report import tables
from pytest_specdecode.report.model import Report
from pytest_specdecode.service.base import LINE_CHARS

from .conftest import THROUGHPUT

SMALL = ("--dflash-contexts=60", "--dflash-concurrency=1", "--dflash-output-tokens=64")

# The default config (budget 8, window 2048) is the only one a correctness test checks
# (the ini's dflash_config: --dflash-config would replace the markers' configs too);
# a throughput twin differs in its window alone, which at a 60-token context changes
# nothing the simulator models: the two are one config as far as speed goes.
CHECKED_AND_TWIN = """
import pytest

@pytest.mark.dflash(algorithm="NONE")
def test_baseline(dflash_lossless):
    dflash_lossless.check()

def test_lossless(dflash_lossless):
    dflash_lossless.check()

@pytest.mark.throughput
@pytest.mark.dflash(algorithm="NONE")
def test_none(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)

@pytest.mark.throughput
@pytest.mark.dflash(budget=8, window=[2048, 4096])
def test_b8(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
"""


def verdict_cells(lines: list[str]) -> dict[tuple[str, str], str]:
    """The terminal verdict table's "best config" cell per (load, domain)."""
    start = next(i for i, line in enumerate(lines) if "verdict (simulated): per load" in line)
    header = lines[start + 1]
    left, right = header.index("best config"), header.index("speedup")
    rows = lines[start + 3 :]
    rows = rows[: next((i for i, r in enumerate(rows) if not r.strip()), len(rows))]
    return {tuple(r.split()[:2]): r[left:right].strip() for r in rows}  # type: ignore[misc]


def report_of(pytester: pytest.Pytester) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((pytester.path / "report.json").read_text())
    return found


@pytest.fixture
def timed_project(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> pytest.Pytester:
    """The simulator at a time scale whose steps this machine keeps up with: the
    speedups are the model's (its acceptance draws are seeded), not the machine's."""
    sim_project(pytester, "--sim-time-scale 0.3")
    ini = pytester.path / "tox.ini"
    ini.write_text(ini.read_text().rstrip("\n") + "\ndflash_config = budget=8,window=2048\n")
    return pytester


def test_the_shipped_suites_throughput_under_xdist_measures_nothing_and_fails(
    sim_ini: pytest.Pytester,
) -> None:
    # Bullet 1, as the issue ran it: -n 2 and no extra hosts, pytest-benchmark switches
    # itself off and every throughput case skips: no green run with nothing measured.
    result = sim_ini.runpytest(
        "-p", "no:cacheprovider", "--pyargs", "pytest_specdecode.suite", "-m", "throughput",
        "-n", "2",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped", 0) > 0
    assert not outcomes.get("passed")
    result.stdout.fnmatch_lines(
        [
            "  throughput gate CANNOT JUDGE: * throughput test(s) selected, none ran: all "
            "skipped: pytest-benchmark is disabled (it switches itself off under pytest-xdist*"
        ]
    )


@pytest.mark.slow
def test_twin_configs_are_a_tie_named_in_full_and_the_unchecked_one_says_so(
    timed_project: pytest.Pytester,
) -> None:
    # Bullets 2 and 3: two configs equal within noise are both the answer (no one name
    # in front), and the one no correctness test checked is never shown as checked.
    timed_project.makepyfile(test_twin=CHECKED_AND_TWIN)
    result = timed_project.runpytest("-p", "no:cacheprovider", *SMALL, "--dflash-rounds=3")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    report = report_of(timed_project)
    short = tables.short_labels(Report.from_dict(report).configs)
    checked, twin = "DFLASH budget=8 window=2048", "DFLASH budget=8 window=4096"
    (group,) = report["verdict"]["groups"]
    assert sorted(group["best_set"]) == [checked, twin], json.dumps(group["members"])
    assert group["margin"] == "tie within noise"
    cell = verdict_cells(result.stdout.lines)[("c1", "chat")]
    assert cell.startswith("tie within noise: ")
    names = cell.removeprefix("tie within noise: ").split(", ")
    assert sorted(names) == sorted([short[checked], f"{short[twin]} (correctness not checked)"]), (
        cell
    )


def test_one_config_clearly_better_is_clear(timed_project: pytest.Pytester) -> None:
    timed_project.makepyfile(test_tp=THROUGHPUT)
    result = timed_project.runpytest(
        "-p", "no:cacheprovider", *SMALL, "--dflash-rounds=3",
        "--dflash-sweep=algorithm=NONE,DFLASH;budget=8",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    report = report_of(timed_project)
    (group,) = report["verdict"]["groups"]
    mine = next(c["label"] for c in report["configs"] if c["config"]["algorithm"] == "DFLASH")
    assert group["best_set"] == [mine]
    assert group["margin"] == "clear"
    short = tables.short_labels(Report.from_dict(report).configs)[mine]
    cell = verdict_cells(result.stdout.lines)[("c1", "chat")]
    assert cell == f"clear: {short} (correctness not checked)"


def saved_as(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite every case of a saved pytest-benchmark run with ``change``."""
    data = json.loads(path.read_text())
    for bench in data["benchmarks"]:
        change(bench["extra_info"])
    path.write_text(json.dumps(data))


def faster(info: dict[str, Any], factor: float) -> None:
    intervals = info["intervals"]
    intervals["tok_s"]["values"] = [v * factor for v in intervals["tok_s"]["values"]]
    intervals["tpot_ms"]["values"] = [v / factor for v in intervals["tpot_ms"]["values"]]
    info["tok_s"] *= factor


def zero_tpot_and_slower(info: dict[str, Any]) -> None:
    # What a loaded client once recorded: TPOT 0.00, yet 0.54x the baseline's tok/s.
    faster(info, 0.54)
    info["intervals"]["tpot_ms"]["values"] = [0.0] * len(info["intervals"]["tpot_ms"]["values"])
    info["tpot_ms_p50"] = 0.0


@pytest.mark.slow
@pytest.mark.parametrize("saved", ["ten times faster", "TPOT 0 and 0.54x tok/s"])
def test_a_compared_runs_config_is_ranked_beside_this_runs_on_consistent_figures_only(
    timed_project: pytest.Pytester, saved: str
) -> None:
    # Bullet 4: after --benchmark-compare the saved config takes part in the verdict.
    # Bullet 5: figures that contradict each other (TPOT 0, a tok/s ratio below 1) rank
    # nothing: that config is "not ranked", and the verdict follows the consistent ones.
    timed_project.makepyfile(test_tp=THROUGHPUT)
    args = ("-p", "no:cacheprovider", *SMALL, "--dflash-rounds=3")
    timed_project.runpytest(
        *args, "--dflash-config=budget=16,window=2048", "--benchmark-save=b16"
    ).assert_outcomes(passed=1)
    (path,) = (timed_project.path / ".benchmarks").glob("*/0001_b16.json")
    saved_as(
        path, (lambda i: faster(i, 10)) if saved == "ten times faster" else zero_tpot_and_slower
    )
    result = timed_project.runpytest(
        *args, "--dflash-sweep=algorithm=NONE,DFLASH;budget=8", "--benchmark-compare"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    report = report_of(timed_project)
    (group,) = report["verdict"]["groups"]
    mine = next(c["label"] for c in report["configs"] if c["config"]["algorithm"] == "DFLASH")
    label = "DFLASH budget=16 window=2048 (saved run 0001_b16)"
    cell = verdict_cells(result.stdout.lines)[("c1", "chat")]
    if saved == "ten times faster":
        assert group["best_set"] == [label]
        assert cell.startswith("clear: ")
        assert "(saved run 0001_b16)" in cell
        return
    assert label not in group["best_set"]
    assert group["best_set"] == [mine]
    (left_out,) = group["unranked"]
    assert (left_out["config"], left_out["reason"]) == (label, "inconsistent figures")
    assert "TPOT is 0" in left_out["detail"]
    result.stdout.fnmatch_lines(
        ["c1*chat*(saved run 0001_b16): inconsistent figures (*TPOT is 0)*"]
    )


def test_the_client_overhead_warning_is_one_line_for_the_run(
    throughput_project: pytest.Pytester,
) -> None:
    # Bullet 9: at this time scale every case's client overhead is above the share; the
    # run says so once, naming the cases, never once per case.
    throughput_project.makepyfile(test_tp=THROUGHPUT)
    result = throughput_project.runpytest(
        "-p", "no:cacheprovider", "--dflash-contexts=60", "--dflash-concurrency=1,2,4",
        "--dflash-output-tokens=16", "--dflash-rounds=1", "--dflash-domains=code,chat",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    warned = [line for line in result.stdout.lines if "client overhead" in line]
    assert len(warned) == 1, warned
    assert warned[0].startswith("WARNING: in ")
    assert " of 6 cases the client overhead p99 exceeds" in warned[0]


def test_a_dead_servers_log_tail_cuts_its_long_lines(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> None:
    # Bullet 9: the simulator logs its ServerArgs on one line of ~16 kB, as SGLang does.
    sim_project(pytester, "--sim-fault crash-on-start")
    pytester.makepyfile("def test_x(dflash_service):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(errors=1)
    output = result.stdout.lines + result.stderr.lines
    (args_line, *_) = [line for line in output if "server_args=ServerArgs(" in line]
    assert args_line.endswith(" more characters)")
    assert len(args_line) <= LINE_CHARS + 80
    assert max(len(line) for line in output if "server_args" in line) <= LINE_CHARS + 80
