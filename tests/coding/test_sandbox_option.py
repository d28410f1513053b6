"""``--dflash-sandbox``: require bubblewrap for CI, or say plainly what the fallback cannot do."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

import pytest_specdecode.coding.runner as runner_module
import pytest_specdecode.coding.sandbox as sandbox_module
from pytest_specdecode.client.sglang import ChatResult
from pytest_specdecode.coding import Verdict, builtin_problems
from pytest_specdecode.coding.runner import CodingRunner
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.server import Server

MISSING = "bubblewrap is not installed (install the 'bubblewrap' package)"
CODING_TEST = """
import pytest

@pytest.mark.coding
def test_coding(dflash_problem, dflash_coding):
    dflash_coding.check(dflash_problem)
"""


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_module, "_probe", lambda: ("fallback", MISSING))


@pytest.mark.parametrize("where", ["option", "ini"])
def test_require_without_bubblewrap_is_a_usage_error(
    pytester: pytest.Pytester, no_bwrap: None, where: str
) -> None:
    pytester.makepyfile(test_coding=CODING_TEST)
    if where == "ini":
        pytester.makeini("[pytest]\ndflash_sandbox = require\n")
    result = pytester.runpytest(*(["--dflash-sandbox=require"] if where == "option" else []))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert errors == [
        f"ERROR: --dflash-sandbox=require: {MISSING}; install bubblewrap and allow "
        "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1), or use "
        "--dflash-sandbox=auto to accept the weaker fallback"
    ]


def test_a_bad_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ndflash_sandbox = maybe\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *'maybe'*dflash_sandbox*auto, require, fallback"])


@pytest.mark.parametrize(
    ("args", "why"),
    [([], MISSING), (["--dflash-sandbox=fallback"], "--dflash-sandbox=fallback")],
)
def test_the_fallback_says_once_what_it_cannot_protect(
    pytester: pytest.Pytester, no_bwrap: None, args: list[str], why: str
) -> None:
    pytester.makepyfile(test_coding=CODING_TEST)
    result = pytester.runpytest("--collect-only", "-q", *args)
    warnings = [line for line in result.stdout.lines if "WARNING" in line]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"dflash: WARNING: coding sandbox is the weaker fallback ({why})")
    for risk in ("can read every", "Unix sockets", "network", "time limit"):
        assert risk in warnings[0]


def test_no_warning_with_bubblewrap(pytester: pytest.Pytester, monkeypatch: Any) -> None:
    monkeypatch.setattr(sandbox_module, "_probe", lambda: ("bwrap", None))
    pytester.makepyfile(test_coding=CODING_TEST)
    result = pytester.runpytest("--collect-only", "-q")
    assert not [line for line in result.stdout.lines if "WARNING" in line]


@dataclass
class FakeClient:
    def chat(self, messages: Any, **kwargs: Any) -> ChatResult:
        return ChatResult("```python\ndef gcd(a, b):\n    return 1\n```", 9, 5, "stop", 0.0, 0.1)


@dataclass
class FakeService:
    client: FakeClient = field(default_factory=FakeClient)
    config: SpecConfig = field(default_factory=SpecConfig)
    server_info: dict[str, Any] = field(default_factory=dict)

    def changed(self) -> str | None:
        return None  # the server of the gate throughout


@dataclass
class FakeItem:
    user_properties: list[tuple[str, object]] = field(default_factory=list)


@pytest.mark.parametrize(
    ("setting", "mode"), [("auto", "auto"), ("require", "bwrap"), ("fallback", "fallback")]
)
def test_answers_are_checked_in_the_chosen_mode(
    setting: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    modes: list[str] = []

    def spy(problem: Any, reply: str, **kwargs: Any) -> Verdict:
        modes.append(kwargs["mode"])
        return Verdict(True, "passed", "passed 1 cases")

    monkeypatch.setattr(runner_module, "check_reply", spy)
    runner = CodingRunner(
        Settings(sandbox=setting),
        cast(Server, FakeService()),
        cast(pytest.Item, FakeItem()),
    )
    runner.check(builtin_problems()[0])
    assert modes == [mode]
