"""The one path for shared state: whole files, safe reads, waits with a deadline.

Checked over arbitrary content and schedules (hypothesis): a reader racing any
number of writers (threads and processes) sees a whole file or none; ``write_new``
never replaces a file, also without hard links; ``wait_until`` returns at the first
check that holds and raises at its deadline, never sleeping past it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_specdecode import statefiles

# Big enough that a write is several system calls: a torn file would show.
payloads = st.lists(
    st.tuples(st.integers(0, 255), st.integers(1, 300_000)), min_size=1, max_size=4, unique=True
)
temp_dir = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def blob(byte: int, size: int) -> bytes:
    return bytes([byte]) * size


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@temp_dir
@given(payloads)
def test_a_reader_never_sees_part_of_a_file_while_threads_write(
    tmp_path: Path, written: list[tuple[int, int]]
) -> None:
    folder = tmp_path / os.urandom(6).hex()  # one per example: none sees another's file
    folder.mkdir()
    target = folder / "state.bin"
    whole = {blob(b, n) for b, n in written}
    done = threading.Event()
    seen: list[bytes | None] = []

    def writer(data: bytes) -> None:
        for _ in range(5):
            statefiles.write_bytes(target, data)

    def reader() -> None:
        while not done.is_set():
            try:
                seen.append(target.read_bytes())
            except FileNotFoundError:
                seen.append(None)

    look = threading.Thread(target=reader)
    look.start()
    writers = [threading.Thread(target=writer, args=(blob(b, n),)) for b, n in written]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    look.join()
    torn = [len(s) for s in seen if s is not None and s not in whole]
    assert not torn, f"partial reads of sizes {torn[:5]}"
    assert target.read_bytes() in whole
    assert leftovers(folder) == []


WRITER = """
import sys
from pytest_specdecode import statefiles
path, byte, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for _ in range(40):
    statefiles.write_bytes(path, bytes([byte]) * size)
"""


def test_a_reader_never_sees_part_of_a_file_while_processes_write(tmp_path: Path) -> None:
    target = tmp_path / "state.bin"
    sizes = {1: 1_000_000, 2: 10, 3: 400_000}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(target), str(b), str(n)])
        for b, n in sizes.items()
    ]
    reads = torn = 0
    while any(p.poll() is None for p in procs) or reads == 0:
        try:
            data = target.read_bytes()
        except FileNotFoundError:
            continue
        reads += 1
        if not data or len(data) != sizes.get(data[0]) or data.count(data[0]) != len(data):
            torn += 1
    assert [p.wait() for p in procs] == [0, 0, 0]
    assert torn == 0, f"{torn} of {reads} reads saw part of a file"
    assert leftovers(tmp_path) == []


@temp_dir
@given(st.lists(st.tuples(st.integers(0, 3), st.binary(max_size=64)), max_size=12), st.booleans())
def test_write_new_never_replaces_a_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    writes: list[tuple[int, bytes]],
    no_links: bool,
) -> None:
    folder = tmp_path / os.urandom(6).hex()
    if no_links:  # some network file systems: the exclusive-create path

        def refuse(*args: Any, **kwargs: Any) -> None:
            raise PermissionError("hard links not supported")

        monkeypatch.setattr(os, "link", refuse)
    first: dict[int, bytes] = {}
    for name, data in writes:
        created = statefiles.write_new(folder / f"{name}.json", data)
        assert created == (name not in first)
        first.setdefault(name, data)
    for name, data in first.items():
        assert (folder / f"{name}.json").read_bytes() == data
    if folder.exists():
        assert leftovers(folder) == []


def test_of_writers_racing_for_one_name_exactly_one_wins(tmp_path: Path) -> None:
    target = tmp_path / "report-0001.json"
    won: list[bytes] = []
    start = threading.Barrier(8)

    def claim(data: bytes) -> None:
        start.wait()
        if statefiles.write_new(target, data):
            won.append(data)

    threads = [threading.Thread(target=claim, args=(b"%d" % i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    assert target.read_bytes() == won[0]


@temp_dir
@given(st.one_of(st.binary(max_size=40), st.text(max_size=40).map(str.encode)))
def test_read_json_is_none_unless_the_file_holds_json(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "any.json"
    path.write_bytes(raw)
    try:
        expected = json.loads(raw.decode("utf-8"))
    except ValueError:
        expected = None
    # repr, not ==: Python's parser takes NaN, and NaN != NaN.
    assert repr(statefiles.read_json(path)) == repr(expected)
    assert statefiles.read_json(tmp_path / "missing.json") is None
    assert statefiles.read_text(tmp_path / "missing.json") is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


def nest(value: Any, levels: int) -> tuple[Any, bytes]:
    """``value`` inside ``levels`` more lists and dicts, and its JSON made without
    recursion (``json.dumps`` of 3,000 levels would raise RecursionError itself)."""
    raw = json.dumps(value, separators=(",", ":"))
    for i in range(levels):
        value, raw = ([value], f"[{raw}]") if i % 2 else ({"k": value}, f'{{"k":{raw}}}')
    return value, raw.encode()


@temp_dir
@given(
    value=json_values,
    extra=st.integers(min_value=0, max_value=3000),
    limit=st.integers(0, 400) | st.just(statefiles.MAX_BYTES),
)
def test_the_reader_gives_the_value_or_one_line_naming_the_file(
    tmp_path: Path, value: Any, extra: int, limit: int
) -> None:
    value, raw = nest(value, extra)
    path = tmp_path / "any.json"
    path.write_bytes(raw)
    depth = statefiles.nesting(value, stop=10_000)
    try:
        found = statefiles.load_json(path, limit=limit)
    except statefiles.FileRefused as exc:
        line = str(exc)
        assert line.startswith(f"{str(path)!r}: ")
        assert "\n" not in line
        # Refused exactly when the file is over the size cap or nests past the depth cap.
        if len(raw) > limit:
            assert line.endswith(f"larger than {limit:,} bytes, the most read from one file")
        else:
            assert depth > statefiles.MAX_DEPTH
            assert line.endswith(f"JSON nested deeper than {statefiles.MAX_DEPTH} levels")
    else:
        assert len(raw) <= limit
        assert depth <= statefiles.MAX_DEPTH
        assert found == value
    # With the default size cap only the nesting decides.
    if depth > statefiles.MAX_DEPTH:
        assert statefiles.read_json(path) is None
    else:
        assert statefiles.read_json(path) == value


def test_the_reader_takes_regular_files_only_and_never_blocks(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # no writer: a blocking open would wait forever
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    for path, kind in ((fifo, "a FIFO"), (zero, "a character device"), (tmp_path, "a directory")):
        with pytest.raises(statefiles.FileRefused) as info:
            statefiles.load_bytes(path)
        assert str(info.value) == f"{str(path)!r}: {kind}, not a regular file; give a file"
        assert statefiles.read_json(path) is None
    with pytest.raises(statefiles.FileRefused, match="cannot read: No such file"):
        statefiles.load_text(tmp_path / "missing.json")
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9")
    with pytest.raises(statefiles.FileRefused, match=r"not UTF-8 text \(byte 3\)"):
        statefiles.load_text(tmp_path / "latin.txt")


def test_json_that_cannot_be_written_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "lease.json"
    statefiles.write_json(path, {"live": "A"}, indent=1)
    with pytest.raises(TypeError):
        statefiles.write_json(path, {"live": object()})
    assert statefiles.read_json(path) == {"live": "A"}
    assert path.read_text().endswith("\n")
    assert leftovers(tmp_path) == []


def test_files_get_the_umask_permissions_and_copies_are_whole(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        statefiles.write_text(tmp_path / "deep" / "page.html", "<p>é</p>")
    finally:
        os.umask(old)
    page = tmp_path / "deep" / "page.html"
    assert page.stat().st_mode & 0o777 == 0o640
    statefiles.copy(page, tmp_path / "copy.html")
    assert (tmp_path / "copy.html").read_text(encoding="utf-8") == "<p>é</p>"
    with pytest.raises(FileNotFoundError):
        statefiles.copy(tmp_path / "missing", tmp_path / "copy.html")
    assert (tmp_path / "copy.html").read_text(encoding="utf-8") == "<p>é</p>"
    assert leftovers(tmp_path) == []


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.slept.append(seconds)
        self.now += seconds


@given(
    holds_at=st.integers(1, 60),
    timeout=st.floats(0, 5, allow_nan=False),
    poll=st.floats(0.01, 1, allow_nan=False),
)
def test_wait_returns_at_the_first_check_that_holds_and_raises_at_the_deadline(
    holds_at: int, timeout: float, poll: float
) -> None:
    clock = FakeClock()
    checks: list[float] = []

    def condition() -> str | None:
        checks.append(clock.now)
        return "ready" if len(checks) >= holds_at else None

    failure: statefiles.WaitTimeout | None = None
    result: str | None = None
    try:
        result = statefiles.wait_until(
            condition, timeout=timeout, what="the thing", poll=poll, clock=clock, sleep=clock.sleep
        )
    except statefiles.WaitTimeout as exc:
        failure = exc
    if failure is not None:
        # It gave up only at the deadline, not before, and slept nowhere past it.
        assert len(checks) < holds_at
        assert clock.now == pytest.approx(100.0 + timeout)
        assert checks[-1] == pytest.approx(100.0 + timeout)
        assert str(failure) == f"the thing: not done within {timeout:g} s"
    else:
        assert result == "ready"
        assert len(checks) == holds_at  # no check after it held
        assert len(clock.slept) == holds_at - 1  # no sleep after it held
        assert clock.now <= 100.0 + timeout + 1e-9
    assert all(s <= poll + 1e-12 for s in clock.slept)


def test_an_untimed_wait_starts_its_deadline_again() -> None:
    clock = FakeClock()
    blocked = iter([True, True, False, True, True, True, True, True])
    state = {"blocked": True}

    def condition() -> None:
        state["blocked"] = next(blocked)

    with pytest.raises(statefiles.WaitTimeout, match="switch: not done within 2 s"):
        statefiles.wait_until(
            condition,
            timeout=2,
            what=lambda: "switch",
            poll=1,
            clock=clock,
            sleep=clock.sleep,
            timed=lambda: state["blocked"],
        )
    # Two seconds blocked, then not (the clock starts again at 102), then two more.
    assert clock.now == 104.0


def test_a_condition_that_raises_ends_the_wait() -> None:
    clock = FakeClock()

    def condition() -> None:
        raise LookupError("moved")

    with pytest.raises(LookupError, match="moved"):
        statefiles.wait_until(condition, timeout=10, what="x", clock=clock, sleep=clock.sleep)
    assert clock.slept == []
