"""What an answer can reach: only the allowlist, as root and as an ordinary user.

Each test plants what a real machine has (a home with an SSH key, a Unix
socket open to everyone, another checkout of this project with its
references, a conftest defining a reference, the repository's objects) and
shows that the planted thing is reachable *outside* the sandbox, so a pass
means the sandbox hid it, not that the test missed it.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import pytest_specdecode
import pytest_specdecode.coding.problems_basic as basic
from pytest_specdecode.coding import layout, sandbox_mode
from pytest_specdecode.coding.cgroup import hierarchies
from pytest_specdecode.coding.sandbox import Sandbox

from . import unprivileged
from .test_hostile import HOSTILE

needs_bwrap = pytest.mark.skipif(sandbox_mode() != "bwrap", reason="bubblewrap not usable here")
SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- planted-by-the-test"

# The answer: for each path, what it could do with it; plus what / holds.
PROBE = """
import os, socket

def probe(paths, sockets):
    seen = {}
    for path in paths:
        try:
            if os.path.isdir(path):
                seen[path] = 'listed:' + ','.join(sorted(os.listdir(path))[:5])
            else:
                with open(path, 'rb') as fh:
                    seen[path] = 'read:' + fh.read(60).decode(errors='replace')
        except OSError as exc:
            seen[path] = type(exc).__name__
    for path in sockets:
        try:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(1)
                sock.connect(path)
                sock.sendall(b'hello from the answer')
            seen[path] = 'connected'
        except OSError as exc:
            seen[path] = type(exc).__name__
    return seen, sorted(os.listdir('/'))
"""


@dataclass
class Planted:
    """Things a machine holds that no answer may reach."""

    files: list[str]
    sockets: list[str]
    listeners: list[socket.socket]

    def paths(self) -> list[str]:
        return [*self.files]

    def check_unreached(self) -> None:
        for listener in self.listeners:
            with pytest.raises(BlockingIOError):
                listener.accept()


def git_objects() -> list[str]:
    """This checkout's repository objects, when it is a git checkout."""
    root = Path(pytest_specdecode.__file__).resolve().parent.parent
    git = shutil.which("git")
    if git is None:
        return []
    found = subprocess.run(
        [git, "-C", str(root), "rev-parse", "--path-format=absolute", "--git-common-dir"],
        capture_output=True,
        text=True,
    )
    objects = Path(found.stdout.strip()) / "objects"
    return [str(objects)] if found.returncode == 0 and objects.is_dir() else []


def plant(base: Path, owner: int | None = None) -> Planted:
    """A home with a key, another checkout, a conftest with a reference, and a 0777 socket."""
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    key = home / ".ssh" / "id_ed25519"
    key.write_text(SECRET)
    key.chmod(0o600)
    other = base / "other-checkout" / "pytest_specdecode" / "coding"
    other.mkdir(parents=True)
    shutil.copy(basic.__file__, other / "problems_basic.py")
    conftest = base / "project" / "conftest.py"
    conftest.parent.mkdir()
    conftest.write_text("def reference_add(a, b):\n    return a + b\n")
    if owner is not None:
        for path in [home, home / ".ssh", key]:
            os.chown(path, owner, owner)
        home.chmod(0o700)
    sockets = base / "run"
    sockets.mkdir()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sockets / "docker.sock"))
    os.chmod(sockets / "docker.sock", 0o777)
    listener.listen()
    listener.setblocking(False)
    LISTENERS.setdefault(str(base), []).append(listener)
    files = [
        str(key),
        str(home),
        str(other / "problems_basic.py"),
        str(conftest),
        str(Path(pytest_specdecode.__file__).parent / "coding" / "problems_basic.py"),
        *git_objects(),
    ]
    return Planted(files, [str(sockets / "docker.sock")], [listener])


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside /tmp (the old sandbox hid only /tmp), removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="specdecode-planted-", dir="/var/tmp"))
    base.chmod(0o755)
    yield base
    for listener in LISTENERS.pop(str(base), []):
        listener.close()
    shutil.rmtree(base, ignore_errors=True)


LISTENERS: dict[str, list[socket.socket]] = {}


def run_probe(planted: Planted) -> tuple[dict[str, str], list[str]]:
    with Sandbox(PROBE, "probe", mode="bwrap") as box:
        assert box.ready() is None
        ok, value = box.call((planted.paths(), planted.sockets))
    assert ok, value
    seen, root = value
    return dict(seen), list(root)


# What / may hold inside the sandbox: the allowlist's top-level entries.
ROOT_ENTRIES = {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp"}


@needs_bwrap
def test_an_answer_reaches_nothing_planted(outside: Path) -> None:
    planted = plant(outside)
    assert Path(planted.files[0]).read_text() == SECRET  # reachable outside the sandbox
    seen, root = run_probe(planted)
    for path in [*planted.files, *planted.sockets]:
        assert seen[path] in ("FileNotFoundError", "PermissionError"), (path, seen[path])
    planted.check_unreached()
    interpreter_top = Path(os.path.realpath(sys.base_prefix)).parts[1]
    assert set(root) <= ROOT_ENTRIES | {"usr", interpreter_top}, root


# The non-root run: the whole hostile suite (test_hostile.HOSTILE) and the probe,
# in one process of an unprivileged user, answers judged on a few threads.
NONROOT_SCRIPT = """
import json, os, sys
from pytest_specdecode.coding import builtin_problems, check_answer, sandbox_mode
from pytest_specdecode.coding.parallel import Checker
from pytest_specdecode.coding.sandbox import Sandbox

args = json.loads(sys.argv[1])
out = {"mode": sandbox_mode(), "uid": os.getuid()}
if out["mode"] == "bwrap":
    with Sandbox(args["probe"], "probe", mode="bwrap") as box:
        out["ready"] = box.ready()
        out["probe"] = box.call((args["paths"], args["sockets"]))
    gcd = next(p for p in builtin_problems() if p.name == "gcd")
    with Checker(workers=4) as checker:
        futures = {
            name: checker.submit(
                gcd, code, judge=check_answer, timeout=4.0, examples=20, mode="bwrap"
            )
            for name, code in args["answers"].items()
        }
        out["verdicts"] = {
            name: [v.passed, v.status, v.reason]
            for name, future in futures.items()
            for v in [future.result()]
        }
print(json.dumps(out))
"""

# The daemon execs the interpreter with a token, to be found if it outlived its answer.
NONROOT_DAEMON = (
    "import os, sys\n"
    "def gcd(a, b):\n"
    "    if os.fork() == 0:\n"
    "        os.setsid()\n"
    "        if os.fork() == 0:\n"
    "            code = 'import sys, time; time.sleep(float(sys.argv[1]))'\n"
    "            os.execv(sys.executable, [sys.executable, '-c', code, TOKEN])\n"
    "        os._exit(0)\n"
    "    return 1\n"
)


def nonroot_answers(token: str, targets: list[str]) -> dict[str, tuple[str, str, str]]:
    """test_hostile's attacks (its daemon found by ``token``), plus one that writes ``targets``."""
    answers = {
        **HOSTILE,
        "daemon": (NONROOT_DAEMON.replace("TOKEN", repr(token)), *HOSTILE["daemon"][1:]),
    }
    answers["write-planted"] = (
        f"def gcd(a, b):\n    for p in {targets!r}:\n        try:\n"
        "            open(p, 'w').write('overwritten')\n"
        "        except OSError:\n            pass\n    return 1\n",
        "failed",
        "returned 1",
    )
    return answers


def running_with(token: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and token.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_as_an_unprivileged_user(outside: Path) -> None:
    uid, python = unprivileged.user()  # as root: nobody, HOME a fresh directory planted below
    planted = plant(outside, owner=uid)
    token = f"{800 + os.getpid() % 97}.{int.from_bytes(os.urandom(3), 'big'):07d}"
    home = outside / "home"
    targets = [planted.files[0], str(home / "planted-by-an-answer"), str(outside / "evil.txt")]
    answers = nonroot_answers(token, targets)
    source = unprivileged.import_path(outside)
    answers_tmp = outside / "tmp"  # the sandboxes' temp dirs: empty again afterwards
    answers_tmp.mkdir()
    answers_tmp.chmod(0o777)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "PYTHONPATH": os.pathsep.join(source),
        "TMPDIR": str(answers_tmp),
    }
    args = {
        "probe": PROBE,
        "paths": planted.paths(),
        "sockets": planted.sockets,
        "answers": {name: code for name, (code, _, _) in answers.items()},
    }
    outside.chmod(0o777)  # the user may write here, outside any sandbox
    before = sorted(str(p) for p in outside.rglob("*"))
    out: dict[str, Any] = unprivileged.run_as(uid, python, NONROOT_SCRIPT, args, env)
    assert out["uid"] == uid
    if out["mode"] != "bwrap":
        pytest.skip(f"bubblewrap does not work for uid {uid} here")
    assert out["ready"] is None
    ok, (seen, _root) = out["probe"]
    assert ok
    for path in [*planted.files, *planted.sockets]:
        assert seen[path] in ("FileNotFoundError", "PermissionError"), (path, seen[path])
    planted.check_unreached()
    verdicts = out["verdicts"]
    assert set(verdicts) == set(answers)
    for name, (_, status, reason) in answers.items():
        passed, got_status, got_reason = verdicts[name]
        assert (passed, got_status) == (False, status), (name, got_reason)
        assert reason in got_reason, (name, got_reason)
    assert running_with(token) == []
    assert Path(planted.files[0]).read_text() == SECRET
    assert sorted(str(p) for p in outside.rglob("*")) == before
    assert list(answers_tmp.iterdir()) == []


def test_the_layout_is_an_allowlist(monkeypatch: pytest.MonkeyPatch) -> None:
    found = layout.discover()
    assert "/" not in found.binds
    home = os.path.expanduser("~")
    project = str(Path(pytest_specdecode.__file__).resolve().parent.parent)
    for path in found.binds:
        assert not layout._within(home, path), path  # nothing at or above the home
        assert not layout._within(path, project), path
    assert all(p.endswith(("site-packages", "dist-packages")) or p == project for p in found.hidden)
    for flags in (True, False):
        monkeypatch.setattr(layout, "supports", lambda flag, flags=flags: flags)
        argv = layout.bwrap_argv(found, ["python"], as_root=False, disk_bytes=1 << 20)
        assert ("--size" in argv) is flags  # bubblewrap < 0.8 has no --size
        assert argv[:2] == ["bwrap", "--unshare-all"]
        assert argv[argv.index("--chdir") + 1] == "/tmp"
    pairs = list(itertools.pairwise(argv))
    assert ("--ro-bind", "/") not in pairs
    # Parent directories bwrap would create 0700 (a dropped uid could not enter
    # them) are made 0755 before anything is bound below them.
    made = {
        argv[i + 3]: i
        for i, arg in enumerate(argv)
        if arg == "--perms" and argv[i + 1 : i + 3] == ["0755", "--dir"]
    }
    for i, arg in enumerate(argv):
        if arg == "--ro-bind" and argv[i + 1] != "/dev/null":
            parts = Path(argv[i + 2]).parts
            for depth in range(2, len(parts)):
                parent = str(Path(*parts[:depth]))
                assert found.visible(parent) or made.get(parent, len(argv)) < i, parent


def test_program_interpreter() -> None:
    interp = layout.program_interpreter(layout.base_executable())
    assert interp is None or (interp.startswith("/") and os.path.exists(interp))
    assert layout.program_interpreter(__file__) is None


DAEMON = """
import os, sys, time

def gcd(a, b):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open('daemon.pid', 'w') as fh:
                fh.write(str(os.getpid()))
            try:
                code = 'import sys, time; time.sleep(float(sys.argv[1]))'
                os.execv(sys.executable, [sys.executable, '-c', code, TOKEN])
            except OSError:  # the fallback's uid may not reach the interpreter's path
                time.sleep(60)
        os._exit(0)
    return 1
"""


def daemon_alive(box: Sandbox, token: str) -> bool:
    if box.workdir is None:  # bwrap: pids are namespaced, find it by its command line
        return bool(running_with(token))
    try:
        pid = int(Path(box.workdir, "daemon.pid").read_text())
    except (OSError, ValueError):
        return False
    return Path(f"/proc/{pid}").exists()


@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=needs_bwrap), "fallback"])
def test_a_double_forked_daemon_dies_with_the_answer(mode: str) -> None:
    if mode == "fallback" and os.geteuid() != 0 and not hierarchies():
        pytest.skip("the fallback without root or a cgroup cannot reach a daemon (documented)")
    token = f"{700 + os.getpid() % 97}.{int.from_bytes(os.urandom(3), 'big'):07d}"
    with Sandbox(DAEMON.replace("TOKEN", repr(token)), "gcd", mode=mode) as box:
        assert box.ready() is None
        assert box.call((1, 2)) == (True, 1)
        deadline = time.monotonic() + 10
        while not daemon_alive(box, token):  # wait until the daemon really runs
            assert time.monotonic() < deadline, "the daemon never started"
            time.sleep(0.01)
        pid_file = None if box.workdir is None else Path(box.workdir, "daemon.pid")
        daemon = int(pid_file.read_text()) if pid_file else None
    assert running_with(token) == []
    if daemon is not None:
        assert not Path(f"/proc/{daemon}").exists() or "Z" in _state(daemon)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"
