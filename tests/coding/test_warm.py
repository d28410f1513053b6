"""The warm sandbox: answers share a sandbox in turn, and none reaches the next one.

Each attack is an answer whose double-forked daemon goes after whatever runs
next in the sandbox: it writes into every answer's directory, kills or stops
every other process, ptraces them, or writes into the memory of the
template that the next answer is forked from. The attacking answer proves
its daemon was running and attacking when it ended (it returns what the
daemon saw); the next answers, right and wrong, in the same warm sandbox,
must get the verdicts they get in a sandbox of their own. The memory attack
is shown to work on a process that is not protected, so a pass means the
protection held, not that the attack was broken.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode.coding import builtin_problems, check_answer, sandbox_mode
from pytest_specdecode.coding.sandbox import Sandbox
from pytest_specdecode.coding.warm import SandboxPool, WarmSandbox
from pytest_specdecode.processes.children import peek_exit

from . import unprivileged

GCD = next(p for p in builtin_problems() if p.name == "gcd")
needs_bwrap = pytest.mark.skipif(sandbox_mode() != "bwrap", reason="bubblewrap not usable here")
pytestmark = needs_bwrap

# The small int 6 lives at the same address in every process forked from the
# template; 24 bytes in is its first digit. Writing 1 there makes 6 read as 1.
DAEMON = """
import ctypes, os, signal, time

def _attack(kind, family):
    libc = ctypes.CDLL(None, use_errno=True)
    me, home = os.getpid(), os.getcwd()
    seen = set()
    rounds = 0
    while True:  # nothing stops it but SIGKILL: every failure is only noted
        try:
            _round(kind, family, libc, me, seen)
            rounds += 1
            with open(os.path.join(home, '.beat'), 'w') as fh:  # whole files only
                fh.write('%d %r' % (rounds, sorted(s for s in seen if s[0] == 1)))
            os.replace(os.path.join(home, '.beat'), os.path.join(home, 'beat'))
        except BaseException:
            pass
        time.sleep(0.002)  # the attack's pace, not a wait for anything

def _round(kind, family, libc, me, seen):
    others = [int(e) for e in os.listdir('/proc') if e.isdigit() and int(e) not in (me, family)]
    if kind == 'write':
        for name in os.listdir('/tmp'):
            try:  # whole files only (a reader never sees one half written)
                with open(os.path.join('/tmp', name, '.next'), 'w') as fh:
                    fh.write('1')
                os.replace(os.path.join('/tmp', name, '.next'),
                           os.path.join('/tmp', name, 'result.txt'))
            except OSError:
                pass
    for pid in others:
        error = 0
        if kind == 'signal':
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except OSError as exc:
                    error = exc.errno
        elif kind == 'ptrace':
            if libc.ptrace(16, pid, None, None) != 0:  # PTRACE_ATTACH
                error = ctypes.get_errno()
        elif kind == 'memory':
            try:
                with open('/proc/%d/mem' % pid, 'r+b', buffering=0) as fh:
                    fh.seek(id(6) + 24)
                    fh.write((1).to_bytes(4, 'little'))
            except OSError as exc:
                error = exc.errno
        if kind != 'write':
            seen.add((pid, kind, error))

def _start(kind):
    with open('result.txt', 'w') as fh:
        fh.write('6')
    family = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            try:
                _attack(kind, family)
            finally:
                os._exit(0)
        os._exit(0)
    os.waitpid(pid, 0)
    deadline = time.monotonic() + 5
    beat = ''
    while int(beat.split(' ', 1)[0] or 0) < 3:  # a few rounds of the attack
        if time.monotonic() > deadline:
            return 'the daemon never ran three rounds'
        time.sleep(0.001)
        beat = open('beat').read() if os.path.exists('beat') else ''
    with open('result.txt') as fh:
        mine = fh.read()
    return 'daemon ran; own result.txt reads ' + mine + '; on pid 1: ' + beat.split(' ', 1)[1]

PROOF = _start(KIND)

def gcd(a, b):
    return PROOF
"""

# Right, and it uses its working directory as a right answer may (with some
# work between writing and reading back: a daemon still running gets a turn).
RIGHT = """
import math

def gcd(a, b):
    with open('result.txt', 'w') as fh:
        fh.write(str(math.gcd(a, b)))
    sum(range(30000))
    with open('result.txt') as fh:
        return int(fh.read())
"""
WRONG = "def gcd(a, b):\n    return 1\n"

EPERM, EACCES = 1, 13
ATTACKS = ("memory", "ptrace", "signal", "write")


def on_template(kind: str, *, as_root: bool) -> str:
    """What the daemon's attacks on the template (pid 1) ended in: (1, kind, errno) each."""
    if kind == "write":
        return "[]"
    if kind == "signal":
        # Another uid may not signal it. Its own uid may, but pid 1 drops the
        # signals sent from inside its namespace that it has no handler for.
        return f"[(1, 'signal', {EPERM if as_root else 0})]"
    return f"[(1, '{kind}', {EPERM if kind == 'ptrace' else EACCES})]"


def attack(kind: str) -> str:
    return DAEMON.replace("KIND", repr(kind))


@pytest.fixture
def pool() -> Iterator[SandboxPool]:
    """A pool of its own, holding one warm sandbox: every answer runs in the same one."""
    own = SandboxPool(idle_per_key=1)
    yield own
    own.close()


def judge(code: str, pool: SandboxPool) -> tuple[bool, str, str]:
    # A generous limit: the time limit is not what these tests are about, and the
    # suite loads the machine.
    verdict = check_answer(GCD, code, examples=20, timeout=15.0, mode="bwrap", warm=pool)
    return verdict.passed, verdict.status, verdict.reason


@pytest.mark.parametrize("kind", ATTACKS)
def test_a_daemon_cannot_reach_the_next_answer(kind: str, pool: SandboxPool) -> None:
    passed, status, reason = judge(attack(kind), pool)
    assert (passed, status) == (False, "failed")
    # The daemon ran and attacked until its answer ended (it overwrote its own result).
    assert reason.startswith("gcd(12, 18) returned "), reason
    assert "daemon ran; own result.txt reads " in reason
    if kind == "write":
        assert "reads 1;" in reason
    assert f"on pid 1: {on_template(kind, as_root=os.geteuid() == 0)}" in reason
    assert judge(RIGHT, pool) == (True, "passed", "passed 25 cases")
    assert judge(WRONG, pool)[:2] == (False, "failed")
    assert judge(RIGHT, pool)[0]
    assert pool.started == 1  # all in the one warm sandbox


def test_the_memory_attack_works_on_an_unprotected_process(tmp_path: Path) -> None:
    # The same write, from a forked child into its (dumpable, same-uid) parent.
    victim = (
        "import math, os\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    with open('/proc/%d/mem' % os.getppid(), 'r+b', buffering=0) as fh:\n"
        "        fh.seek(id(6) + 24)\n"
        "        fh.write((1).to_bytes(4, 'little'))\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print(math.gcd(12, 18))\n"
    )
    proc = subprocess.run([sys.executable, "-c", victim], capture_output=True, text=True)
    assert proc.stdout.strip() == "1", proc.stderr


# Reports what a fresh answer finds around it.
PROBE = """
import os, signal, sys

def probe():
    fds = 0
    for fd in range(3, 64):
        try:
            os.fstat(fd)
            fds += 1
        except OSError:
            pass
    umask = os.umask(0o022)
    return {
        'cwd': sorted(os.listdir('.')),
        'tmp': len(os.listdir('/tmp')),
        'shm': sorted(os.listdir('/dev/shm')),
        'umask': umask,
        'env': sorted(k for k in os.environ if k.startswith('EVIL')),
        'math': __import__('math').gcd(12, 18),
        'modules': 'evil' in sys.modules,
        'signals': [signal.getsignal(s) == signal.SIG_DFL
                    for s in (signal.SIGALRM, signal.SIGTERM, signal.SIGUSR1)],
        'sigint': signal.getsignal(signal.SIGINT) is signal.default_int_handler,
        'timer': signal.getitimer(signal.ITIMER_REAL),
        'fds': fds,
        'processes': len([e for e in os.listdir('/proc') if e.isdigit()]),
        'sysv': [len(open(p).read().splitlines()) for p in
                 ('/proc/sysvipc/shm', '/proc/sysvipc/sem', '/proc/sysvipc/msg')],
    }
"""

# Changes everything a process can change about itself and its sandbox.
MESS = """
import builtins, os, signal, sys, time, types

def mess():
    fake = types.ModuleType('math')
    fake.gcd = lambda a, b: 1
    sys.modules['math'] = fake
    sys.modules['evil'] = fake
    builtins.sorted = lambda *a, **k: ['patched']
    signal.signal(signal.SIGALRM, lambda *a: os._exit(3))
    signal.setitimer(signal.ITIMER_REAL, 30, 0.05)  # armed, and never due while it runs
    for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    os.environ['EVIL'] = '1'
    for folder in ('/tmp', '/dev/shm', '.'):
        with open(os.path.join(folder, 'left-behind'), 'w') as fh:
            fh.write('x')
    os.mkfifo('/tmp/fifo')
    path = '/tmp/deep'
    os.mkdir(path)
    for _ in range(50):
        path += '/d'
        os.mkdir(path)
    os.chmod('/tmp/deep/d/d', 0)
    keep = [os.open('/dev/null', os.O_RDONLY) for _ in range(20)]
    os.umask(0o777)
    os.chmod('.', 0)
    if os.fork() == 0:
        os.setsid()
        time.sleep(60)
    return len(keep)
"""

# A SysV shared-memory segment: the template cannot remove it, so the sandbox goes.
SYSV = """
import ctypes

def leave():
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.shmget(0, 4096, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
"""


def call(code: str, entry: str, pool: SandboxPool | bool) -> Any:
    with Sandbox(code, entry, mode="bwrap", warm=pool) as box:
        assert box.ready() is None
        ok, value = box.call(())
    assert ok, value
    return value


def test_nothing_an_answer_changes_reaches_the_next(pool: SandboxPool) -> None:
    before = call(PROBE, "probe", pool)
    assert call(MESS, "mess", pool) == 20
    after = call(PROBE, "probe", pool)
    assert after == before
    assert before["cwd"] == []
    assert before["math"] == 6
    assert before["processes"] == 2  # the template and the answer
    assert pool.started == 1
    # A fresh sandbox of its own sees the same, but its worker's fds and processes.
    fresh = call(PROBE, "probe", False)
    own = ("tmp", "fds", "processes")  # its cwd is /tmp itself; its worker is bwrap's child
    assert {k: v for k, v in fresh.items() if k not in own} == {
        k: v for k, v in before.items() if k not in own
    }


def test_what_the_template_cannot_clean_ends_the_sandbox(pool: SandboxPool) -> None:
    assert call(SYSV, "leave", pool) >= 0
    assert pool.started == 1
    after = call(PROBE, "probe", pool)
    assert pool.started == 2  # a new sandbox: the segment went with the old one
    assert after["sysv"] == [1, 1, 1]  # headers only


def test_a_failing_clean_up_is_an_error_and_the_sandbox_is_not_reused(
    pool: SandboxPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: WarmSandbox, answer: int, uid: int | None) -> str | None:
        raise RuntimeError("lost track of the answer")

    monkeypatch.setattr(WarmSandbox, "end", broken)
    passed, status, reason = judge(RIGHT, pool)
    assert (passed, status) == (False, "error")
    assert "cleaning up after the answer failed: RuntimeError: lost track of the answer" in reason
    monkeypatch.undo()
    assert judge(RIGHT, pool)[0]
    assert pool.started == 2  # the sandbox whose answer was not ended is gone


# Outside its own tmpfs an answer can write nothing: the root and /dev tmpfs
# that bwrap builds are read-only (not root, the answer would own them).
WRITE_PROBE = """
import os

def probe():
    seen = {}
    for folder in ('/', '/etc', '/usr', '/usr/lib', '/dev', '/tmp', '/dev/shm'):
        try:
            with open(os.path.join(folder, 'planted'), 'w') as fh:
                fh.write('x')
            os.unlink(os.path.join(folder, 'planted'))
            seen[folder] = 'written'
        except OSError as exc:
            seen[folder] = type(exc).__name__
    return seen
"""
WRITABLE = {"/tmp", "/dev/shm"}


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "fresh"])
def test_only_the_answers_tmpfs_take_writes(warm: bool) -> None:
    seen = call(WRITE_PROBE, "probe", warm)
    assert {k for k, v in seen.items() if v == "written"} == WRITABLE, seen


# The fresh sandbox (warm=False, and where no warm one can be had) still holds.
FRESH_HOSTILE = {
    "os-exit-at-load": ("import os\nos._exit(0)\n", "error", "exited with status 0"),
    "patch-builtins": (
        "import builtins\nbuiltins.isinstance = lambda *a: True\n" + WRONG,
        "error",
        "exited with status 1",
    ),
    "daemon": (
        "import os, time\ndef gcd(a, b):\n    if os.fork() == 0:\n        os.setsid()\n"
        "        time.sleep(60)\n    return 1\n",
        "failed",
        "returned 1",
    ),
}


@pytest.mark.parametrize("name", sorted(FRESH_HOSTILE))
def test_the_fresh_sandbox_still_holds(name: str) -> None:
    code, status, reason = FRESH_HOSTILE[name]
    verdict = check_answer(GCD, code, timeout=3.0, examples=5, mode="bwrap", warm=False)
    assert (verdict.passed, verdict.status) == (False, status)
    assert reason in verdict.reason


# The cross-answer attacks again, as an unprivileged user (created by root here):
# the template then shares the answers' uid and only its own protection holds.
NONROOT_SCRIPT = """
import json, sys
from pytest_specdecode.coding import builtin_problems, check_answer, sandbox_mode
from pytest_specdecode.coding.sandbox import Sandbox
from pytest_specdecode.coding.warm import SandboxPool

args = json.loads(sys.argv[1])
gcd = next(p for p in builtin_problems() if p.name == "gcd")
out = {"mode": sandbox_mode(), "runs": {}}
if out["mode"] == "bwrap":
    for kind, code in args["attacks"].items():
        pool = SandboxPool(idle_per_key=1)
        runs = []
        for answer in [code, args["right"], args["wrong"]]:
            # No answer here runs into its limit: 30 s is one no load reaches (at 3 s a
            # loaded machine timed the memory attack out before it failed).
            v = check_answer(gcd, answer, examples=20, timeout=30.0, mode="bwrap", warm=pool)
            runs.append([v.passed, v.status, v.reason])
        out["runs"][kind] = [runs, pool.started, pool.unavailable]
        pool.close()
    with Sandbox(args["write_probe"], "probe", mode="bwrap") as box:
        box.ready()
        out["writes"] = box.call(())
print(json.dumps(out))
"""


@pytest.fixture
def readable() -> Iterator[Path]:
    """A directory any user can enter (tmp_path's parents are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="specdecode-warm-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
def test_the_attacks_as_an_unprivileged_user(tmp_path: Path, readable: Path) -> None:
    uid, python = unprivileged.user()
    source = unprivileged.import_path(readable)
    tmp_path.chmod(0o777)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(source), "HOME": str(tmp_path)}
    env["TMPDIR"] = str(tmp_path)
    args = {"attacks": {k: attack(k) for k in ATTACKS}, "right": RIGHT, "wrong": WRONG}
    args["write_probe"] = WRITE_PROBE
    out = unprivileged.run_as(uid, python, NONROOT_SCRIPT, args, env)
    if out["mode"] != "bwrap":
        pytest.skip(f"bubblewrap does not work for uid {uid} here")
    for kind, (runs, started, unavailable) in out["runs"].items():
        (a_passed, a_status, a_reason), right, wrong = runs
        assert (a_passed, a_status) == (False, "failed"), (kind, a_reason)
        assert "daemon ran" in a_reason, (kind, a_reason)
        assert f"on pid 1: {on_template(kind, as_root=False)}" in a_reason, (kind, a_reason)
        assert right == [True, "passed", "passed 25 cases"], kind
        assert wrong[:2] == [False, "failed"], kind
        assert (started, unavailable) == (1, None), kind
    ok, seen = out["writes"]
    assert ok
    assert {k for k, v in seen.items() if v == "written"} == WRITABLE, seen


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        stat = fh.read()
    return stat[stat.rfind(b")") + 2 :].split()[0].decode()


@needs_bwrap
def test_a_dead_sandbox_keeps_its_pid_until_it_is_closed(pool: SandboxPool) -> None:
    # Reaping bwrap while asking whether it is alive freed its pid: closing the sandbox
    # then killed the process group of whatever took that number (another run's sandbox).
    with Sandbox(RIGHT, "gcd", mode="bwrap", warm=pool) as box:
        warm = box.warm
        assert box.ready() is None
    assert warm is not None
    os.kill(warm.proc.pid, signal.SIGKILL)
    assert peek_exit(warm.proc, timeout=10.0) == -signal.SIGKILL
    assert not warm.alive()
    assert _state(warm.proc.pid) == "Z"  # a zombie still holds the pid (and group id)
    assert warm.proc.returncode is None
    assert call(PROBE, "probe", pool)["math"] == 6  # the pool starts a new one, closing it
    assert warm.proc.returncode == -signal.SIGKILL
    assert pool.started == 2
