"""Records are keyed by test id, and each run's report copy is its own.

Two tests measuring one case under one config used to keep only the last
(records were keyed by case); two runs writing in one directory at once could
pick the same "this run's copy" and one run's results disappeared.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime, timezone
from pathlib import Path

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.report import json_report
from pytest_specdecode.report.model import Report
from pytest_specdecode.report.outputs import RunOutputs
from pytest_specdecode.report.results import RunResults

from .feed import B4, B8, props

CASE = "ctx60-c1-chat"


def two_tests_one_case(results: RunResults) -> None:
    for test, tok_s in (("test_a.py::test_short", 100.0), ("test_b.py::test_long", 200.0)):
        nodeid = f"{test}[{CASE}]"
        record = {"case": CASE, "key": nodeid, "metrics": {"case": CASE, "tok_s": tok_s}}
        results.add(nodeid, "call", "passed", props(B8, "throughput", record))
        ok = tok_s > 150
        coding = {
            "problem": "fib",
            "passed": ok,
            "correct": int(ok),
            "status": "pass",
            "reason": "",
        }
        results.add(f"{test}[fib]", "call", "passed", props(B8, "coding", coding))


def test_two_tests_of_one_case_under_one_config_keep_both_records() -> None:
    results = RunResults()
    two_tests_one_case(results)
    (config,) = results.to_json()["configs"]
    assert [(t["case"], t["metrics"]["tok_s"]) for t in config["throughput"]] == [
        (CASE, 100.0),
        (CASE, 200.0),
    ]
    assert [t["nodeid"] for t in config["throughput"]] == [
        f"test_a.py::test_short[{CASE}]",
        f"test_b.py::test_long[{CASE}]",
    ]
    assert [(c["problem"], c["nodeid"]) for c in config["coding"]] == [
        ("fib", "test_a.py::test_short[fib]"),
        ("fib", "test_b.py::test_long[fib]"),
    ]
    assert config["pass_rate"] == {"rate": 0.5, "passed": 1, "total": 2}


def run_once(root: Path, config: object, start: threading.Barrier, started: datetime) -> Path:
    results = RunResults()
    nodeid = f"test_t.py::test_throughput[{CASE}]"
    record = {"case": CASE, "key": nodeid, "metrics": {"case": CASE, "tok_s": 1.0}}
    results.add(nodeid, "call", "passed", props(config, "throughput", record))  # type: ignore[arg-type]
    outputs = RunOutputs(Settings(report="out/report.json"), results, root)
    outputs._start = started  # both runs started in the same second
    # Both runs look for a free name before either writes: the name must still be theirs.
    assert outputs.report_copy is not None
    start.wait(timeout=30)
    outputs.finish(0)
    assert outputs.report_copy is not None
    return outputs.report_copy


def test_two_runs_at_once_in_one_directory_both_keep_their_copies(tmp_path: Path) -> None:
    started = datetime(2026, 12, 1, 20, 30, tzinfo=timezone.utc)
    start = threading.Barrier(2)
    copies: dict[str, Path] = {}

    def run(name: str, config: object) -> None:
        copies[name] = run_once(tmp_path, config, start, started)

    threads = [threading.Thread(target=run, args=a) for a in (("b8", B8), ("b4", B4))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert set(copies) == {"b8", "b4"}
    assert copies["b8"] != copies["b4"]
    labels = {json.loads(p.read_text())["configs"][0]["label"] for p in copies.values()}
    assert labels == {B8.label(), B4.label()}  # neither run's copy replaced the other's
    latest = json.loads((tmp_path / "out" / "report.json").read_text())
    assert latest["configs"][0]["label"] in labels  # the latest pointer: one whole report
    assert not list((tmp_path / "out").glob(".*"))  # no temporary file left


def run(n: int) -> Report:
    """The report of run ``n`` (told apart by its start)."""
    return Report(started=f"run {n}")


def test_numbered_reports_are_claimed_so_two_runs_never_share_one(tmp_path: Path) -> None:
    started = datetime(2026, 12, 1, 20, 30, tzinfo=timezone.utc)
    template = "runs/r-{n}.json"
    # Both runs chose 0001 (neither file existed yet); only the first to write gets it.
    first = json_report.claim_paths(template, tmp_path, started, run(1))
    second = json_report.claim_paths(template, tmp_path, started, run(2))
    assert [p.name for p, _ in (first, second)] == ["r-0001.json", "r-0002.json"]
    assert Report.from_json(first[0].read_text()) == run(1)
    # {now} of the same second: the second run's file gets a unique part.
    a, _ = json_report.claim_paths("runs/{now}.json", tmp_path, started, run(1))
    b, _ = json_report.claim_paths("runs/{now}.json", tmp_path, started, run(2))
    assert a != b
    assert Report.from_json(a.read_text()) == run(1)
    assert Report.from_json(b.read_text()) == run(2)


def test_write_new_never_replaces_a_file(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    assert json_report.write_new(target, run(1))
    assert not json_report.write_new(target, run(2))
    assert Report.from_json(target.read_text()) == run(1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
