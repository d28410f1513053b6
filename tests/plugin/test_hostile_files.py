"""Files a repository or a host may hold where the plugin reads one: a JSON nested
200 kB deep, a symlink to /dev/zero, a FIFO. Each is one line, never an INTERNALERROR,
a run that reads until memory runs out, or one that waits forever.

Runs in a subprocess with a timeout: a reader that blocks on a FIFO fails the test
instead of hanging the suite.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_specdecode.throughput.comparison import machine_id

from ..throughput.test_compare import bench, saved_run, write

HOSTILE: dict[str, tuple[Callable[[Path], object], str]] = {
    "nested": (lambda p: p.write_text("[" * 200_000), "JSON nested deeper than 64 levels"),
    "dev-zero": (lambda p: p.symlink_to("/dev/zero"), "a character device, not a regular file"),
    "fifo": (lambda p: os.mkfifo(p), "a FIFO, not a regular file"),
}
TIMEOUT = 120  # generous for a busy machine: only a reader that blocks reaches it


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=TIMEOUT)


def one_error_line(result: pytest.RunResult) -> str:
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text, text
    assert "Traceback" not in text, text
    errors = [line for line in result.stderr.lines if line.startswith("ERROR: ")]
    assert len(errors) == 1, text
    return errors[0]


@pytest.fixture
def project(
    pytester: pytest.Pytester, sim_project: Callable[[pytest.Pytester, str], None]
) -> pytest.Pytester:
    sim_project(pytester, "")
    pytester.makepyfile(test_x="def test_x(): pass")
    return pytester


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_compared_run_is_one_usage_line(project: pytest.Pytester, kind: str) -> None:
    make, why = HOSTILE[kind]
    folder = project.path / ".benchmarks" / machine_id()
    folder.mkdir(parents=True)
    make(folder / "0001_evil.json")
    result = run(project, "--benchmark-compare=0001", "--dflash-compare-fail=tok_s:5%")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    line = one_error_line(result)
    assert line.startswith("ERROR: --benchmark-compare: cannot read saved benchmark run "), line
    assert "0001_evil.json" in line, line
    assert why in line, line


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_saved_run_beside_the_compared_one_is_left_out(
    project: pytest.Pytester, kind: str
) -> None:
    make, _ = HOSTILE[kind]
    folder = project.path / ".benchmarks" / machine_id()
    entry = bench("ctx60-c1", "ctx60-c1", "DFLASH budget=8", 100.0, 3.0, [99.0, 100.0, 101.0])
    write(folder / "0001_good.json", saved_run([entry]))
    make(folder / "0002_evil.json")
    result = run(project, "--benchmark-compare=0001", "--dflash-compare-fail=tok_s:5%")
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text, text
    assert "Traceback" not in text, text
    # This run measured nothing: the gate says it cannot judge (exit 1), it does not hang.
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    result.stdout.fnmatch_lines(["*nothing compared: this run measured no throughput case*"])


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_resumed_report_is_one_usage_line(project: pytest.Pytester, kind: str) -> None:
    make, why = HOSTILE[kind]
    make(project.path / "old.json")
    result = run(project, "--dflash-resume=old.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    line = one_error_line(result)
    assert line.startswith("ERROR: --dflash-resume: cannot read report "), line
    assert "old.json" in line, line
    assert why in line, line


def test_a_hostile_lossless_baseline_is_one_line(tmp_path: Path) -> None:
    from pytest_specdecode.throughput.lossless import load_baseline

    for kind, (make, why) in HOSTILE.items():
        path = tmp_path / f"{kind}.json"
        make(path)
        with pytest.raises(ValueError, match="cannot read lossless baseline") as info:
            load_baseline(path)
        assert why in str(info.value)
        assert "\n" not in str(info.value)
