"""A value of ours that pytest took for a test path when it chose its rootdir.

pytest finds its rootdir and ini file before any plugin's options are known:
``--dflash-draft-model /models/d`` (two words) made the common ancestor of the
project and that directory the rootdir and left the project's ini file unread,
so the report went to the wrong place. The run now stops with one line; the
one-word spelling works as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.config import rootdir_guard

HERE = Path("/work/project")
EXISTING = {Path("/models/d"), Path("/work/project/models/d"), Path("/work")}


def exists(path: Path) -> bool:
    return path in EXISTING


def misread(*words: str) -> list[tuple[str, str]]:
    return rootdir_guard.misread(list(words), HERE, exists=exists)


def test_a_value_of_its_own_naming_a_path_outside_the_project_is_found() -> None:
    assert misread("-q", "--dflash-draft-model", "/models/d", "-x") == [
        ("--dflash-draft-model", "/models/d")
    ]
    assert misread("--dflash-draft-model", "../../models/d") == [
        ("--dflash-draft-model", "../../models/d")
    ]
    assert misread("--dflash-report", "..") == [("--dflash-report", "..")]


@pytest.mark.parametrize(
    "words",
    [
        ("--dflash-draft-model=/models/d",),  # one word: pytest knows it is no path
        ("--dflash-draft-model", "models/d"),  # inside the project: the same ini is found
        ("--dflash-draft-model", "/models/missing"),  # no such path: pytest skips it
        ("--dflash-dry-run", "/models/d"),  # a switch takes no value: a real test path
        ("-k", "/models/d"),  # pytest's own option
        ("--", "--dflash-draft-model", "/models/d"),  # after --: test paths only
    ],
)
def test_what_pytest_reads_right_is_left_alone(words: tuple[str, ...]) -> None:
    assert misread(*words) == []


@given(st.lists(st.sampled_from(["-q", "-x", "tests", "--dflash-rounds", "3", "-k", "x"])))
def test_words_without_a_path_value_are_never_refused(words: list[str]) -> None:
    assert misread(*words, "--dflash-draft-model=/models/d") == []


def test_pytest_addopts_words_count_first() -> None:
    words = rootdir_guard.command_words(["-q"], {"PYTEST_ADDOPTS": "--dflash-report /models/d"})
    assert words == ["--dflash-report", "/models/d", "-q"]
    assert rootdir_guard.command_words(["-q"], {"PYTEST_ADDOPTS": "'unclosed"}) == ["-q"]


@pytest.fixture
def project(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with its ini (a report path) and a drafter directory beside it."""
    pytester.makeini("[pytest]\ndflash_report = project-report.json\n")
    pytester.makepyfile(test_s="def test_s(dflash_service): pass")
    return tmp_path_factory.mktemp("models")


def test_a_drafter_directory_as_its_own_word_stops_the_run_with_one_line(
    pytester: pytest.Pytester, project: Path
) -> None:
    result = pytester.runpytest("-p", "no:cacheprovider", "--dflash-draft-model", str(project))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: pytest read --dflash-draft-model {str(project)!r} as a test path when it "
            "chose its rootdir*and ini file, before this plugin's options were known*: write "
            f"--dflash-draft-model={project} (one word), or give --rootdir and -c"
        ]
    )
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert not list(project.parent.glob("*.json"))  # no report in the rootdir pytest chose


def test_the_one_word_spelling_reads_the_projects_ini_and_writes_its_report_there(
    pytester: pytest.Pytester, project: Path
) -> None:
    result = pytester.runpytest(
        "-p", "no:cacheprovider", f"--dflash-draft-model={project}", "--dflash-dry-run"
    )
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"rootdir: {pytester.path}", "configfile: tox.ini"])
    result.stdout.fnmatch_lines([f"*--speculative-draft-model-path {project}*"])


def test_rootdir_and_ini_given_outright_are_not_refused(
    pytester: pytest.Pytester, project: Path
) -> None:
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--rootdir", str(pytester.path), "-c", "tox.ini",
        "--dflash-draft-model", str(project), "--dflash-dry-run",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    result.stdout.fnmatch_lines([f"*--speculative-draft-model-path {project}*"])
