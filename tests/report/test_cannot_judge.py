"""Every gate answers pass, fail or cannot-judge, and cannot-judge fails the run.

A saved run that lacks a figure (no ``extra_info``, other types, an older format)
used to make ``--dflash-compare-fail`` print nothing and exit 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import ConfigError
from pytest_specdecode.report import gates, summary
from pytest_specdecode.report.outputs import RunOutputs
from pytest_specdecode.report.results import RunResults

from .feed import B8, throughput

CASE = "ctx1024-c8-chat"
NODE = f"test_t.py::test_throughput[{CASE}]"


def measured(tok_s: float = 1000.0) -> RunResults:
    results = RunResults()
    rounds = [tok_s * 0.99, tok_s, tok_s * 1.01]
    metrics = {"tok_s": tok_s, "accept_length": 3.1, "intervals": {"tok_s": {"values": rounds}}}
    throughput(results, B8, CASE, metrics)
    return results


def save(path: Path, benchmarks: Any) -> Path:
    path.write_text(json.dumps({"benchmarks": benchmarks}))
    return path


def finish(tmp_path: Path, saved: Path, results: RunResults, spec: str = "tok_s:5%") -> RunOutputs:
    settings = Settings(report="r.json", compare=str(saved), compare_fail=(spec,))
    outputs = RunOutputs(settings, results, tmp_path)
    outputs.status = outputs.finish(0)  # type: ignore[attr-defined]
    return outputs


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ({"fullname": NODE, "name": f"test_throughput[{CASE}]"}, " (its entry has no extra_info)"),
        ({"fullname": NODE, "extra_info": {"case": CASE, "tokens_per_s": 900.0}}, ""),
        ({"fullname": NODE, "extra_info": {"case": CASE, "tok_s": None}}, ""),
    ],
    ids=["no-extra-info", "an-older-name", "null"],
)
def test_a_saved_run_without_the_figure_cannot_judge_and_fails(
    tmp_path: Path, entry: dict[str, Any], why: str
) -> None:
    outputs = finish(tmp_path, save(tmp_path / "0003_b8.json", [entry]), measured())
    assert outputs.status == 1  # type: ignore[attr-defined]
    line = f"compare cannot judge: tok_s:5%: the saved run 0003_b8 has no tok_s for {CASE}{why}"
    assert outputs.gate_lines == [line]
    assert [o.status for o in outputs.gate_outcomes] == ["cannot-judge"]
    shown = summary.render(outputs.report(), outputs.gate_lines)
    assert any("CANNOT JUDGE" in s and "has no tok_s" in s for s in shown), shown
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["exitstatus"] == 1
    assert report["gates"]["failed"] == [line]


ROUNDS = {"tok_s": {"values": [990.0, 1000.0, 1010.0]}}


@pytest.mark.parametrize(
    ("info", "why"),
    [
        ({"tok_s": "fast", "intervals": ROUNDS}, "tok_s is a str ('fast')"),
        ({"tok_s": True, "intervals": ROUNDS}, "tok_s is a bool (True)"),
        ({"tok_s": [1000.0], "intervals": ROUNDS}, "tok_s is a list ([1000.0])"),
        ({"tok_s": float("nan"), "intervals": ROUNDS}, "tok_s is not finite (nan)"),
        ({"tok_s": 1000.0, "accept_length": "3.1"}, "accept_length is a str ('3.1')"),
        (
            {"tok_s": 1000.0, "intervals": {"tok_s": {"values": [990.0, "1e9", 1010.0]}}},
            "the tok_s value of round 2 is a str ('1e9')",
        ),
        (
            {"tok_s": 1000.0, "intervals": {"tok_s": {"values": "990,1000"}}},
            "the tok_s round values are a str, not a list",
        ),
    ],
    ids=["a-string", "a-bool", "a-list", "nan", "accept-a-string", "a-round", "rounds-a-str"],
)
def test_a_saved_record_whose_figure_has_the_wrong_type_is_refused_not_repaired(
    tmp_path: Path, info: dict[str, Any], why: str
) -> None:
    # The per-round values would give a figure (the round min and max too): not used.
    entry = {"fullname": NODE, "extra_info": {"case": CASE, **info}}
    outputs = finish(tmp_path, save(tmp_path / "0003_b8.json", [entry]), measured())
    assert outputs.status == 1  # type: ignore[attr-defined]
    line = (
        f"compare cannot judge: tok_s:5%: the saved run 0003_b8 has a record for {CASE} that "
        f"is refused: {why}; save the run again"
    )
    assert outputs.gate_lines == [line]
    assert [o.status for o in outputs.gate_outcomes] == ["cannot-judge"]


def test_a_gate_that_compares_nothing_fails(tmp_path: Path) -> None:
    other = {"fullname": "test_t.py::test_throughput[ctx60-c1]", "extra_info": {"tok_s": 9.0}}
    outputs = finish(tmp_path, save(tmp_path / "0001_x.json", [other]), measured())
    assert outputs.status == 1  # type: ignore[attr-defined]
    # The saved-only case fails as missing now; nothing was compared, said in its own line.
    assert any("nothing compared: the saved run 0001_x has none" in s for s in outputs.gate_lines)


def test_a_case_new_in_this_run_is_not_compared_but_the_others_are(tmp_path: Path) -> None:
    entry = {"fullname": NODE, "extra_info": {"case": CASE, "tok_s": 1000.0}}
    results = measured()
    throughput(results, B8, "ctx60-c1-chat", {"tok_s": 5.0})
    outputs = finish(tmp_path, save(tmp_path / "0002_x.json", [entry]), results)
    assert outputs.gate_lines == []
    assert outputs.status == 0  # type: ignore[attr-defined]
    assert [f["case"] for f in outputs.compare["findings"]] == [CASE]  # type: ignore[index]


def test_a_relative_limit_from_zero_cannot_judge(tmp_path: Path) -> None:
    entry = {"fullname": NODE, "extra_info": {"case": CASE, "tok_s": 0}}
    outputs = finish(tmp_path, save(tmp_path / "0004_x.json", [entry]), measured())
    assert outputs.status == 1  # type: ignore[attr-defined]
    assert outputs.gate_lines == [
        f"compare cannot judge: tok_s:5%: the saved run 0004_x has tok_s 0 for {CASE}: "
        "a relative change from it is undefined"
    ]


def test_a_pass_rate_gate_with_no_coding_test_cannot_judge() -> None:
    outcomes = gates.outcomes(Settings(min_pass_rate=0.8), measured(), [])
    assert [(o.gate, o.status) for o in outcomes] == [("pass rate", "cannot-judge")]
    lines = [o.line for o in outcomes if not o.passed]
    assert lines == [
        "pass rate cannot judge: no coding test ran, so nothing measured a pass rate to hold to 80%"
    ]
    assert gates.exit_status(0, Settings(min_pass_rate=0.8), measured(), lines) == 1


def test_a_gate_that_cannot_judge_never_passes() -> None:
    with pytest.raises(ValueError, match="cannot judge does not pass"):
        gates.Outcome("compare", True, "x", judged=False)


# --- property: arbitrary saved-run shapes ----------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELD = st.sampled_from(["tok_s", "accept_length", "case", "config", "intervals", "algorithm"])
EXTRA = st.dictionaries(FIELD, JSON, max_size=5) | JSON
ENTRY = (
    st.fixed_dictionaries(
        {},
        optional={
            "fullname": st.sampled_from([NODE, "t.py::x", ""]) | JSON,
            "name": JSON,
            "param": JSON,
            "extra_info": EXTRA,
        },
    )
    | JSON
)
SAVED = st.lists(ENTRY, max_size=4) | JSON


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(benchmarks=SAVED, spec=st.sampled_from(["tok_s:5%", "accept_length:0.2", "tok_s:0%"]))
def test_any_saved_run_gives_one_of_three_and_never_exit_0_unjudged(
    tmp_path: Path, benchmarks: Any, spec: str
) -> None:
    saved = tmp_path / "0005_any.json"
    saved.write_text(json.dumps({"benchmarks": benchmarks}, allow_nan=True))
    # No HTML page: 0.15 s an example, and this checks the gate, not the page.
    settings_ = Settings(report="r.json", html=None, compare=str(saved), compare_fail=(spec,))
    if not isinstance(benchmarks, list):  # not a list of benchmarks: a usage error, up front
        with pytest.raises(ConfigError, match="--dflash-compare: cannot read saved benchmark run"):
            RunOutputs(settings_, measured(), tmp_path)
        return
    outputs = RunOutputs(settings_, measured(), tmp_path)
    status = outputs.finish(0)
    mine = [o for o in outputs.gate_outcomes if o.gate == "compare"]
    assert mine, "the compare gate said nothing"
    assert {o.status for o in mine} <= {"pass", "fail", "cannot-judge"}
    for finding in outputs.compare["findings"]:  # type: ignore[index]
        assert finding["status"] in ("pass", "fail", "inconclusive", "cannot-judge")
    if any(o.status == "cannot-judge" for o in mine):
        assert status != 0
    if status == 0:  # passed: at least one case was really compared
        assert any(o.status == "pass" for o in mine)
        assert any(
            f["status"] in ("pass", "inconclusive")
            for f in outputs.compare["findings"]  # type: ignore[index]
        )
