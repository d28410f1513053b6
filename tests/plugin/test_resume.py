"""``--dflash-resume`` end to end against the simulator: an interrupted sweep continued.

The first run stops (Ctrl-C, raised by a test) in the middle of the second
config; the resumed run restarts the server only for what is missing and
ends with a report that has every config's results, the carried ones marked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode.config.settings import resolve
from pytest_specdecode.report.json_report import result_settings

TESTS = """
import os

import pytest

@pytest.mark.throughput(contexts=[60], concurrency=[1], output_tokens=8)
def test_a_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)

def test_b_last(dflash_service, dflash_config):
    if dflash_config.budget == 8 and os.path.exists("interrupt"):
        raise KeyboardInterrupt  # as if the job was cancelled here
"""


def starts(basetemp: Path) -> list[str]:
    """The config (block size) of every server start of one run."""
    found = []
    for log in sorted((basetemp / "dflash-logs").glob("server-*.log")):
        match = re.search(r"draft runner\..*?block_size=(\d+)", log.read_text())
        found.append(match[1] if match else "?")
    return found


def run(pytester: pytest.Pytester, name: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "-p", "no:cacheprovider", "--dflash-sweep=budget=4,8", "--dflash-rounds=1",
        f"--basetemp={pytester.path / name}", *args,
        no_reraise_ctrlc=True,  # the first run's Ctrl-C is the run's, not ours
    )  # fmt: skip


def report(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / "report.json").read_text())
    return data


def test_an_interrupted_sweep_resumes_where_it_stopped(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> None:
    sim_project(pytester, "--sim-load-seconds 0.1 --sim-warmup-seconds 0.1")
    pytester.makepyfile(test_sweep=TESTS)
    (pytester.path / "interrupt").touch()
    first = run(pytester, "first")
    assert first.ret == pytest.ExitCode.INTERRUPTED
    assert starts(pytester.path / "first") == ["4", "8"]
    before = {c["config"]["budget"]: c for c in report(pytester)["configs"]}
    assert [t["case"] for t in before[8]["throughput"]] == ["ctx60-c1-t8-chat"]

    (pytester.path / "interrupt").unlink()
    again = run(pytester, "again", "--dflash-resume")
    assert again.ret == pytest.ExitCode.OK
    # pytest's own counts: the carried tests are deselected, the missing one ran.
    again.assert_outcomes(passed=1, deselected=3)
    again.stdout.fnmatch_lines(
        ["dflash: resume: 3 tests carried from '*report.json' (run of *); 1 config complete "
         "there, not restarted; 1 test to run"]
    )  # fmt: skip
    again.stdout.fnmatch_lines(
        ["dflash sweep: 2/2 configs done (1 carried from the resumed report), *s elapsed",
         "dflash resumed from *report.json (run of *): 3 tests carried (not run again), 1 "
         "config whole (DFLASH budget=4)"]
    )  # fmt: skip
    assert starts(pytester.path / "again") == ["8"], "only the unfinished config restarted"
    data = report(pytester)
    after = {c["config"]["budget"]: c for c in data["configs"]}
    # The complete config is carried whole, server facts and all.
    carried = after[4].pop("carried")
    assert carried["whole"] is True
    assert carried["started"] == data["resumed_from"]["started"]
    assert after[4] == {k: v for k, v in before[4].items() if k != "carried"}
    # The partly done one keeps its measured case and gets this run's server.
    assert after[8]["throughput"] == before[8]["throughput"]
    assert after[8]["carried"]["tests"] == [
        "test_sweep.py::test_a_throughput[DFLASH-b8-ctx60-c1-t8-chat]"
    ]
    assert after[8]["service"]["identity"] != before[8]["service"]["identity"]
    outcomes = {(t["nodeid"], t.get("carried", False)) for t in data["tests"]}
    assert ("test_sweep.py::test_b_last[DFLASH-b8]", False) in outcomes
    assert len(data["tests"]) == 4
    # The problems are recorded (by name and definition) and the resume found them equal.
    assert "gcd" in [p["name"] for p in data["settings"]["problem_set"]]

    # Resumed once more, nothing is left: no start, and not "no tests ran" (exit 5).
    done = run(pytester, "done", "--dflash-resume")
    assert done.ret == pytest.ExitCode.OK
    done.assert_outcomes(deselected=4)
    done.stdout.fnmatch_lines(
        ["dflash sweep: 2/2 configs done (2 carried from the resumed report)*"]
    )
    assert starts(pytester.path / "done") == []
    assert [c["label"] for c in report(pytester)["configs"]] == [
        c["label"] for c in data["configs"]
    ]


def test_resuming_with_other_settings_is_refused_in_one_line(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> None:
    sim_project(pytester, "")
    pytester.makepyfile(test_sweep="def test_x(): pass")
    made_with = result_settings(resolve(pytester.parseconfig(), environ={}))
    old = {"format": 2, "settings": made_with, "configs": [], "tests": []}
    (pytester.path / "old.json").write_text(json.dumps(old))
    result = pytester.runpytest(
        "--dflash-resume=old.json", "--dflash-contexts=60", "--dflash-dialect=ddtree"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --dflash-resume: 'old.json' was made with other settings that change results: "
         "dialect 'sglang' -> 'ddtree'; cases: contexts [[]60, 1024, 4096] -> [[]60]; resume "
         "with that run's settings, or start the sweep again without --dflash-resume"]
    )  # fmt: skip
    assert [line for line in result.stderr.lines if line] == result.stderr.lines[:1]
    missing = pytester.runpytest("--dflash-resume=nothing.json")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["ERROR: --dflash-resume: cannot read report *nothing.json*"])


HOOK = """
from pytest_specdecode.coding import Problem

def pytest_dflash_problems(config):
    return [Problem(name="double", prompt="Write double(x).", entry_point="double",
                    reference="def double(x):\\n    return 2 * x\\n", cases={cases})]
"""


def test_a_problem_from_a_hook_defined_otherwise_refuses_the_resume(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> None:
    from pytest_specdecode.coding import builtin_problems
    from pytest_specdecode.report.json_report import problem_records, problem_set

    sim_project(pytester, "")
    pytester.makepyfile(test_sweep="def test_x(): pass")
    pytester.makeconftest(HOOK.format(cases="((1,),)"))
    config = pytester.parseconfig()
    made_with = result_settings(resolve(config, environ={}))
    hooked = config.hook.pytest_dflash_problems(config=config)[0]
    made_with["problem_set"] = problem_records(problem_set([*builtin_problems(), *hooked]))
    old = {"format": 2, "settings": made_with, "configs": [], "tests": []}
    (pytester.path / "old.json").write_text(json.dumps(old))
    same = pytester.runpytest("--dflash-resume=old.json")
    assert same.ret == pytest.ExitCode.OK, same.stderr.lines
    pytester.makeconftest(HOOK.format(cases="((1,), (5,))"))
    result = pytester.runpytest("--dflash-resume=old.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --dflash-resume: 'old.json' was made with other settings that change results: "
         "problem_set: 'double' changed; resume with that run's settings, or start the sweep "
         "again without --dflash-resume"]
    )  # fmt: skip
