"""``--dflash-resume`` lists what it carried, and refuses a record edited since its run.

Before: carried results were not told apart from measured ones in the summary, and a
report edited by hand (a failure turned into a pass, a figure raised) was carried as is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

TESTS = """
@pytest.mark.throughput(contexts=[60], concurrency=[1], output_tokens=8)
def test_a_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)

def test_b_plain(dflash_service):
    pass
"""


def run(pytester: pytest.Pytester, name: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "no:randomly", "--dflash-rounds=1",
        f"--basetemp={pytester.path / name}", *args,
    )  # fmt: skip


def glob(text: str) -> str:
    return text.replace("[", "?").replace("]", "?")


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_carried_results_are_listed_and_a_tampered_record_is_refused(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> None:
    sim_project(pytester, "--sim-load-seconds 0.1 --sim-warmup-seconds 0.1")
    pytester.makepyfile(test_r="import pytest\n" + TESTS)
    first = run(pytester, "first")
    assert first.ret == pytest.ExitCode.OK, first.stdout.str()
    path = pytester.path / "report.json"
    data = load(path)
    (config,) = data["configs"]
    (record,) = config["throughput"]
    assert record["digest"]
    throughput_test = record["nodeid"]
    # Hand-edited after the run: a better figure than was measured.
    record["metrics"]["tok_s"] = record["metrics"]["tok_s"] * 10
    path.write_text(json.dumps(data))

    again = run(pytester, "again", "--dflash-resume")
    assert again.ret == pytest.ExitCode.OK, again.stdout.str()
    again.assert_outcomes(passed=1, deselected=1)  # the plain test carried, the edited one rerun
    again.stdout.fnmatch_lines(
        [
            # fnmatch: the test id's brackets would be a character class.
            f"dflash: resume: refused the carried result of {glob(throughput_test)} from "
            "'*report.json': its throughput record no longer matches its digest (edited after "
            "its run?); the test runs again",
            "carried from '*report.json' (run of *): results of that run, not measured again",
            "  DFLASH*: 1 carried: test_r.py::test_b_plain",
        ]
    )
    after = load(path)
    (config,) = after["configs"]
    (measured,) = config["throughput"]
    assert measured["metrics"]["tok_s"] != record["metrics"]["tok_s"]  # measured again
    assert config["carried"]["tests"] == ["test_r.py::test_b_plain"]
    carried = {t["nodeid"] for t in after["tests"] if t.get("carried")}
    assert carried == {"test_r.py::test_b_plain"}
