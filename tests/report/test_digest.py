"""Record digests: a report as written verifies; an edit, a dropped digest or a moved record not."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.report import digest

REPORT: dict[str, Any] = {
    "configs": [
        {
            "key": "kA",
            "coding": [{"problem": "fib", "passed": False, "nodeid": "t::c[fib]"}],
            "throughput": [{"case": "c1", "metrics": {"tok_s": 1.5}, "nodeid": "t::t[c1]"}],
            "lossless": [{"nodeid": "t::l", "passed": True, "detail": ""}],
        },
        {"key": "kB", "coding": [], "throughput": [], "lossless": []},
    ],
    "tests": [{"nodeid": "t::c[fib]", "when": "call", "outcome": "failed"}],
}


def signed() -> dict[str, Any]:
    data = copy.deepcopy(REPORT)
    digest.sign(data)
    back: dict[str, Any] = json.loads(json.dumps(data))  # as a reader of the file gets it
    return back


def test_a_report_as_written_verifies() -> None:
    assert digest.signed(signed())
    assert digest.refused(signed()) == {}


def test_an_edited_outcome_a_removed_digest_or_a_moved_record_is_refused() -> None:
    data = signed()
    data["tests"][0]["outcome"] = "passed"
    assert digest.refused(data) == {"t::c[fib]": "its test record no longer matches its digest"}
    data = signed()
    del data["configs"][0]["throughput"][0]["digest"]
    assert digest.refused(data) == {"t::t[c1]": "its throughput record has no digest"}
    data = signed()
    data["configs"][1]["coding"].append(data["configs"][0]["coding"].pop())
    assert digest.refused(data) == {"t::c[fib]": "its coding record no longer matches its digest"}


def test_a_report_from_before_digests_refuses_nothing_but_says_so() -> None:
    assert not digest.signed(REPORT)
    assert digest.refused(REPORT) == {}


@given(value=st.one_of(st.integers(), st.floats(allow_nan=False), st.text(), st.booleans()))
def test_any_change_of_a_figure_is_refused(value: Any) -> None:
    data = signed()
    if data["configs"][0]["throughput"][0]["metrics"]["tok_s"] == value:
        return
    data["configs"][0]["throughput"][0]["metrics"]["tok_s"] = value
    assert "t::t[c1]" in digest.refused(data)
