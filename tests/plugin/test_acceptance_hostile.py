"""Acceptance: hostile coding answers, replayed by the simulator, through the plugin.

Each answer tries to cheat or to do harm. Through the whole plugin (ask over
HTTP, extract, sandbox, verdict) every one fails or times out with its reason,
the run ends normally, and nothing outside the sandbox changed.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_specdecode.coding import sandbox_mode

needs_bwrap = pytest.mark.skipif(
    sandbox_mode() != "bwrap",
    reason="bubblewrap is not usable here: the fallback sandbox cannot hide the package",
)


def fenced(code: str) -> str:
    return f"Here is my solution:\n\n```python\n{code}```\n\nHope this helps!\n"


def hostile_answers(outside: Path, token: str) -> dict[str, tuple[str, str]]:
    """problem -> (the code the model answers, the reason line it must fail with).

    Top-level calls are written as assignments: the extractor drops bare
    expressions and loops at top level (usage examples), so these do run.
    The two timeouts are the 1st and 3rd problems run: xdist hands each worker a
    chunk of two items first, so under ``-n 2`` they wait in parallel.
    """
    evil, keep = str(outside / "evil.txt"), str(outside / "keep.txt")
    return {
        "is_palindrome": (
            "def is_palindrome(s):\n    while True:\n        pass\n",
            "timeout: is_palindrome(*) did not return within the 6 s limit (checked twice*",
        ),
        "merge_sorted": (
            "import os, time\n"
            "def merge_sorted(a, b):\n"
            "    while True:\n"
            "        try:\n"
            "            os.fork()\n"
            "        except OSError:\n"
            "            time.sleep(0.05)\n",
            "timeout: merge_sorted(*) did not return within the 6 s limit (checked twice*",
        ),
        "fib": (
            "import sys\n_ = sys.exit(0)\ndef fib(n):\n    return n\n",
            "error: SystemExit: 0",
        ),
        "word_count": (
            "import os\n_ = os._exit(0)\ndef word_count(text):\n    return {}\n",
            "error: the sandbox process exited with status 0 while loading the code",
        ),
        "gcd": (
            "import sys\n_ = print('PASS')\n_ = sys.stderr.write('ok\\nPASS\\n')\n"
            "def gcd(a, b):\n    return 1\n",
            "failed: gcd(*) returned 1, expected *",
        ),
        "reverse_words": (
            "import builtins\n"
            "builtins.isinstance = lambda *a: True\n"
            "builtins.len = lambda x: 0\n"
            "def reverse_words(s):\n    return s\n",
            "error: the sandbox process exited with status 1 while loading the code",
        ),
        "is_anagram": (
            "import pytest_specdecode.coding.problems_more as ref\n"
            "def is_anagram(a, b):\n    return ref.is_anagram(a, b)\n",
            "error: ModuleNotFoundError: No module named 'pytest_specdecode'",
        ),
        "caesar_cipher": (
            "def caesar_cipher(text, shift):\n"
            "    blob = bytearray(10 * 1024 ** 3)\n"
            "    return text + str(len(blob))\n",
            "failed: caesar_cipher(*) raised MemoryError, expected *",
        ),
        "balanced_brackets": (
            "def balanced_brackets(s):\n"
            f"    for path in [{evil!r}, {keep!r}]:\n"
            "        try:\n"
            "            with open(path, 'w') as f:\n"
            "                f.write('overwritten')\n"
            "        except OSError:\n"
            "            pass\n"
            "    return True\n",
            "failed: balanced_brackets(*) returned True, expected False",
        ),
        "dedupe": (
            # A double-forked daemon that outlives the answer unless the sandbox reaps it.
            # The sandbox has no /bin/sleep: the daemon is the interpreter itself.
            "import os, sys\n"
            "def dedupe(items):\n"
            "    if os.fork() == 0:\n"
            "        os.setsid()\n"
            "        if os.fork() == 0:\n"
            "            code = 'import sys, time; time.sleep(float(sys.argv[1]))'\n"
            f"            os.execv(sys.executable, [sys.executable, '-c', code, {token!r}])\n"
            "        os._exit(0)\n"
            "    return items\n",
            "failed: dedupe(*) returned *, expected *",
        ),
    }


def running_with(token: str) -> list[int]:
    """Pids of processes whose command line holds ``token``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline.split(b"\0"):
            found.append(int(proc.name))
    return found


def working_in(directory: Path) -> list[str]:
    """Processes (pid and command line) working in ``directory`` or below it."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cwd = Path(os.readlink(proc / "cwd"))
        except OSError:
            continue
        if cwd == directory or directory in cwd.parents:
            with contextlib.suppress(OSError):
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
                found.append(f"{proc.name} {stat} {cmdline}")
    return found


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.slow
@needs_bwrap
def test_hostile_answers_fail_with_their_reason_and_leave_no_trace(
    pytester: pytest.Pytester,
    sim_project: Callable[[pytest.Pytester, str], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outside = pytester.path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("original")
    (outside / "notes").mkdir()
    (outside / "notes" / "a.txt").write_text("untouched")
    before = snapshot(outside)
    # A sleep duration no other process uses, to find the daemon if it survived.
    token = f"{900 + os.getpid() % 97}.{int.from_bytes(os.urandom(3), 'big'):07d}"
    answers = hostile_answers(outside, token)
    (pytester.path / "answers.json").write_text(
        json.dumps(
            [{"match": f"`{name}(", "response": fenced(c)} for name, (c, _) in answers.items()]
        )
    )
    sim_project(pytester, "--sim-answers answers.json")
    pytester.makepyfile(
        test_coding="""
        import pytest

        @pytest.mark.coding
        def test_coding(dflash_problem, dflash_coding):
            dflash_coding.check(dflash_problem)
        """
    )
    # The sandboxes' temp dirs go here: it must be empty again afterwards.
    sandbox_tmp = pytester.path / "sandbox-tmp"
    sandbox_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(sandbox_tmp))

    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--dflash-answer-timeout=3", "-k", " or ".join(answers)
    )

    result.assert_outcomes(failed=len(answers))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "INTERNALERROR" not in out
    assert "Traceback" not in out
    for name, (_, reason) in answers.items():
        result.stdout.fnmatch_lines([f"{name} under DFLASH*: {reason}; the reply starts: *"])
        result.stdout.fnmatch_lines([f"{name} *DFLASH*  {reason}"])  # the summary's table
    report = json.loads((pytester.path / "report.json").read_text())
    (config,) = report["configs"]
    assert config["pass_rate"] == {"rate": 0.0, "passed": 0, "total": len(answers)}
    statuses = {c["problem"]: c["status"] for c in config["coding"]}
    assert statuses == {name: reason.split(":")[0] for name, (_, reason) in answers.items()}
    assert snapshot(outside) == before
    assert list(sandbox_tmp.iterdir()) == []
    assert running_with(token) == []
    assert working_in(pytester.path.resolve()) == [], "the simulator was left running"


# Answers that once crashed the verdict (the result was lost and the pass rate
# counted only the others) or wrote escape sequences to the terminal. Every one
# is a recorded failure now, counted in the pass rate.
UNJUDGEABLE = {
    "gcd": (
        "def gcd(a, b):\n    return 10 ** 5000\n",
        "failed: gcd(*) returned <int of 5001 digits>, expected *",
    ),
    "half": (
        "def half(x):\n    return 10 ** 400\n",
        "failed: half(*) returned <int of 401 digits>, expected *",
    ),
    "is_palindrome": (
        # 5000 nested directories in the answer's working directory, then a wrong answer.
        "import os\n"
        "def _nest():\n"
        "    for _ in range(5000):\n"
        "        os.mkdir('d')\n"
        "        os.chdir('d')\n"
        "    for _ in range(5000):\n"
        "        os.chdir('..')\n"
        "    return True\n"
        "_ = _nest()\n"
        "def is_palindrome(s):\n    return True\n",
        "failed: is_palindrome(*) returned True, expected False",
    ),
    "fib": (
        "def fib(n):\n    raise ValueError('\\x1b[2J\\x1b]52;c;ZXZpbA==\\x07\\x1b[1A')\n",
        r"failed: fib(*) raised ValueError: \x1b[2J\x1b]52;c;ZXZpbA==\x07\x1b[1A, expected *",
    ),
    "word_count": (
        "class Evil:\n"
        "    def __repr__(self):\n"
        "        return '\\x1b]52;c;ZXZpbA==\\x07\\x9b2J'\n"
        "def word_count(text):\n    return Evil()\n",
        r"failed: word_count(*) returned <Evil \x1b]52;c;ZXZpbA==\x07\x9b2J>, expected *",
    ),
}
# Answered correctly by the simulator's own solutions.
CORRECT = ("merge_sorted", "reverse_words", "dedupe")

HALF_PROBLEM = """
from pytest_specdecode.coding import Problem

def pytest_dflash_problems(config):
    return [
        Problem(
            name="half",
            prompt="Write a Python function `half(x)` that returns x / 2 as a float.",
            entry_point="half",
            reference="def half(x):\\n    return x / 2\\n",
            cases=((1,), (3,), (10,)),
        )
    ]
"""


@pytest.mark.slow
def test_no_answer_leaves_the_pass_rate_and_no_escape_reaches_the_terminal(
    pytester: pytest.Pytester,
    sim_project: Callable[[pytest.Pytester, str], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (pytester.path / "answers.json").write_text(
        json.dumps(
            [{"match": f"`{name}(", "response": fenced(c)} for name, (c, _) in UNJUDGEABLE.items()]
        )
    )
    sim_project(pytester, "--sim-answers answers.json")
    pytester.makeconftest(HALF_PROBLEM)
    pytester.makepyfile(
        test_coding="""
        import pytest

        @pytest.mark.coding
        def test_coding(dflash_problem, dflash_coding):
            dflash_coding.check(dflash_problem)
        """
    )
    sandbox_tmp = pytester.path / "sandbox-tmp"
    sandbox_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(sandbox_tmp))  # the run is in-process
    names = [*UNJUDGEABLE, *CORRECT]
    summary = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))

    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--dflash-min-pass-rate", "0.5", "-k", " or ".join(names),
        "--junitxml=junit.xml",
    )  # fmt: skip

    out = result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=len(CORRECT), failed=len(UNJUDGEABLE))
    # 3/8 is below the gate; without the lost results it would read 3/5 = 60% and pass.
    result.stdout.fnmatch_lines(["*DFLASH*: 3/8 = 38% < 50%*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    for name, (_, reason) in UNJUDGEABLE.items():
        result.stdout.fnmatch_lines([f"{name} *DFLASH*  {reason}".replace("[", "[[]")])
    assert "Traceback" not in out
    assert "INTERNALERROR" not in out
    for control in ("\x1b", "\x07", "\x9b"):
        assert control not in out
    raw = (pytester.path / "report.json").read_text()
    report = json.loads(raw)
    (config,) = report["configs"]
    assert config["pass_rate"] == {"rate": 0.375, "passed": 3, "total": 8}
    for record in config["coding"]:
        assert not any(ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 for ch in record["reason"])
    # The JUnit XML and the step summary (Markdown, its backslashes and brackets
    # escaped) hold the neutralised reasons too. pytest's own XML writer would turn
    # a raw ESC into "#x1B": neither form may be there.
    stored = {
        "junit.xml": ((pytester.path / "junit.xml").read_text(), r"\x1b]52;c;ZXZpbA==\x07"),
        "step summary": (summary.read_text(), r"\\x1b\]52;c;ZXZpbA==\\x07"),
    }
    for name, (text, shown) in stored.items():
        assert shown in text, name
        for control in ("\x1b", "\x07", "\x9b", "#x1B", "#x07", "#x9B"):
            assert control not in text, (name, control)
    assert list(sandbox_tmp.iterdir()) == []
