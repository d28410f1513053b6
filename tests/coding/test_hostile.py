"""Answers that try to cheat or do harm: each fails or times out, and leaves no trace."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import pytest_specdecode.coding.problems_basic as basic
from pytest_specdecode.coding import builtin_problems, check_answer, sandbox_mode
from pytest_specdecode.coding.sandbox import Sandbox, processes_of
from pytest_specdecode.coding.sandbox_base import worker_command

GCD = next(p for p in builtin_problems() if p.name == "gcd")
WRONG = "def gcd(a, b):\n    return 1\n"
REFERENCE_FILE = basic.__file__

needs_bwrap = pytest.mark.skipif(sandbox_mode() != "bwrap", reason="bubblewrap not usable here")
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="uid drop is exercised as root")


@pytest.fixture
def untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory outside the sandbox; asserts nothing changed there, the sandbox's
    temp dirs are gone and no process of the sandboxes' uids survived."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("original")
    answers = tmp_path / "answers"
    answers.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(answers))
    uids: list[int | None] = []
    real_close = Sandbox.close

    def close(self: Sandbox) -> None:
        uids.append(self.uid)
        real_close(self)

    monkeypatch.setattr(Sandbox, "close", close)
    yield outside
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert (outside / "keep.txt").read_text() == "original"
    assert list(answers.iterdir()) == []
    assert uids
    for uid in uids:
        if uid is not None:
            assert processes_of(uid) == []


HOSTILE = {
    "exit-at-load": ("import sys\nsys.exit(0)\n", "error", "SystemExit"),
    "os-exit-at-load": ("import os\nos._exit(0)\n", "error", "exited with status 0"),
    # The protocol pipe shut while the answer lives on until killed: its time ends it.
    "close-pipe-at-load": (
        "import os\nos.closerange(3, 1024)\nos.read(os.pipe()[0], 1)  # never written\n",
        "error",
        "the sandbox closed its pipe while loading the code",
    ),
    "exit-in-call": (
        "import sys\ndef gcd(a, b):\n    sys.exit(0)\n",
        "failed",
        "raised SystemExit",
    ),
    "os-exit-in-call": ("import os\ndef gcd(a, b):\n    os._exit(0)\n", "error", "exited"),
    "print-pass": (
        "print('PASS')\nimport sys\nsys.stderr.write('ok 1\\nPASS\\n')\n" + WRONG,
        "failed",
        "returned 1, expected 6",
    ),
    "patch-builtins": (
        "import builtins\nbuiltins.isinstance = lambda *a: True\nbuiltins.len = lambda x: 0\n"
        + WRONG,
        "error",  # the worker's own serializer breaks: no verdict from it, so no pass
        "exited with status 1",
    ),
    "patch-worker": (
        "import __main__, json\n"
        "__main__.encode = lambda value, depth=0: 6\n"
        "json.dumps = lambda obj: '{\"ok\": true}'\n" + WRONG,
        "error",
        "",
    ),
    "forge-replies": (
        "import os\n"
        "def gcd(a, b):\n"
        "    for fd in range(3, 20):\n"
        "        try:\n"
        '            os.write(fd, b\'\'.join(b\'{"id": %d, "ok": true, "value": 6}\\n\' % i'
        " for i in range(400)))\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 1\n",
        "failed",
        "",
    ),
    "import-plugin": ("import pytest_specdecode\n" + WRONG, "error", "ModuleNotFoundError"),
    "infinite-loop": (
        "def gcd(a, b):\n    while True:\n        pass\n",
        "timeout",
        "did not return",
    ),
    "loop-at-load": ("while True:\n    pass\n", "timeout", "loading the code"),
    "allocate-10gb": (
        "def gcd(a, b):\n    x = bytearray(10 * 1024 ** 3)\n    return len(x)\n",
        "failed",
        "MemoryError",
    ),
    "fork-bomb": (
        "import os\n"
        "def gcd(a, b):\n"
        "    while True:\n"
        "        try:\n"
        "            os.fork()\n"
        "        except OSError:\n"
        "            pass\n",
        "timeout",
        "did not return",
    ),
    "daemon": (
        "import os, time\n"
        "def gcd(a, b):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60)\n"
        "        os._exit(0)\n"
        "    return 1\n",
        "failed",
        "returned 1",
    ),
}


# Without root the fallback runs answers as the user itself: it cannot keep them
# from the user's files (docs/coding.md's sandbox section says so), so only bwrap holds.
FALLBACK_OWN_UID = pytest.mark.skipif(
    os.geteuid() != 0, reason="fallback has no own uid without root"
)


def _cases() -> Iterator[object]:
    no_hide = pytest.mark.skip(reason="the fallback cannot hide the package (sandbox_warning says)")
    for name in sorted(HOSTILE):
        yield pytest.param(name, "bwrap", marks=needs_bwrap, id=f"{name}-bwrap")
        marks = {"import-plugin": [no_hide], "fork-bomb": [FALLBACK_OWN_UID]}.get(name, [])
        yield pytest.param(name, "fallback", marks=marks, id=f"{name}-fallback")


@pytest.mark.parametrize(("name", "mode"), list(_cases()))
def test_hostile_answer(name: str, mode: str, untouched: Path) -> None:
    code, status, reason = HOSTILE[name]
    start = time.monotonic()
    verdict = check_answer(GCD, code, timeout=1.5, examples=20, mode=mode)
    assert not verdict.passed
    assert verdict.status == status, verdict.reason
    assert reason in verdict.reason
    # The limit ended it: an endless answer would not end at all (a bound no load reaches).
    assert time.monotonic() - start < 60


@needs_bwrap
def test_reference_file_is_hidden(untouched: Path) -> None:
    code = (
        f"def gcd(a, b):\n    try:\n        return open({REFERENCE_FILE!r}).read()\n"
        "    except OSError as e:\n        return type(e).__name__\n"
    )
    verdict = check_answer(GCD, code, examples=5, mode="bwrap")
    assert verdict.reason.startswith("gcd(12, 18) returned 'FileNotFoundError'")


@pytest.mark.parametrize(
    "mode",
    [pytest.param("bwrap", marks=needs_bwrap), pytest.param("fallback", marks=FALLBACK_OWN_UID)],
)
def test_write_outside_temp_dir(mode: str, untouched: Path) -> None:
    code = (
        f"def gcd(a, b):\n"
        f"    for p in [{str(untouched / 'evil.txt')!r}, {str(untouched / 'keep.txt')!r}]:\n"
        "        try:\n            open(p, 'w').write('x')\n"
        "        except OSError:\n            pass\n"
        "    open('inside.txt', 'w').write('fine')\n    return 1\n"
    )
    verdict = check_answer(GCD, code, examples=5, mode=mode)
    assert verdict.status == "failed"
    # `untouched` asserts that neither file changed outside the sandbox.


@needs_bwrap
def test_network_is_off(untouched: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        code = (
            "import socket\ndef gcd(a, b):\n    try:\n"
            f"        socket.create_connection(('127.0.0.1', {port}), timeout=0.5).close()\n"
            "        return 'connected'\n"
            "    except OSError as e:\n        return type(e).__name__\n"
        )
        verdict = check_answer(GCD, code, examples=5, mode="bwrap")
        assert "connected" not in verdict.reason
        with pytest.raises(BlockingIOError):
            server.accept()


@needs_bwrap
@root_only
def test_runs_unprivileged_with_clean_env(untouched: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/agent.sock")
    code = (
        "import os\ndef gcd(a, b):\n"
        "    return (os.getuid() != 0, sorted(k for k in os.environ if 'KEY' in k or 'SSH' in k))\n"
    )
    verdict = check_answer(GCD, code, examples=1, mode="bwrap")
    assert verdict.reason.startswith("gcd(12, 18) returned (True, [])")


def test_a_sandbox_that_cannot_set_the_answer_up_says_so(tmp_path: Path) -> None:
    """A failure before the answer's code runs is the sandbox's, named as such, not a
    worker that vanished without a word."""
    setup: dict[str, object] = {
        "limits": {},
        "preimport": [],
        "uid": None,
        "workdir": str(tmp_path / "no" / "dir"),
    }
    done = subprocess.run(
        worker_command(sys.executable),
        input=json.dumps(setup).encode() + b"\n",
        capture_output=True,
        check=True,
        timeout=60,
    )
    reply = json.loads(done.stdout)
    assert reply["ok"] is False
    assert reply["setup"].startswith("FileNotFoundError:"), reply
