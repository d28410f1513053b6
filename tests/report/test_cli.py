"""``pytest-specdecode report``: the plugin's summary from a saved file; one-line errors."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_specdecode.report import cli, summary
from pytest_specdecode.report import json_report as report
from pytest_specdecode.report.markdown import render_markdown
from pytest_specdecode.report.model import Report

from .conftest import config_dict, config_entry, judged, make_report, sweep_report, typed


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.run(list(argv), out, err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, Report]:
    """A report with failed gates, saved by the plugin's own writer."""
    data = judged(sweep_report())
    data.gates.failed = ["DFLASH budget=16 window=2048: pass rate 50% < 80%"]
    path = tmp_path / "report.json"
    report.write_atomic(path, data)
    return path, data


def test_report_prints_the_plugins_summary(saved: tuple[Path, Report]) -> None:
    path, data = saved
    status, out, err = run("report", str(path))
    assert (status, err) == (0, "")
    expected = summary.render(data, data.gates.failed)
    assert out.splitlines() == expected
    assert "dflash gates FAILED:" in out
    assert "DFLASH budget=16 window=2048" in out
    # The saved verdict, speedups and Pareto front come back as the run printed them.
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("verdict (simulated):"))
    assert lines[start + 1].split()[:3] == ["load", "domain", "best"]
    assert [line.split()[:2] for line in lines[start + 3 : start + 6]] == [
        ["c1", "chat"], ["c8", "chat"], ["c32", "chat"]
    ]  # fmt: skip
    assert any(line.startswith("pareto front (simulated):") for line in lines)
    assert "1.00x (baseline)" in out


def test_the_console_script_prints_the_same(saved: tuple[Path, Report]) -> None:
    path, data = saved
    script = Path(sys.executable).parent / "pytest-specdecode"
    if not script.exists():
        pytest.skip(f"console script not installed next to {sys.executable!r}")
    done = subprocess.run(
        [str(script), "report", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == summary.render(data, data.gates.failed)


def test_markdown_replaces_the_terminal_summary(saved: tuple[Path, Report]) -> None:
    path, data = saved
    status, out, _ = run("report", str(path), "--markdown")
    assert status == 0
    assert out == render_markdown(data)


def test_plot_writes_pngs_and_names_them(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    # Coding results only: one figure keeps this test fast.
    path = tmp_path / "r.json"
    report.write_atomic(
        path,
        typed(
            make_report(
                [config_entry(config_dict("DFLASH", 8, 2048), throughput=False, problems=2)]
            )
        ),
    )
    status, out, err = run("report", str(path), "--plot", str(tmp_path / "plots"))
    assert status == 0
    assert "pass rate" in out
    assert err == f"plot: {tmp_path / 'plots' / 'pass_rate.png'}\n"
    assert (tmp_path / "plots" / "pass_rate.png").read_bytes().startswith(b"\x89PNG")


def test_a_report_without_configs_says_so(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    report.write_atomic(path, typed(make_report([])))
    assert run("report", str(path)) == (0, f"report {str(path)!r} holds no measured config\n", "")


def one_line_error(err: str) -> str:
    assert err.startswith("pytest-specdecode: error: ")
    assert err.endswith("\n")
    assert err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        ([], "give a command"),
        (["report"], "required: PATH"),
        (["report", "r.json", "--bogus"], "unrecognized arguments: --bogus"),
        (["frob"], "invalid choice: 'frob'"),
    ],
)
def test_usage_errors_exit_2_in_one_line(argv: list[str], needle: str) -> None:
    status, out, err = run(*argv)
    assert (status, out) == (2, "")
    assert needle in one_line_error(err)
    assert "--help" in err


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "No such file"),
        ("{not json", "cannot read report"),
        (json.dumps({"benchmarks": []}), "is not a pytest-specdecode report"),
        (
            json.dumps({"format": 1, "configs": [{"nolabel": 1}]}),
            "is not a valid pytest-specdecode report: "
            "Object missing required field `label` - at `$.configs[0]`",
        ),
        (
            json.dumps({"format": 1, "configs": "oops"}),
            "is not a valid pytest-specdecode report: Expected `array`, got `str` - at `$.configs`",
        ),
    ],
)
def test_a_bad_report_exits_1_in_one_line(tmp_path: Path, content: str | None, needle: str) -> None:
    path = tmp_path / "r.json"
    if content is not None:
        path.write_text(content)
    status, out, err = run("report", str(path))
    assert (status, out) == (1, "")
    assert needle in one_line_error(err)
    assert repr(str(path)) in err


def test_an_unwritable_plot_dir_exits_1(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "r.json"
    report.write_atomic(
        path,
        typed(
            make_report(
                [config_entry(config_dict("DFLASH", 8, 2048), throughput=False, problems=1)]
            )
        ),
    )
    blocker = write(tmp_path / "file", "not a directory")
    status, _, err = run("report", str(path), "--plot", str(blocker / "plots"))
    assert status == 1
    assert f"cannot write plots to {str(blocker / 'plots')!r}" in one_line_error(err)


def test_missing_matplotlib_exits_1_saying_what_to_install(
    saved: tuple[Path, Report], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    status, _, err = run("report", str(saved[0]), "--plot", str(tmp_path / "p"))
    assert status == 1
    assert "pip install 'pytest-specdecode[plot]'" in one_line_error(err)


def test_main_reads_sys_argv(
    saved: tuple[Path, Report],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(sys, "argv", ["pytest-specdecode", "report", str(saved[0])])
    assert cli.main() == 0
    assert (
        capsys.readouterr().out.splitlines()[-1]
        == "  DFLASH budget=16 window=2048: pass rate 50% < 80%"
    )


HOSTILE: dict[str, tuple[Callable[[Path], object], str]] = {
    "nested": (lambda p: p.write_text("[" * 200_000), "JSON nested deeper than 64 levels"),
    "dev-zero": (lambda p: p.symlink_to("/dev/zero"), "a character device, not a regular file"),
    "fifo": (lambda p: os.mkfifo(p), "a FIFO, not a regular file"),
}


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_report_file_exits_1_in_one_line(tmp_path: Path, kind: str) -> None:
    make, why = HOSTILE[kind]
    path = tmp_path / "r.json"
    make(path)
    # A child process with a timeout: a reader that blocks on the FIFO fails, not hangs.
    code = "import sys; from pytest_specdecode.report.cli import main; sys.exit(main())"
    done = subprocess.run(
        [sys.executable, "-c", code, "report", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    line = one_line_error(done.stderr)
    assert line.startswith(f"pytest-specdecode: error: cannot read report {str(path)!r}: {why}")
