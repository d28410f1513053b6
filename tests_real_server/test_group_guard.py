"""The tests' SGLang leaves nothing behind when they are killed (no SGLang needed)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from pytest_specdecode.statefiles import wait_until

ROOT = Path(__file__).resolve().parent.parent


def gone(pid: int) -> bool:
    """Exited: no such process, or a zombie its new parent has not reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


def test_a_killed_run_takes_the_servers_whole_group_with_it(tmp_path: Path) -> None:
    # A "server" whose first process starts a child of its own, as SGLang starts its
    # detokenizer: the parent-death signal alone reaches only the first.
    server = tmp_path / "server"
    server.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {tmp_path}/child\nexec sleep 300\n")
    server.chmod(0o755)
    run = textwrap.dedent(f"""
        import os, signal, sys
        from pathlib import Path
        from tests_real_server.conftest import real_server
        with real_server(Path({str(server)!r}), Path("model"), Path({str(tmp_path)!r})) as s:
            print(s.proc.pid, flush=True)
            sys.stdin.readline()
            os.kill(os.getpid(), signal.SIGKILL)
        """)
    with subprocess.Popen(
        [sys.executable, "-c", run], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as tests:
        assert tests.stdin is not None
        assert tests.stdout is not None
        first = int(tests.stdout.readline())
        child_file = tmp_path / "child"

        def child_started() -> bool:
            return child_file.exists() and child_file.read_text().endswith("\n")

        wait_until(child_started, timeout=60, what="the server's own child started")
        child = int(child_file.read_text())
        assert not gone(first)
        assert not gone(child)
        tests.stdin.write(b"kill\n")
        tests.stdin.flush()
        assert tests.wait(timeout=60) == -9
    wait_until(lambda: gone(first) and gone(child), timeout=60, what="the server's group gone")
