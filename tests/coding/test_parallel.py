"""Checking in parallel: how many at once, the samples' pipeline, and what stays per check."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

import pytest_specdecode.coding.runner as runner_module
from pytest_specdecode.client.sglang import ChatResult
from pytest_specdecode.coding import Problem, Verdict, builtin_problems, check_reply
from pytest_specdecode.coding.parallel import Checker, check_workers, usable_cores
from pytest_specdecode.coding.runner import CodingRunner
from pytest_specdecode.config.settings import Settings, resolve
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.records import RECORD
from pytest_specdecode.report.model import Report
from pytest_specdecode.report.summary import render
from pytest_specdecode.server import Server

GCD = next(p for p in builtin_problems() if p.name == "gcd")
RIGHT = "```python\nimport math\ndef gcd(a, b):\n    return math.gcd(a, b)\n```"
WAIT = 10.0  # generous bound on waiting for an event that must come


def test_check_workers_default_to_the_cores_shared_among_xdist_workers() -> None:
    cores = usable_cores()
    assert check_workers(environ={}) == cores
    assert check_workers(environ={"PYTEST_XDIST_WORKER_COUNT": "2"}) == max(1, cores // 2)
    assert check_workers(environ={"PYTEST_XDIST_WORKER_COUNT": str(cores * 4)}) == 1
    assert check_workers(3, environ={"PYTEST_XDIST_WORKER_COUNT": "8"}) == 3


@pytest.mark.parametrize(
    ("args", "ini", "expected"),
    [([], "", None), (["--dflash-check-workers", "3"], "", 3), ([], "dflash_check_workers = 5", 5)],
)
def test_the_option_and_ini_key(
    pytester: pytest.Pytester, args: list[str], ini: str, expected: int | None
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    assert resolve(pytester.parseconfig(*args), environ={}).check_workers == expected


def test_a_bad_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--dflash-check-workers", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    pytester.makeini("[pytest]\ndflash_check_workers = many\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *'many'*dflash_check_workers*"])


@dataclass
class PipelineClient:
    """Counts the answers it has sent (``sent[k]`` is set once answer k is out)."""

    sent: list[threading.Event]
    asked: int = 0

    def chat(self, messages: Any, **kwargs: Any) -> ChatResult:
        self.sent[self.asked].set()
        self.asked += 1
        return ChatResult(RIGHT, 10, 5, "stop", 0.0, 0.25, spec_verify_ct=4)


@dataclass
class FakeService:
    client: PipelineClient
    config: SpecConfig = field(default_factory=lambda: SpecConfig(budget=8))
    server_info: dict[str, Any] = field(default_factory=dict)

    def changed(self) -> str | None:
        return None  # the server of the gate throughout


@dataclass
class FakeItem:
    user_properties: list[tuple[str, object]] = field(default_factory=list)


class StepClock:
    """Each reading is one second later: the times the runner records are countable."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_samples_are_checked_while_the_next_is_generated(monkeypatch: pytest.MonkeyPatch) -> None:
    samples = 4
    sent = [threading.Event() for _ in range(samples)]
    lock = threading.Lock()
    judged: list[int] = []
    real = check_reply

    def judge(problem: Problem, reply: str, **kwargs: Any) -> Verdict:
        # Check k finishes only once answer k+1 was asked for: checking one answer
        # one at a time after the other (no pipeline) would wait here in vain.
        with lock:
            k = len(judged)
            judged.append(k)
        if k + 1 < samples:
            assert sent[k + 1].wait(WAIT), f"answer {k + 1} was not asked while {k} was checked"
        return real(problem, reply, **kwargs)

    monkeypatch.setattr(runner_module, "check_reply", judge)
    item = FakeItem()
    with Checker(2) as checker:
        runner = CodingRunner(
            Settings(samples=samples, temperature=0.7),
            cast(Server, FakeService(PipelineClient(sent))),
            cast(pytest.Item, item),
            checker=checker,
            clock=StepClock(),
        )
        verdicts = runner.check(GCD)
    assert [v.passed for v in verdicts] == [True] * samples
    record = cast(dict[str, Any], dict(item.user_properties)[RECORD])
    assert (record["samples"], record["correct"]) == (samples, samples)
    assert record["generate_seconds"] == float(samples)  # one clock step per request
    assert record["check_seconds"] == pytest.approx(sum(v.duration for v in verdicts), abs=1e-3)
    assert dict(item.user_properties)["check_seconds"] == record["check_seconds"]


# Checks that draw their inputs from the global `random`, and answers right
# except on about one input in seven: which input fails first depends on the
# whole sequence drawn so far.
ROULETTE = {
    "HumanEval_38": "def decode_cyclic(s):\n"
    "    return encode_cyclic(encode_cyclic(s)) if len(s) % 7 else ''\n",
    "HumanEval_50": "def decode_shift(s):\n"
    "    out = ''.join(chr((ord(c) - 5 - ord('a')) % 26 + ord('a')) for c in s)\n"
    "    return out if len(s) % 7 else ''\n",
    "HumanEval_53": "def add(x, y):\n    return x + y if (x + y) % 7 else -1\n",
}


def test_checks_in_threads_draw_their_own_seeded_random() -> None:
    from pytest_specdecode.coding import load_humaneval

    try:
        problems = {p.name: p for p in load_humaneval() if p.name in ROULETTE}
    except Exception as exc:  # the humaneval extra is optional
        pytest.skip(str(exc))
    answers = [(problems[name], code) for name, code in ROULETTE.items()]
    sequential = [check_reply(p, reply).reason for p, reply in answers]
    assert all(r.startswith("check failed at `assert candidate(") for r in sequential), sequential
    state = random.getstate()
    with Checker(4) as checker:
        parallel = [v.reason for v in checker.map(answers * 4)]
    assert random.getstate() == state  # the test process's own random was not touched
    assert parallel == sequential * 4


def test_the_summary_shows_generating_and_checking_time() -> None:
    coding = [
        {"problem": "gcd", "passed": True, "samples": 10, "correct": 10, "status": "passed",
         "reason": "", "generate_seconds": 20.5, "check_seconds": 1.25},
        {"problem": "fib", "passed": True, "samples": 10, "correct": 10, "status": "passed",
         "reason": "", "generate_seconds": 19.0, "check_seconds": 1.0},
    ]  # fmt: skip
    report = {"configs": [{"label": "DFLASH budget=8", "config": {}, "coding": coding}]}
    assert (
        "coding time under DFLASH budget=8: generating 39.5 s, checking 2.2 s (20 answers; "
        "checks run in parallel with generation)"
    ) in render(Report.from_dict(report))


def test_the_side_by_side_benchmark_fails_above_its_ratio() -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "check_vs_humaneval.py"
    spec = importlib.util.spec_from_file_location("check_vs_humaneval", path)
    assert spec is not None
    assert spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.verdict([3.0, 2.0, 9.0], [2.0, 2.0, 2.0], 1.5) == (1.5, [])
    ratio, failures = bench.verdict([3.1, 3.2, 1.0], [2.0, 2.0, 2.0], 1.5)
    assert ratio == pytest.approx(1.55)
    assert failures == ["ratio 1.55 exceeds 1.5"]


def test_an_answer_whose_check_ran_into_its_limit_is_checked_once_more_with_double_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    limits: list[float] = []

    def judge(problem: Problem, reply: str, **kwargs: Any) -> Verdict:
        # The first check of each answer runs into its limit (a busy machine), the second
        # judges it: only a second timeout would make it the model's failure.
        limits.append(kwargs["timeout"])
        if len(limits) <= 2:
            return Verdict(False, "timeout", "gcd did not return within the limit", duration=1.0)
        return Verdict(True, "passed", "ok", duration=0.5)

    monkeypatch.setattr(runner_module, "check_reply", judge)
    item = FakeItem()
    sent = [threading.Event() for _ in range(2)]
    with Checker(1) as checker:
        runner = CodingRunner(
            Settings(samples=2, temperature=0.7, answer_timeout=3.0),
            cast(Server, FakeService(PipelineClient(sent))),
            cast(pytest.Item, item),
            checker=checker,
        )
        verdicts = runner.check(GCD)
    assert [v.passed for v in verdicts] == [True, True]
    assert limits == [3.0, 3.0, 6.0, 6.0]
    record = cast(dict[str, Any], dict(item.user_properties)[RECORD])
    assert (record["correct"], record["rechecked"]) == (2, 2)
    assert record["check_seconds"] == 3.0  # both checks of both answers


def test_a_second_timeout_is_the_answers_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    def judge(problem: Problem, reply: str, **kwargs: Any) -> Verdict:
        return Verdict(False, "timeout", "gcd did not return within the limit")

    monkeypatch.setattr(runner_module, "check_reply", judge)
    item = FakeItem()
    with Checker(1) as checker:
        runner = CodingRunner(
            Settings(),
            cast(Server, FakeService(PipelineClient([threading.Event()]))),
            cast(pytest.Item, item),
            checker=checker,
        )
        with pytest.raises(pytest.fail.Exception, match="timeout"):
            runner.check(GCD)
    record = cast(dict[str, Any], dict(item.user_properties)[RECORD])
    assert (record["passed"], record["status"], record["rechecked"]) == (False, "timeout", 1)
