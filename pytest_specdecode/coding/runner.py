"""Asking the model a coding problem and judging the answer, for one test item.

The problem set is resolved once per run (built-ins or HumanEval, TOML files,
and ``pytest_dflash_problems`` hooks in conftest). :class:`CodingRunner` is
what the ``dflash_coding`` fixture hands a test: it asks through chat or plain
completions, checks each answer in the sandbox, attaches the verdict,
latency, tokens and accept length to the test's ``user_properties`` (so they
reach the summary, the gate and JUnit XML), and fails the test with the
verdict's one-line reason.

With ``--dflash-samples N`` the answers are a pipeline: each is handed to the
session's :class:`~pytest_specdecode.coding.parallel.Checker` as soon as it
arrives and checked (on up to ``--dflash-check-workers`` cores) while the next
one is generated; the test waits for all N verdicts at the end. Pytest runs
one test at a time, so that is where parallel checking fits: the samples of a
problem (and, with pytest-xdist, the problems of different workers). The
record carries the time spent generating (the requests) and checking (the
verdicts' durations, summed).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

import pytest

from pytest_specdecode.client.sglang import ChatResult, SGLangError
from pytest_specdecode.coding import (
    Problem,
    Verdict,
    builtin_problems,
    check_reply,
    load_humaneval,
    load_problems_toml,
)
from pytest_specdecode.coding.parallel import Checker
from pytest_specdecode.coding.problem import validate_problem
from pytest_specdecode.coding.values import one_line, reply_start
from pytest_specdecode.coding.worker import describe
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.records import RECORD
from pytest_specdecode.replies import DraftBounds, ImplausibleReply
from pytest_specdecode.replies import check as check_plausible
from pytest_specdecode.server import Server

SYSTEM_PROMPT = (
    "You are an expert Python programmer. Answer with one complete, self-contained "
    "Python function in a fenced ```python code block."
)

# SGLang's extension: per-request verify steps, so accept length is per answer.
SPEC_DETAILS = {"return_spec_tokens_details": True}

# A failed answer's reply is kept in the report up to this many characters.
KEPT_REPLY = 16_000

# A record's figures, each also a user property of its own (JUnit XML shows them).
FIGURES = ("latency", "completion_tokens", "accept_length", "generate_seconds", "check_seconds")

# --dflash-sandbox value -> the sandbox mode answers are checked in.
SANDBOX_MODES = {"auto": "auto", "require": "bwrap", "fallback": "fallback"}


def load_problems(settings: Settings, config: pytest.Config) -> list[Problem]:
    """Every problem of this run; ``ValueError`` (one line) on a bad source or duplicate."""
    problems = load_humaneval() if settings.dataset == "humaneval" else builtin_problems()
    for path in settings.problem_files:
        # Absolute: the sandbox hides the file from the candidate by its path.
        problems += load_problems_toml(os.path.abspath(path))
    for extra in config.hook.pytest_dflash_problems(config=config):
        problems += list(extra or ())
    seen: set[str] = set()
    for problem in problems:
        if not isinstance(problem, Problem):
            raise ValueError(
                f"pytest_dflash_problems returned {problem!r}; return "
                "pytest_specdecode.coding.Problem objects"
            )
        if problem.name in seen:
            raise ValueError(
                f"two coding problems are named {problem.name!r} ({problem.source}); "
                "rename one: names are test ids"
            )
        seen.add(problem.name)
        # A problem that cannot judge (no cases, or a reference that raises on
        # them) would pass garbage and fail correct answers: refuse it here.
        validate_problem(problem)
    return problems


_CHECKER_KEY = pytest.StashKey[Checker]()
_CHECKERS: dict[int, Checker] = {}
_CHECKERS_LOCK = threading.Lock()


def shared_checker(workers: int | None = None) -> Checker:
    """The process's checker with ``workers`` threads (default: all cores for this worker)."""
    with _CHECKERS_LOCK:
        key = workers or 0
        if key not in _CHECKERS:
            _CHECKERS[key] = Checker(workers)
        return _CHECKERS[key]


def session_checker(config: pytest.Config, settings: Settings) -> Checker:
    """The run's checker; closed, with the warm sandboxes, when pytest unconfigures."""
    if _CHECKER_KEY not in config.stash:
        config.stash[_CHECKER_KEY] = shared_checker(settings.check_workers)
        config.add_cleanup(close_checking)
    return config.stash[_CHECKER_KEY]


def close_checking() -> None:
    """Stop the checkers' threads and end the idle warm sandboxes (idempotent).

    An answer still being judged here was abandoned (the run was interrupted):
    it is stopped now, not left to run to its time limit.
    """
    from pytest_specdecode.coding.inflight import abort_all
    from pytest_specdecode.coding.warm import default_pool

    abort_all()
    with _CHECKERS_LOCK:
        checkers = list(_CHECKERS.values())
        _CHECKERS.clear()
    for checker in checkers:
        checker.close()
    default_pool().close()


class CodingRunner:
    """Asks ``settings.samples`` answers to one problem and judges them."""

    def __init__(
        self,
        settings: Settings,
        service: Server,
        node: pytest.Item,
        *,
        checker: Checker | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.service = service
        self.node = node
        self.checker = checker or shared_checker(settings.check_workers)
        self.clock = clock
        # --dflash-sandbox: require means bubblewrap or an error verdict, never the fallback.
        self.mode = SANDBOX_MODES[settings.sandbox]

    def ask(self, problem: Problem) -> tuple[str, ChatResult]:
        """One answer: (the text to check, the server's result)."""
        s = self.settings
        client = self.service.client
        if s.api == "completions":
            prompt = problem.completion_prompt or problem.prompt
            result = client.completions(
                prompt, max_tokens=s.max_tokens, temperature=s.temperature, extra=SPEC_DETAILS
            )
            # A completion continues the prompt: for HumanEval the function header.
            text = prompt + result.text if problem.completion_prompt else result.text
            return text, result
        user = s.prompt_template.replace("{prompt}", problem.prompt)
        messages = [
            {"role": "system", "content": s.system_prompt or SYSTEM_PROMPT},
            {"role": "user", "content": user},
        ]
        result = client.chat(
            messages, max_tokens=s.max_tokens, temperature=s.temperature, extra=SPEC_DETAILS
        )
        return result.text, result

    def plausible(self, result: ChatResult) -> None:
        """Raise ``ImplausibleReply`` unless the config's server could have sent ``result``."""
        service = self.service
        bounds = DraftBounds.of(service.config, service.server_info)
        check_plausible(result, self.settings.max_tokens, bounds)

    def _judge(self, problem: Problem, reply: str, timeout: float) -> Future[Verdict]:
        """The verdict on ``reply``, judged on the checker's threads (``check_reply`` is
        looked up at each call: it is this module's name)."""
        return self.checker.submit(
            problem, reply, judge=check_reply, timeout=timeout, mode=self.mode
        )

    def _recheck_timeouts(
        self, problem: Problem, replies: list[str], verdicts: list[Verdict]
    ) -> tuple[list[Verdict], int]:
        """Check once more, with the time limit doubled, each answer whose check ran into
        its limit: on a busy machine a right answer can be slow to judge, and only a
        second timeout makes it the model's failure. Returns the verdicts and how many
        were checked again."""
        again = {
            i: self._judge(problem, replies[i], 2 * self.settings.answer_timeout)
            for i, v in enumerate(verdicts)
            if v.status == "timeout"
        }
        done = []
        for i, v in enumerate(verdicts):
            if i not in again:
                done.append(v)
                continue
            second = again[i].result()
            reason = second.reason
            if second.status == "timeout":
                reason += f" (checked twice: first within {self.settings.answer_timeout:g} s)"
            done.append(replace(second, duration=v.duration + second.duration, reason=reason))
        return done, len(again)

    def check(self, problem: Problem) -> list[Verdict]:
        """Ask, judge every sample, record; fail the test unless all samples pass.

        The record is written whatever happens (``finally``): it starts as a
        failure of every sample and only the samples judged to pass count as
        correct, so no answer can take its problem out of the pass rate.
        """
        label = self.service.config.label()
        n = self.settings.samples
        verdicts: list[Verdict] = []
        pending: list[Future[Verdict]] = []
        replies: list[str] = []
        latency = tokens = generating = 0.0
        steps = 0
        failure: str | None = None
        record: dict[str, Any] = {
            "problem": problem.name,
            "passed": False,
            "status": "error",
            "reason": "judging the answer did not finish",
            "samples": n,
            "correct": 0,
            **dict.fromkeys(FIGURES),
            "rechecked": 0,
        }
        try:
            for _ in range(n):
                start = self.clock()
                try:
                    reply, result = self.ask(problem)
                    self.plausible(result)
                except (SGLangError, ImplausibleReply) as exc:
                    failure = f"{label}: asking {problem.name!r} failed: {one_line(str(exc))}"
                    break
                finally:
                    generating += self.clock() - start
                # Checked while the next sample is generated.
                pending.append(self._judge(problem, reply, self.settings.answer_timeout))
                replies.append(reply)
                latency += result.e2e_latency
                tokens += result.completion_tokens or 0
                steps += result.spec_verify_ct or 0
            verdicts = [future.result() for future in pending]
            verdicts, rechecked = self._recheck_timeouts(problem, replies, verdicts)
            record["rechecked"] = rechecked
            # Every failed answer keeps its reply: the evidence of its verdict.
            record["failed_answers"] = [
                {
                    "sample": i + 1,
                    "status": v.status,
                    "reason": v.reason,
                    "reply": replies[i][:KEPT_REPLY],
                    "reply_characters": len(replies[i]),
                }
                for i, v in enumerate(verdicts)
                if not v.passed
            ]
            correct = sum(v.passed for v in verdicts)
            first_bad = next((v for v in verdicts if not v.passed), None)
            asked = max(len(verdicts), 1)
            changed = self.service.changed() if failure is None else None
            if changed is not None:
                # Another server's answers: a failure of this config, with no figures.
                failure = changed
                record.update(reason=changed)
            else:
                record.update(
                    passed=failure is None and correct == n,
                    status="error" if failure else (first_bad.status if first_bad else "passed"),
                    reason=failure or (first_bad.reason if first_bad else verdicts[0].reason),
                    correct=correct,
                    latency=round(latency / asked, 4),
                    completion_tokens=int(tokens / asked),
                    accept_length=round(tokens / steps, 3) if steps else None,
                    generate_seconds=round(generating, 4),
                    check_seconds=round(sum(v.duration for v in verdicts), 4),
                )
        except Exception as exc:
            record["reason"] = one_line(f"judging the answer failed: {describe(exc)}")
            raise
        finally:
            self.node.user_properties.append((RECORD, record))
            self.node.user_properties += [(k, record[k]) for k in FIGURES if record[k] is not None]
        if failure is not None:
            pytest.fail(failure, pytrace=False)
        if first_bad is not None:
            shown = f" ({correct}/{n} samples passed)" if n > 1 else ""
            reply = replies[verdicts.index(first_bad)]
            pytest.fail(
                f"{problem.name} under {label}: {first_bad.status}: {first_bad.reason}{shown}; "
                f"the reply starts: {reply_start(reply)}",
                pytrace=False,
            )
        return verdicts
