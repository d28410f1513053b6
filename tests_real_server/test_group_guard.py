"""The tests' SGLang leaves nothing behind when they are killed (no SGLang needed)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from pytest_specdecode.service.ownership import pid_alive
from pytest_specdecode.statefiles import wait_until

ROOT = Path(__file__).resolve().parent.parent


def test_a_killed_run_takes_the_servers_whole_group_with_it(tmp_path: Path) -> None:
    # A "server" whose first process starts a child of its own, as SGLang starts its
    # detokenizer: the parent-death signal alone reaches only the first. Both live until
    # killed.
    server = tmp_path / "server"
    child_file = tmp_path / "child"
    server.write_text(f"#!/bin/sh\nsleep infinity &\necho $! > {child_file}\nexec sleep infinity\n")
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

        def child_started() -> bool:
            return child_file.exists() and child_file.read_text().endswith("\n")

        wait_until(child_started, timeout=60, what="the server's own child started")
        child = int(child_file.read_text())
        assert pid_alive(first)
        assert pid_alive(child)
        tests.stdin.write(b"kill\n")
        tests.stdin.flush()
        assert tests.wait(timeout=60) == -9
    # pid_alive counts a zombie its new parent has not reaped yet as gone.
    wait_until(
        lambda: not pid_alive(first) and not pid_alive(child),
        timeout=60,
        what="the server's group gone",
    )
