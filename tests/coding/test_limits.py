"""Limits hold per answer, not per process: memory (cgroup), disk (tmpfs), processes."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_specdecode.coding import builtin_problems, check_answer, sandbox_mode
from pytest_specdecode.coding.cgroup import AnswerGroup, hierarchies, parse_hierarchies
from pytest_specdecode.coding.sandbox import Limits

GCD = next(p for p in builtin_problems() if p.name == "gcd")
needs_bwrap = pytest.mark.skipif(sandbox_mode() != "bwrap", reason="bubblewrap not usable here")
needs_cgroup = pytest.mark.skipif(not hierarchies(), reason="no writable memory cgroup here")

# Six children hold 40 MB each at the same time (240 MB), each well under the
# 160 MB limit of one process; the answer is right only if all six held their
# block together (a child killed for memory fails it).
SPLIT_MEMORY = """
import math, os

def gcd(a, b):
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    children = []
    for _ in range(6):
        pid = os.fork()
        if pid == 0:
            os.close(ready_r)
            os.close(hold_w)
            block = b'x' * (40 << 20)
            os.write(ready_w, b'1')
            os.close(ready_w)
            os.read(hold_r, 1)
            os._exit(len(block) & 0)
        children.append(pid)
    os.close(ready_w)
    got = b''
    while len(got) < 6:
        chunk = os.read(ready_r, 6)
        if not chunk:
            break
        got += chunk
    # All six allocated, and all six still hold their block now.
    together = len(got) == 6 and all(os.waitpid(p, os.WNOHANG) == (0, 0) for p in children)
    os.close(hold_w)
    for pid in children:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:  # reaped above: it had died
            pass
    return math.gcd(a, b) if together else -1
"""

# 16 files of 1 MB (each under the 16 MB file limit) against an 8 MB disk.
FILL_DISK = """
import math, os

def gcd(a, b):
    try:
        for i in range(16):
            with open(f'fill-{a}-{b}-{i}', 'wb') as fh:
                fh.write(b'x' * (1 << 20))
    except OSError:
        return -1
    return math.gcd(a, b)
"""


@pytest.fixture
def host_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """The host temp dir answers could write to; must stay empty."""
    folder = tmp_path / "host-tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    assert list(folder.iterdir()) == []


@needs_cgroup
@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=needs_bwrap), "fallback"])
def test_memory_is_limited_for_the_whole_answer(mode: str, host_tmp: Path) -> None:
    limits = Limits(memory_mb=160)
    verdict = check_answer(GCD, SPLIT_MEMORY, examples=1, timeout=20, limits=limits, mode=mode)
    assert not verdict.passed, verdict.reason
    assert "memory limit" in verdict.reason or "returned -1" in verdict.reason


@needs_bwrap
def test_disk_is_limited_for_the_whole_answer(host_tmp: Path) -> None:
    verdict = check_answer(GCD, FILL_DISK, examples=1, limits=Limits(disk_mb=8), mode="bwrap")
    assert verdict.status == "failed"
    assert verdict.reason.startswith("gcd(12, 18) returned -1, expected 6")


V1_CGROUP = "9:name=systemd:/\n8:pids:/\n4:memory:/jobs/42\n0::/\n"
V1_MOUNTS = """\
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V2_CGROUP = "0::/user.slice/user-1000.slice/session-3.scope\n"
V2_MOUNTS = "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
NS_MOUNTS = "30 25 0:26 /outer /mnt/cg rw - cgroup2 cgroup2 rw\n"


def test_parse_hierarchies() -> None:
    v1 = parse_hierarchies(V1_CGROUP, V1_MOUNTS)
    assert [(h.version, h.path, sorted(h.controllers)) for h in v1] == [
        (1, "/sys/fs/cgroup/pids", ["pids"]),
        (1, "/sys/fs/cgroup/memory/jobs/42", ["memory"]),
        (2, "/sys/fs/cgroup/unified", []),
    ]
    (v2,) = parse_hierarchies(V2_CGROUP, V2_MOUNTS)
    assert (v2.version, v2.path) == (2, "/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope")
    (inner,) = parse_hierarchies("0::/outer/job\n", NS_MOUNTS)
    assert inner.path == "/mnt/cg/job"
    assert parse_hierarchies("0::/elsewhere\n", NS_MOUNTS) == []


@needs_cgroup
def test_answer_group_kills_everything_and_goes_away() -> None:
    group = AnswerGroup.create(64 << 20, pids=4)
    assert group is not None
    import subprocess

    proc = subprocess.Popen(["/bin/sh", "-c", "sleep 30 & sleep 30 & wait"], preexec_fn=group.join)
    try:
        while len(group.processes()) < 3:
            pass  # the shell and its two children joined
        group.close()
        assert proc.wait(timeout=5) != 0
        assert all(not os.path.exists(path) for _version, path in group.dirs)
    finally:
        proc.kill()
        proc.wait()
