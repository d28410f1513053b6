"""Whatever goes wrong while judging, showing or cleaning up, the answer is a recorded failure."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

import pytest_specdecode.coding.check as check_module
import pytest_specdecode.coding.runner as runner_module
import pytest_specdecode.coding.sandbox as sandbox_module
from pytest_specdecode.client.sglang import ChatResult
from pytest_specdecode.coding import builtin_problems, check_answer, sandbox_mode
from pytest_specdecode.coding.runner import CodingRunner
from pytest_specdecode.coding.values import printable, same, show
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.records import RECORD
from pytest_specdecode.server import Server

from .test_isolation import running_with

GCD = next(p for p in builtin_problems() if p.name == "gcd")
RIGHT = "import math\ndef gcd(a, b):\n    return math.gcd(a, b)\n"
needs_bwrap = pytest.mark.skipif(sandbox_mode() != "bwrap", reason="bubblewrap not usable here")

DEEP_TREE = """
import os

def _nest():
    for _ in range(DEPTH):
        os.mkdir('d')
        os.chdir('d')
    for _ in range(DEPTH):
        os.chdir('..')
    return 1

_ = _nest()

def gcd(a, b):
    return 1
"""


@pytest.fixture
def answers_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "answers"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=needs_bwrap), "fallback"])
def test_a_deep_tree_is_judged_and_removed(mode: str, answers_dir: Path) -> None:
    # shutil.rmtree raised RecursionError beyond ~1000 levels: the result was lost, the
    # tree left. 1200 is enough to show it (the plugin-level test builds 5000, in bwrap).
    code = DEEP_TREE.replace("DEPTH", "1200")
    verdict = check_answer(GCD, code, examples=5, mode=mode)
    assert (verdict.status, verdict.reason) == ("failed", "gcd(12, 18) returned 1, expected 6")


# Loops until stopped, and says it runs: a file in its working directory (the
# fallback's is on the host) and a child found by its token (bwrap: the uid can
# run the interpreter there).
ENDLESS = """
import os, sys, time

def gcd(a, b):
    try:
        open('started', 'w').close()
    except OSError:
        pass
    if os.fork() == 0:
        code = 'import sys, time; time.sleep(float(sys.argv[1]))'
        try:
            os.execv(sys.executable, [sys.executable, '-c', code, TOKEN])
        except OSError:
            time.sleep(600)
    while True:
        pass
"""


@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=needs_bwrap), "fallback"])
def test_an_answer_still_running_when_checking_closes_is_stopped_at_once(
    mode: str, answers_dir: Path
) -> None:
    # An interrupted run (Ctrl-C, SIGTERM) closes checking while an answer runs:
    # closing once waited for the answer's time limit, the answer alive meanwhile.
    token = f"{500 + os.getpid() % 97}.{int.from_bytes(os.urandom(3), 'big'):07d}"
    checker = runner_module.shared_checker(1)
    future = checker.submit(
        GCD, ENDLESS.replace("TOKEN", repr(token)), judge=check_answer, timeout=120, mode=mode
    )
    deadline = time.monotonic() + 20
    while not running_with(token) and not list(answers_dir.glob("*/started")):
        assert not future.done(), future.result()
        assert time.monotonic() < deadline, "the answer never ran"
        time.sleep(0.01)
    start = time.monotonic()
    runner_module.close_checking()
    assert time.monotonic() - start < 60  # half the answer's limit: it was not waited for
    verdict = future.result(timeout=0)
    assert (verdict.passed, verdict.status) == (False, "timeout"), verdict.reason
    assert running_with(token) == []
    # answers_dir: the answer's working directory is gone.


def test_a_failing_clean_up_turns_a_pass_into_an_error(
    answers_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(path: str) -> None:
        raise OSError(39, "Directory not empty", path)

    monkeypatch.setattr(sandbox_module, "remove_tree", broken)
    verdict = check_answer(GCD, RIGHT, examples=5, mode="fallback")
    assert (verdict.passed, verdict.status) == (False, "error")
    assert verdict.reason.startswith(
        "judging the answer failed: SandboxError: cleaning up after the answer failed: "
        "OSError: [Errno 39] Directory not empty"
    )
    for leftover in answers_dir.iterdir():
        leftover.rmdir()


@pytest.mark.parametrize("where", ["_differential", "show_call", "generate_inputs"])
def test_a_harness_failure_is_an_error_verdict(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(check_module, where, broken)
    verdict = check_answer(GCD, RIGHT, examples=5)
    assert (verdict.passed, verdict.status) == (False, "error")
    assert verdict.reason == (
        "judging the answer failed: RecursionError: maximum recursion depth exceeded"
    )


def test_values_that_once_crashed_the_verdict() -> None:
    assert show(10**5000) == "<int of 5001 digits>"
    assert show(-(10**400)) == "<int of 401 digits>"
    assert show(10**76) == str(10**76)
    assert show(1 << 70000).startswith("<int of about 21072 digits>")
    assert not same(0.5, 10**400)
    assert not same(10**400, 0.5)
    assert same(2**60, float(2**60))


def test_printable_neutralises_control_and_format_characters() -> None:
    assert printable("\x1b[2J\x1b]52;c;ZXZpbA==\x07") == r"\x1b[2J\x1b]52;c;ZXZpbA==\x07"
    assert printable("\x9b2J \u202etxt.exe \ud800 é ok") == r"\x9b2J \u202etxt.exe \ud800 é ok"
    assert printable("line\nbreak\r") == r"line\x0abreak\x0d"


@dataclass
class FakeClient:
    reply: str

    def chat(self, messages: Any, **kwargs: Any) -> ChatResult:
        return ChatResult(self.reply, 10, 5, "stop", 0.0, 0.25, spec_verify_ct=4)


@dataclass
class FakeService:
    client: FakeClient
    config: SpecConfig = field(default_factory=lambda: SpecConfig(budget=8))
    server_info: dict[str, Any] = field(default_factory=dict)

    def changed(self) -> str | None:
        return None  # the server of the gate throughout


@dataclass
class FakeItem:
    user_properties: list[tuple[str, object]] = field(default_factory=list)


@pytest.mark.parametrize("error", [RuntimeError("harness bug"), KeyboardInterrupt()])
def test_the_runner_records_a_failure_whatever_happens(
    error: BaseException, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(runner_module, "check_reply", broken)
    item = FakeItem()
    service = FakeService(FakeClient(f"```python\n{RIGHT}```"))
    runner = CodingRunner(
        Settings(samples=3, temperature=0.7),
        cast(Server, service),
        cast(pytest.Item, item),
    )
    with pytest.raises(type(error)):
        runner.check(GCD)
    records = [value for key, value in item.user_properties if key == RECORD]
    assert len(records) == 1
    record = cast(dict[str, Any], records[0])
    assert (record["passed"], record["status"], record["samples"], record["correct"]) == (
        False,
        "error",
        3,
        0,
    )


def test_a_failed_answer_shows_the_start_of_its_reply_and_the_report_keeps_it() -> None:
    # No code, a terminal escape and a line break: shown escaped, cut, its length said.
    reply = "I would rather not.\x1b[2J\n" + "blah " * 371
    item = FakeItem()
    runner = CodingRunner(
        Settings(), cast(Server, FakeService(FakeClient(reply))), cast(pytest.Item, item)
    )
    with pytest.raises(pytest.fail.Exception) as failed:
        runner.check(GCD)
    message = str(failed.value)
    assert "gcd under DFLASH budget=8: no-code: " in message
    assert "the reply starts: 'I would rather not.\\x1b[2J\\nblah blah " in message
    assert message.endswith(f"... ({len(reply):,} characters)")
    assert "\x1b" not in message
    (record,) = [cast(dict[str, Any], v) for k, v in item.user_properties if k == RECORD]
    assert record["failed_answers"] == [
        {
            "sample": 1,
            "status": "no-code",
            "reason": record["reason"],
            "reply": reply,
            "reply_characters": len(reply),
        }
    ]
