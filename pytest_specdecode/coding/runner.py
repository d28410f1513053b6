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
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.records import RECORD
from pytest_specdecode.service.manager import ServiceHandle

SYSTEM_PROMPT = (
    "You are an expert Python programmer. Answer with one complete, self-contained "
    "Python function in a fenced ```python code block."
)

# SGLang's extension: per-request verify steps, so accept length is per answer.
SPEC_DETAILS = {"return_spec_tokens_details": True}


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
    return problems


class CodingRunner:
    """Asks ``settings.samples`` answers to one problem and judges them."""

    def __init__(self, settings: Settings, service: ServiceHandle, node: pytest.Item) -> None:
        self.settings = settings
        self.service = service
        self.node = node

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
        """Ask, judge every sample, record; fail the test unless all samples pass."""
        label = self.service.config.label()
        verdicts: list[Verdict] = []
        latency = tokens = 0.0
        steps = 0
        failure: str | None = None
        for _ in range(self.settings.samples):
            try:
                reply, result = self.ask(problem)
            except SGLangError as exc:
                failure = f"{label}: asking {problem.name!r} failed: {exc}"
                break
            verdicts.append(check_reply(problem, reply, timeout=self.settings.answer_timeout))
            latency += result.e2e_latency
            tokens += result.completion_tokens or 0
            steps += result.spec_verify_ct or 0
        correct = sum(v.passed for v in verdicts)
        first_bad = next((v for v in verdicts if not v.passed), None)
        n = max(len(verdicts), 1)
        record = {
            "problem": problem.name,
            "passed": failure is None and correct == len(verdicts),
            "status": "error" if failure else (first_bad.status if first_bad else "passed"),
            "reason": failure or (first_bad.reason if first_bad else verdicts[0].reason),
            "samples": n,
            "correct": correct,
            "latency": round(latency / n, 4),
            "completion_tokens": int(tokens / n),
            "accept_length": round(tokens / steps, 3) if steps else None,
        }
        self.node.user_properties.append((RECORD, record))
        for key in ("latency", "completion_tokens", "accept_length"):
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
