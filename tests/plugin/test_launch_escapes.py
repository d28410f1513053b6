"""A launch whose server leaves the process group still ends with the run.

The local controller stops the launch's process group; a server started under
``setsid -w`` or by a double-forking daemon wrapper sits in a session of its
own, so only tracking beyond the group (a child subreaper and the launch's
marker) finds it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..conftest import process_gone
from .conftest import FAST_SIM

# argv: PIDFILE MODE COMMAND...; writes the server's pid (atomically) before it runs.
WRAPPER = r"""
import os, sys

pidfile, mode, argv = sys.argv[1], sys.argv[2], sys.argv[3:]

def note(pid):
    with open(pidfile + ".tmp", "w") as fh:
        fh.write(str(pid))
    os.rename(pidfile + ".tmp", pidfile)

if mode == "exec":  # setsid -w runs this in its new session: the server is this pid
    note(os.getpid())
    os.execvp(argv[0], argv)
# "daemon": fork, setsid, fork again; the server's parent and grandparent exit.
first = os.fork()
if first == 0:
    os.setsid()
    second = os.fork()
    if second == 0:
        os.execvp(argv[0], argv)
    note(second)
    os._exit(0)
os.waitpid(first, 0)
"""


def _running_sim(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"pytest_specdecode.sim" in cmdline


@pytest.fixture
def pidfile(pytester: pytest.Pytester) -> Iterator[Path]:
    """Where the wrapper notes the server's pid; a server left behind is killed after."""
    path = pytester.path / "server.pid"
    yield path
    with contextlib.suppress(OSError, ValueError):
        pid = int(path.read_text())
        if _running_sim(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper is Linux's")
@pytest.mark.parametrize("how", ["setsid -w", "daemon"])
def test_a_server_that_left_the_process_group_ends_with_the_run(
    pytester: pytest.Pytester, pidfile: Path, how: str
) -> None:
    wrapper = pytester.path / "wrapper.py"
    wrapper.write_text(WRAPPER)
    mode = "exec" if how == "setsid -w" else "daemon"
    prefix = "setsid -w " if how == "setsid -w" else ""
    launch = f"{prefix}{sys.executable} {wrapper} {pidfile} {mode} {FAST_SIM}"
    pytester.makeini(
        f"[pytest]\ndflash_launch = {launch}\ndflash_ready_timeout = 60\n"
        "dflash_report = report.json\n"
    )
    pytester.makepyfile(
        test_t="""
        import pytest

        @pytest.mark.dflash(budget=8)
        def test_a(dflash_service):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider")
    shown = "\n".join(line for line in result.outlines if "[dflash]" in line or "::" in line)
    assert pidfile.exists(), shown
    pid = int(pidfile.read_text())
    assert process_gone(pid, timeout=30), (
        f"the server (pid {pid}, launched by {how!r}) outlived pytest:\n{shown}"
    )
    if how == "setsid -w":  # its leader stays: the gate knows the server as the launch's
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["*DFLASH budget=8: ready in *; launched: setsid -w *"])
