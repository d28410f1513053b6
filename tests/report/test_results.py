"""RunResults: reports in, per-config results out (synthetic reports, no pytest run)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.records import CONFIG, CONFIG_DATA, SERVICE
from pytest_specdecode.report import gates, model
from pytest_specdecode.report.results import RunResults

from .feed import B4, B8, NONE, coding, errored, props, throughput


def test_configs_that_differ_only_in_draft_model_stay_apart() -> None:
    # Labels leave out a drafter that does not vary; the canonical key never does.
    a = replace(B8, draft_model="/m/a")
    b = replace(B8, draft_model="/m/b")
    assert a.label() == b.label()
    results = RunResults()
    coding(results, a, "fib", passed=True)
    coding(results, b, "fib", passed=False)
    assert [r.config.draft_model for r in results.ordered()] == ["/m/a", "/m/b"]
    assert [r.pass_rate() for r in results.ordered()] == [(1.0, 1, 1), (0.0, 0, 1)]


def test_reports_without_a_key_fall_back_to_the_label() -> None:
    results = RunResults()
    results.add("t.py::test_x", "call", "passed", [(CONFIG, "DFLASH"), ("dflash_kind", "dflash")])
    assert [r.label for r in results.ordered()] == ["DFLASH"]


def test_pass_rate_and_accept_length_per_config() -> None:
    results = RunResults()
    coding(results, B8, "fib", passed=True, accept=4.0, tokens=40)
    coding(results, B8, "gcd", passed=False, accept=2.0, tokens=20)
    coding(results, B4, "fib", passed=True)
    b8, b4 = (next(r for r in results.ordered() if r.config.budget == n) for n in (8, 4))
    assert b8.pass_rate() == (0.5, 1, 2)
    # Tokens over verify steps, summed over answers: (40 + 20) / (10 + 10).
    assert b8.accept_length() == pytest.approx(3.0)
    assert b4.accept_length() is None  # no speculation counts: unknown, not 0 or 1


def test_throughput_accept_length_is_tokens_over_steps_over_cases() -> None:
    results = RunResults()
    throughput(results, B8, "ctx60-c1", {"completion_tokens": 300, "spec_verify_ct": 100})
    throughput(results, B8, "ctx60-c8", {"completion_tokens": 100, "spec_verify_ct": 100})
    (b8,) = results.ordered()
    assert b8.accept_length() == pytest.approx(2.0)  # 400 / 200, not the mean of 3 and 1


def test_order_is_baseline_first_then_by_value_whatever_the_arrival() -> None:
    results = RunResults()
    for config in (B8, NONE, B4):
        throughput(results, config, "ctx60-c1", {"tok_s": 1.0})
    assert [r.label for r in results.ordered()] == [
        "NONE",
        "DFLASH budget=4 window=2048",
        "DFLASH budget=8 window=2048",
    ]


def test_setup_failures_are_errors_of_their_config_and_fail_the_run() -> None:
    results = RunResults()
    errored(results, B8, "t.py::test_x")
    results.add("t.py::test_plain", "call", "failed", [])
    (b8,) = results.ordered()
    assert b8.errors == ["t.py::test_x"]
    assert results.other_failures == ["t.py::test_x", "t.py::test_plain"]


def test_failed_coding_answers_are_not_other_failures() -> None:
    results = RunResults()
    coding(results, B8, "fib", passed=False)
    assert results.other_failures == []
    assert [t["outcome"] for t in results.tests] == ["failed"]


def test_the_restart_record_wins_over_workers_that_joined_later() -> None:
    results = RunResults()
    for restarted in (False, True, False):
        results.add(
            "t.py::x",
            "setup",
            "passed",
            [*props(B8, "dflash"), (SERVICE, {"restarted": restarted})],
        )
    (b8,) = results.ordered()
    assert b8.service == {"restarted": True}


def test_json_has_key_label_and_figures() -> None:
    results = RunResults()
    coding(results, B8, "fib", passed=True)
    (entry,) = results.to_json()["configs"]
    assert entry["key"] == B8.key()
    assert entry["label"] == "DFLASH budget=8 window=2048"
    assert entry["pass_rate"] == {"rate": 1.0, "passed": 1, "total": 1}
    assert entry["pass_at_k"] == [{"k": 1, "value": 1.0}]


@pytest.mark.parametrize(
    ("kind", "record"),
    [
        ("coding", {"problem": "fib", "passed": "maybe"}),
        ("coding", {"passed": True}),  # no problem
        ("throughput", {"key": "t", "metrics": {"case": "c1"}}),  # no case
        ("throughput", {"case": "c1", "metrics": {"tok_s": "fast"}}),
        ("throughput", {"case": "c1", "metrics": {"intervals": {"tok_s": [1.0]}}}),
        ("lossless", {"passed": True, "replies": "all"}),
    ],
)
def test_a_record_that_does_not_read_fails_the_run_in_one_line_not_a_crash(
    kind: str, record: dict[str, object]
) -> None:
    results = RunResults()
    coding(results, B8, "gcd", passed=True)
    results.add("t.py::test_bad", "call", "passed", props(B8, kind, record))
    (b8,) = results.ordered()
    assert list(b8.refused) == ["t.py::test_bad"]
    assert b8.errors == []  # its server was ready: the record is what failed
    assert [c.problem for c in b8.coding.values()] == ["gcd"]
    assert not b8.throughput
    assert not b8.lossless
    lines = gates.evaluate(Settings(), results, [])
    assert [line for line in lines if "did not read" in line] == [
        f"records cannot judge: config {b8.label}: t.py::test_bad's record did not read: "
        f"{b8.refused['t.py::test_bad']}"
    ]
    assert gates.exit_status(0, Settings(), results, lines) == 1
    assert gates.config_failures(Settings(), results)[b8.label] == ["unreadable record"]


def test_records_are_the_reports_and_the_json_holds_them_as_the_file_does() -> None:
    results = RunResults()
    throughput(results, B8, "ctx60-c1", {"tok_s": 12.5, "intervals": {"tok_s": {"values": [12.5]}}})
    results.add(
        "t.py::test_lossless",
        "call",
        "passed",
        props(B8, "lossless", {"passed": True, "detail": "same", "replies": 4}),
    )
    (b8,) = results.ordered()
    (case,) = b8.throughput.values()
    assert isinstance(case, model.ThroughputRecord)
    assert case.metrics.tok_s == 12.5
    interval = case.metrics.interval("tok_s")
    assert interval is not None
    assert interval.values == [12.5]
    (check,) = b8.lossless.values()
    assert (check.nodeid, check.passed, check.replies) == ("t.py::test_lossless", True, 4)
    (entry,) = results.to_json()["configs"]
    assert entry["throughput"][0]["metrics"]["tok_s"] == 12.5
    assert entry["lossless"][0]["nodeid"] == "t.py::test_lossless"
    # The one conversion the report makes reads them back as they are.
    report = model.Report.from_dict(results.to_json())
    assert report.configs[0].throughput == [case]
    assert report.configs[0].lossless == [check]


@pytest.mark.parametrize("values", [{"budget": "eight"}, ["DFLASH"], {"extra": "x"}])
def test_config_values_that_are_not_a_configs_leave_it_named_by_its_label(values: object) -> None:
    results = RunResults()
    base = [(k, v) for k, v in props(B8, "coding") if k != CONFIG_DATA]
    results.add("t.py::test_a", "call", "passed", [*base, (CONFIG_DATA, values)])
    (b8,) = results.ordered()
    assert b8.label == B8.label()
    assert b8.config == model.Config()
    (entry,) = results.to_json()["configs"]
    assert entry["config"] == model.Config().to_dict()
