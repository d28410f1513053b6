"""Asking the model a coding problem and judging the answer, for one test item.

The problem set is resolved once per run (built-ins or HumanEval, TOML files,
and ``pytest_dflash_problems`` hooks in conftest). :class:`CodingRunner` is
what the ``dflash_coding`` fixture hands a test: it asks through chat or plain
completions, checks each answer in the sandbox, attaches the verdict,
latency, tokens and accept length to the test's ``user_properties`` (so they
reach the summary, the gate and JUnit XML), and fails the test with the
verdict's one-line reason.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from pytest_specdecode.client import ChatResult, SGLangError
from pytest_specdecode.coding import (
    Problem,
    Verdict,
    builtin_problems,
    check_reply,
    load_humaneval,
    load_problems_toml,
)
from pytest_specdecode.coding.problem import validate_problem
from pytest_specdecode.coding.values import one_line
from pytest_specdecode.coding.worker import describe
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.records import RECORD
from pytest_specdecode.service.manager import ServiceHandle

SYSTEM_PROMPT = (
    "You are an expert Python programmer. Answer with one complete, self-contained "
    "Python function in a fenced ```python code block."
)

# SGLang's extension: per-request verify steps, so accept length is per answer.
SPEC_DETAILS = {"return_spec_tokens_details": True}

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


class CodingRunner:
    """Asks ``settings.samples`` answers to one problem and judges them."""

    def __init__(self, settings: Settings, service: ServiceHandle, node: pytest.Item) -> None:
        self.settings = settings
        self.service = service
        self.node = node
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

    def check(self, problem: Problem) -> list[Verdict]:
        """Ask, judge every sample, record; fail the test unless all samples pass.

        The record is written whatever happens (``finally``): it starts as a
        failure of every sample and only the samples judged to pass count as
        correct, so no answer can take its problem out of the pass rate.
        """
        label = self.service.config.label()
        n = self.settings.samples
        verdicts: list[Verdict] = []
        latency = tokens = 0.0
        steps = 0
        failure: str | None = None
        record: dict[str, Any] = {
            "problem": problem.name,
            "passed": False,
            "status": "error",
            "reason": "judging the answer did not finish",
            "samples": n,
            "correct": 0,
            "latency": None,
            "completion_tokens": None,
            "accept_length": None,
        }
        try:
            for _ in range(n):
                try:
                    reply, result = self.ask(problem)
                except SGLangError as exc:
                    failure = f"{label}: asking {problem.name!r} failed: {one_line(str(exc))}"
                    break
                verdicts.append(
                    check_reply(
                        problem, reply, timeout=self.settings.answer_timeout, mode=self.mode
                    )
                )
                latency += result.e2e_latency
                tokens += result.completion_tokens or 0
                steps += result.spec_verify_ct or 0
            correct = sum(v.passed for v in verdicts)
            first_bad = next((v for v in verdicts if not v.passed), None)
            asked = max(len(verdicts), 1)
            record.update(
                passed=failure is None and correct == n,
                status="error" if failure else (first_bad.status if first_bad else "passed"),
                reason=failure or (first_bad.reason if first_bad else verdicts[0].reason),
                correct=correct,
                latency=round(latency / asked, 4),
                completion_tokens=int(tokens / asked),
                accept_length=round(tokens / steps, 3) if steps else None,
            )
        except Exception as exc:
            record["reason"] = one_line(f"judging the answer failed: {describe(exc)}")
            raise
        finally:
            self.node.user_properties.append((RECORD, record))
            for key in ("latency", "completion_tokens", "accept_length"):
                if record[key] is not None:
                    self.node.user_properties.append((key, record[key]))
        if failure is not None:
            pytest.fail(failure, pytrace=False)
        if first_bad is not None:
            shown = f" ({correct}/{n} samples passed)" if n > 1 else ""
            pytest.fail(
                f"{problem.name} under {label}: {first_bad.status}: {first_bad.reason}{shown}",
                pytrace=False,
            )
        return verdicts
