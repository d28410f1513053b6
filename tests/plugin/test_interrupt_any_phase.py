"""Outputs never crash the run, and an interrupted run writes its report with a non-zero
exit status, whatever phase it was in: collection, the readiness wait, a test, cleanup.

Before: an unwritable ``--dflash-report`` was an INTERNALERROR with no summary, an
interrupt during the readiness wait wrote no report, and a second Ctrl-C left a report
saying ``exitstatus 0``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode.processes.children import free_port
from pytest_specdecode.statefiles import WaitTimeout, wait_until

from ..conftest import process_gone, sim_launch

FAST_SIM = sim_launch()

# The server's launch: note its pid in a file (the event the outer test waits for),
# then become the simulator, which never listens (hang-on-load): the readiness wait.
LAUNCH = """
import os, sys
with open({marker!r} + ".tmp", "w") as fh:
    fh.write(str(os.getpid()))
os.replace({marker!r} + ".tmp", {marker!r})
argv = [sys.executable, "-m", "pytest_specdecode.sim", "--sim-fault", "hang-on-load", *sys.argv[1:]]
os.execv(sys.executable, argv)
"""

ONE_TEST = """
def test_a(dflash_service):
    pass
"""


def wait_for(path: Path, proc: subprocess.Popen[bytes], what: str, timeout: float = 180) -> None:
    def there() -> bool:
        assert proc.poll() is None, f"the run ended before {what}: {proc.communicate()[0]!r}"
        return path.exists()

    try:
        wait_until(there, timeout=timeout, what=what, poll=0.02)
    except WaitTimeout:
        raise AssertionError(f"{what} never happened") from None


def start(pytester: pytest.Pytester, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def finish(proc: subprocess.Popen[bytes]) -> str:
    try:
        output, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return output.decode(errors="replace")


def report(pytester: pytest.Pytester) -> dict[str, Any]:
    path = pytester.path / "report.json"
    assert path.exists(), "no report"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupt_during_the_readiness_wait_writes_the_report(
    pytester: pytest.Pytester, sig: signal.Signals
) -> None:
    marker = pytester.path / "server_started"
    pytester.makefile(".py", launch=LAUNCH.format(marker=str(marker)))
    pytester.makeini(
        f"[pytest]\ndflash_launch = {sys.executable} {pytester.path / 'launch.py'}\n"
        f"dflash_port = {free_port()}\ndflash_draft_model = sim/dflash-drafter\n"
        "dflash_ready_timeout = 120\ndflash_report = report.json\n"
    )
    pytester.makepyfile(test_run=ONE_TEST)
    proc = start(pytester, "test_run.py")
    wait_for(marker, proc, "the server's start")
    proc.send_signal(sig)
    text = finish(proc)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, text
    data = report(pytester)
    assert data["interrupted"] is True
    assert data["exitstatus"] == pytest.ExitCode.INTERRUPTED
    assert "test_run.py::test_a" in data["interrupted_during"]
    assert "dflash report: " in text  # the summary still says where it is
    assert process_gone(int(marker.read_text())), "the interrupted run left its server running"


def test_an_interrupt_during_collection_writes_the_report(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        f"[pytest]\ndflash_launch = {FAST_SIM}\ndflash_ready_timeout = 60\n"
        "dflash_report = report.json\n"
    )
    pytester.makepyfile(test_a=ONE_TEST)
    # The second module takes long to import: the run is interrupted while collecting it.
    pytester.makepyfile(
        test_b="import pathlib, time\npathlib.Path('collecting').touch()\ntime.sleep(120)\n"
    )
    proc = start(pytester)
    wait_for(pytester.path / "collecting", proc, "collection of test_b")
    proc.send_signal(signal.SIGINT)
    text = finish(proc)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, text
    data = report(pytester)
    assert data["interrupted"] is True
    assert data["exitstatus"] == pytest.ExitCode.INTERRUPTED
    assert data["interrupted_during"] == "cleanup after collection"


def test_a_second_ctrl_c_never_leaves_exit_status_0(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        f"[pytest]\ndflash_launch = {FAST_SIM}\ndflash_ready_timeout = 60\n"
        "dflash_report = report.json\n"
    )
    # The second Ctrl-C lands while pytest handles the first (before it notes the status).
    pytester.makeconftest(
        "import os, signal\n"
        "def pytest_keyboard_interrupt(excinfo):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
    )
    pytester.makepyfile(
        test_run="""
import pathlib, time

def test_a(dflash_service):
    pathlib.Path("a_started").touch()
    time.sleep(120)  # interrupted during it
"""
    )
    proc = start(pytester, "test_run.py")
    wait_for(pytester.path / "a_started", proc, "test_a")
    proc.send_signal(signal.SIGINT)
    text = finish(proc)
    assert proc.returncode != 0, text
    data = report(pytester)
    assert data["interrupted"] is True, data
    assert data["exitstatus"] == pytest.ExitCode.INTERRUPTED


def test_an_unwritable_report_path_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini(f"[pytest]\ndflash_launch = {FAST_SIM}\n")
    pytester.makepyfile(test_run=ONE_TEST)
    (pytester.path / "file").write_text("not a directory")
    result = pytester.runpytest("-p", "no:cacheprovider", "--dflash-report", "file/report.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --dflash-report: cannot create *: '*file' is a file, not a directory"]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result = pytester.runpytest("-p", "no:cacheprovider", "--dflash-plot", "file/plots")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_a_report_that_cannot_be_written_later_is_one_warning(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        f"[pytest]\ndflash_launch = {FAST_SIM}\ndflash_ready_timeout = 60\n"
        "dflash_report = out/report.json\n"
    )
    pytester.makepyfile(
        test_run="""
import pathlib, shutil

def test_a(dflash_service):
    pass

def test_b(dflash_service):
    # The report's directory becomes a file mid-run: every later write fails.
    shutil.rmtree("out")
    pathlib.Path("out").write_text("in the way")

def test_c(dflash_service):
    pass
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    text = result.stdout.str()
    assert "INTERNALERROR" not in text
    assert result.ret == pytest.ExitCode.OK, text
    result.assert_outcomes(passed=3)
    warnings = [line for line in text.splitlines() if "could not write the report" in line]
    assert len(warnings) == 1, text
    assert warnings[0].startswith("dflash: WARNING: could not write the report ('out/report.json')")
    assert "dflash summary" in text
