"""Coding items, the pass-rate gate and its exit status, against the simulator."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

CORE = "is_palindrome or fib or merge_sorted or word_count or gcd"

WRONG_GCD = [
    {
        "match": "gcd(",
        "response": (
            "Sure:\n```python\ndef gcd(a, b):\n    return max(a, b) % (min(a, b) or 1)\n```\n"
        ),
    }
]


@pytest.fixture
def coding_project(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> pytest.Pytester:
    (pytester.path / "answers.json").write_text(json.dumps(WRONG_GCD))
    sim_project(pytester, "--sim-answers answers.json")
    pytester.makepyfile(
        test_coding="""
        import pytest

        @pytest.mark.coding
        def test_coding(dflash_problem, dflash_coding):
            dflash_coding.check(dflash_problem)
        """
    )
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # In-process: the plugin's own state is per Config, and servers stop at session end.
    return pytester.runpytest("-p", "no:cacheprovider", "-k", CORE, *args)


def test_problems_are_items_and_a_wrong_answer_shows_its_counterexample(
    coding_project: pytest.Pytester,
) -> None:
    result = run(coding_project, "-v")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["*test_coding.py::test_coding?gcd? FAILED*"])
    result.stdout.fnmatch_lines(
        ["*gcd under DFLASH*: failed: gcd(*) returned *, expected *; the reply starts: '*def gcd(*"]
    )
    result.stdout.fnmatch_lines(["*DFLASH*4/5 (80%)*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    report = json.loads((coding_project.path / "report.json").read_text())
    (config,) = report["configs"]
    assert config["pass_rate"] == {"rate": 0.8, "passed": 4, "total": 5}
    gcd = next(c for c in config["coding"] if c["problem"] == "gcd")
    assert gcd["status"] == "failed"
    assert gcd["completion_tokens"] > 0
    (answer,) = gcd["failed_answers"]  # the evidence of the verdict, kept whole
    assert answer["status"] == "failed"
    assert "def gcd(" in answer["reply"]
    assert answer["reply_characters"] == len(answer["reply"])


def test_exit_status_follows_the_pass_rate_gate(coding_project: pytest.Pytester) -> None:
    above = run(coding_project, "--dflash-min-pass-rate", "0.8")
    above.assert_outcomes(passed=4, failed=1)
    assert above.ret == pytest.ExitCode.OK
    # A green run with a red FAILED line says why it is green.
    above.stdout.fnmatch_lines(
        ["  pass-rate gate passed: DFLASH*: 4/5 = 80% >= 80% (95% interval 38%-96%, within noise*"]
    )
    below = run(coding_project, "--dflash-min-pass-rate", "90%")
    assert below.ret == pytest.ExitCode.TESTS_FAILED
    below.stdout.fnmatch_lines(["  pass-rate gate FAILED: DFLASH*: 4/5 = 80% < 90% (95% interval*"])


def test_junit_xml_carries_the_properties(coding_project: pytest.Pytester) -> None:
    run(coding_project, "--junitxml=out.xml", "-k", "gcd")
    xml = (coding_project.path / "out.xml").read_text()
    for name in ("dflash_config", "latency", "completion_tokens", "accept_length"):
        assert f'name="{name}"' in xml


def test_prompt_templates_reach_the_model(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> None:
    # The scripted (wrong) answer only matches when the template was applied.
    scripted = [
        {"match": "Careful now: Write a Python function `gcd", "response": WRONG_GCD[0]["response"]}
    ]
    (pytester.path / "answers.json").write_text(json.dumps(scripted))
    sim_project(pytester, "--sim-answers answers.json")
    ini = (pytester.path / "tox.ini").read_text()
    (pytester.path / "tox.ini").write_text(
        ini + "\ndflash_prompt_template = Careful now: {prompt}\n"
        "dflash_system_prompt = You write Python.\n"
    )
    pytester.makepyfile(
        test_coding="""
        def test_coding(dflash_problem, dflash_coding):
            dflash_coding.check(dflash_problem)
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "gcd or fib")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*gcd under DFLASH*: failed: gcd(*"])


def test_prompt_template_needs_its_placeholder(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ndflash_prompt_template = Solve it\n")
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*'Solve it' from dflash_prompt_template ini option: has no {prompt} placeholder*"]
    )


def test_problems_from_a_toml_file_given_by_a_relative_path(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> None:
    (pytester.path / "probs.toml").write_text(
        "[[problem]]\n"
        'name = "add_one"\n'
        'prompt = "Write a Python function `add_one(x: int) -> int` returning x + 1."\n'
        'entry_point = "add_one"\n'
        'reference = "def add_one(x):\\n    return x + 1\\n"\n'
        'args = ["int"]\n'
    )
    answer = "```python\ndef add_one(x):\n    return x + 1\n```"
    (pytester.path / "answers.json").write_text(
        json.dumps([{"match": "add_one(", "response": answer}])
    )
    sim_project(pytester, "--sim-answers answers.json")
    pytester.makepyfile(
        test_coding="""
        def test_coding(dflash_problem, dflash_coding):
            dflash_coding.check(dflash_problem)
        """
    )
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-v", "-k", "add_one", "--dflash-problems", "probs.toml"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_coding?add_one? PASSED*"])
