"""Record digests: a report as written verifies; an edit, a dropped digest or a moved record not."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.report import digest
from pytest_specdecode.report.model import Metrics, Report, RoundSummary, Speedup

REPORT: dict[str, Any] = {
    "configs": [
        {
            "label": "A",
            "key": "kA",
            "coding": [{"problem": "fib", "passed": False, "nodeid": "t::c[fib]"}],
            "throughput": [{"case": "c1", "metrics": {"tok_s": 1.5}, "nodeid": "t::t[c1]"}],
            "lossless": [{"nodeid": "t::l", "passed": True, "detail": ""}],
        },
        {"label": "B", "key": "kB", "coding": [], "throughput": [], "lossless": []},
    ],
    "tests": [{"nodeid": "t::c[fib]", "when": "call", "outcome": "failed"}],
}


def signed() -> Report:
    data = Report.from_dict(copy.deepcopy(REPORT))
    digest.sign(data)
    return Report.from_json(data.to_json())  # as a reader of the file gets it


def test_a_report_as_written_verifies() -> None:
    assert digest.signed(signed())
    assert digest.refused(signed()) == {}


def test_an_edited_outcome_a_removed_digest_or_a_moved_record_is_refused() -> None:
    data = signed()
    data.tests[0].outcome = "passed"
    assert digest.refused(data) == {"t::c[fib]": "its test record no longer matches its digest"}
    data = signed()
    data.configs[0].throughput[0].digest = None
    assert digest.refused(data) == {"t::t[c1]": "its throughput record has no digest"}
    data = signed()
    data.configs[1].coding.append(data.configs[0].coding.pop())
    assert digest.refused(data) == {"t::c[fib]": "its coding record no longer matches its digest"}


def test_a_report_from_before_digests_refuses_nothing_but_says_so() -> None:
    report = Report.from_dict(REPORT)
    assert not digest.signed(report)
    assert digest.refused(report) == {}


# The typed model makes a figure of another type unreadable (the report does not load):
# the figures a file can hold are numbers.
@given(value=st.one_of(st.integers(), st.floats(allow_nan=False)))
def test_any_change_of_a_figure_is_refused(value: float) -> None:
    data = signed()
    if data.configs[0].throughput[0].metrics.tok_s == value:
        return
    data.configs[0].throughput[0].metrics.tok_s = float(value)
    assert "t::t[c1]" in digest.refused(data)


def test_a_judged_value_set_after_the_run_is_refused() -> None:
    data = signed()
    data.configs[0].throughput[0].speedup = Speedup(baseline="NONE (this run)")
    refused = {"t::t[c1]": "its throughput record no longer matches its digest"}
    assert digest.refused(data) == refused


# --- the digests of a report written as a dict, before the typed model --------------


def dict_digest(kind: str, config: str, record: dict[str, Any]) -> str:
    """A digest as the plugin took it of a record dict (the report before the typed model)."""
    body = {k: v for k, v in record.items() if k != "digest"}
    canonical = json.dumps([kind, config, json.loads(json.dumps(body))], sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def metrics(**figures: Any) -> dict[str, Any]:
    """A case's metrics as ``benchmark.extra_info`` held them: every figure's key, no
    ``repetition_baseline`` without a baseline's figure."""
    found: dict[str, Any] = msgspec.to_builtins(Metrics(**figures))
    del found["repetition_baseline"]
    return found


def dict_report() -> dict[str, Any]:
    """A report as the plugin wrote it from dicts: keys set only when they had a value."""
    intervals = {"tok_s": RoundSummary(mean=1.5, low=1.4, high=1.6, n=3, values=[1.4, 1.5, 1.6])}
    speedup = {"tpot": {"value": 2.0, "low": 1.9, "high": 2.1, "n": 3}, "tok_s": None,
               "baseline": "NONE (this run)"}  # fmt: skip
    plain = {"case": "c1", "metrics": metrics(tok_s=1.5, intervals=intervals), "key": "k1",
             "nodeid": "t::t[c1]"}  # fmt: skip
    judged = {"case": "c2", "metrics": {**metrics(tok_s=3.0), "repetition_baseline": 0.1},
              "key": "k2", "nodeid": "t::t[c2]", "speedup": speedup,
              "repetition": {"value": 0.2, "baseline": 0.1, "baseline_config": "NONE",
                             "degenerate": False},
              "client_limited": {"why": "its own CPU was the limit"}}  # fmt: skip
    coding = {"problem": "fib", "passed": False, "status": "wrong-answer", "reason": "no",
              "samples": 1, "correct": 0, "latency": 0.5, "completion_tokens": None,
              "accept_length": None, "generate_seconds": None, "check_seconds": None,
              "rechecked": 0, "nodeid": "t::c[fib]", "failed_answers": []}  # fmt: skip
    lossless = {"nodeid": "t::l", "passed": True, "detail": "", "replies": None,
                "defects": None, "numerics": None, "divergences": None, "seconds": 1.0}  # fmt: skip
    tests: list[dict[str, Any]] = [
        {"nodeid": "t::c[fib]", "when": "call", "outcome": "failed", "duration": 0.5,
         "config": "A", "config_key": "kA"},
        {"nodeid": "t::t[c1]", "when": "call", "outcome": "passed", "duration": 1.5,
         "config": "A", "config_key": "kA", "carried": True},
    ]  # fmt: skip
    config: dict[str, Any] = {"label": "A", "key": "kA", "coding": [coding],
                              "throughput": [plain, judged], "lossless": [lossless]}  # fmt: skip
    # Signed as the plugin signed the dict, then read back as a reader of the file gets it.
    for kind in digest.KINDS:
        config[kind] = [{**r, "digest": dict_digest(kind, "kA", r)} for r in config[kind]]
    tests = [{**t, "digest": dict_digest("test", "", t)} for t in tests]
    found: dict[str, Any] = json.loads(json.dumps({"configs": [config], "tests": tests}))
    return found


def test_a_report_written_as_dicts_keeps_its_digests() -> None:
    data = dict_report()
    report = Report.from_dict(data)
    assert digest.signed(report)
    assert digest.refused(report) == {}
    # Signed again (as a resumed run rewrites it), every record keeps its digest.
    before = [r.digest for r in report.configs[0].throughput]
    digest.sign(report)
    assert [r.digest for r in report.configs[0].throughput] == before
    assert [t.digest for t in report.tests] == [t["digest"] for t in data["tests"]]
