"""A run stopped with SIGINT half-way leaves a valid JSON report of what finished."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from ..conftest import sim_launch

FAST_SIM = sim_launch()

TESTS = """
import time

import pytest

@pytest.mark.throughput(contexts=[60], concurrency=[1, 2], output_tokens=16)
def test_a_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)

def test_b_slow(dflash_service):
    open("b_started", "w").close()  # the outer test interrupts once this exists
    time.sleep(120)  # a long test: the run is interrupted during it

def test_c_never_reached(dflash_service):
    pass
"""


def read_report(path: Any) -> dict[str, Any] | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    # Written with os.replace: whenever the file exists it is a whole report.
    data: dict[str, Any] = json.loads(text)
    return data


def finished_cases(data: dict[str, Any] | None) -> list[str]:
    if data is None:
        return []
    return [t["case"] for c in data["configs"] for t in c["throughput"]]


@pytest.mark.slow
def test_sigint_half_way_leaves_the_finished_tests_in_the_report(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        f"[pytest]\ndflash_launch = {FAST_SIM}\ndflash_ready_timeout = 60\n"
        "dflash_report = report.json\ndflash_rounds = 1\n"
    )
    pytester.makepyfile(test_run=TESTS)
    path = pytester.path / "report.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "test_run.py"],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        seen = None
        while time.monotonic() < deadline and proc.poll() is None:
            seen = read_report(path)
            if len(finished_cases(seen)) == 2:
                break
            time.sleep(0.05)
        assert finished_cases(seen) == ["ctx60-c1-t16-chat", "ctx60-c2-t16-chat"], (
            "throughput never finished"
        )
        # Interrupt inside test_b; the report is rewritten only after teardowns.
        started = pytester.path / "b_started"
        while not started.exists():
            assert proc.poll() is None, "the run ended before test_b started"
            assert time.monotonic() < deadline, "test_b never started"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    text = output.decode(errors="replace")
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, text
    assert "KeyboardInterrupt" in text
    data = read_report(path)
    assert data is not None
    assert data["format"] == 2
    (config,) = data["configs"]
    assert [t["case"] for t in config["throughput"]] == ["ctx60-c1-t16-chat", "ctx60-c2-t16-chat"]
    for case in config["throughput"]:
        assert case["metrics"]["tok_s"] > 0
        assert case["metrics"]["errors"] == 0
    assert config["service"]["ready_seconds"] > 0
    assert "test_run.py::test_b_slow" in text
    assert "test_c_never_reached" not in text
    # The interrupted run stopped the server it started.
    match = re.search(r"\bpid (\d+)", config["service"]["identity"])
    assert match, config["service"]["identity"]
    with pytest.raises(ProcessLookupError):
        os.kill(int(match[1]), 0)
