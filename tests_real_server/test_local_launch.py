"""The plugin's local mode launching the real SGLang: one start per config, gated and verified."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pytest_specdecode.processes.children import free_port

from .conftest import SERVER_ENV, last_lines, launch_line, project, run_plugin

CODING = ("--pyargs", "pytest_specdecode.suite", "-m", "coding", "-k", "gcd")
SHORT = "--dflash-max-tokens=16"


def server_logs(path: Path) -> list[str]:
    """The server logs of a run's starts (under pytest's basetemp ``dflash-logs/``)."""
    return [
        p.read_text(errors="replace") for p in sorted(path.rglob("dflash-logs/*")) if p.is_file()
    ]


def test_a_start_per_config_each_gated_and_verified(
    sglang_python: Path, tiny_model: Path, tmp_path: Path
) -> None:
    # The launch line names its host (bug 5: the plugin added a second --host).
    launch = launch_line(sglang_python, tiny_model, "--host", "127.0.0.1")
    run = run_plugin(
        project(tmp_path / "p", launch),
        *CODING,
        SHORT,
        f"--dflash-port={free_port()}",
        "--dflash-sweep=algorithm=NONE;max_running_requests=4,8",
        f"--basetemp={tmp_path / 'bt'}",
        "-v",
    )
    out = run.output
    assert sorted(run.outcomes.values()) == ["failed", "failed"], last_lines(out)
    # Each config got its own start, passed the gate, and nothing of it went unchecked.
    report = json.loads((tmp_path / "p" / "report.json").read_text())
    services = [c["service"] for c in report["configs"]]
    assert [s["restarted"] for s in services] == [True, True], json.dumps(services)[:3000]
    assert [s["unverified"] for s in services] == [[], []], json.dumps(services)[:3000]
    assert {s["version"] for s in services} == {"0.5.23"}
    commands = [s["launch_command"].split() for s in services]
    assert sorted(c[c.index("--max-running-requests") + 1] for c in commands) == ["4", "8"]
    # What SGLang was started with: one --host, the launch line's own.
    assert all(c.count("--host") == 1 for c in commands), commands
    assert len(server_logs(tmp_path / "bt")) >= 2


def test_draft_model_in_the_space_form_keeps_the_run_where_it_is(
    sglang_python: Path, tiny_model: Path, tmp_path: Path
) -> None:
    # Bug 5: pytest read the option's value (an existing directory) as a test path,
    # so the rootdir, the ini and the report moved to that directory's parent.
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    proj = project(tmp_path / "proj", launch_line(sglang_python, tiny_model))
    args = (*CODING, SHORT, f"--dflash-port={free_port()}", "--dflash-config=algorithm=NONE")
    spaced = run_plugin(proj, *args, "--dflash-draft-model", str(drafter))
    # Either the run stays in the project, or it stops with one line saying how to
    # write the option; it never runs without the project's ini.
    if f"rootdir: {proj}\n" not in spaced.output:
        assert spaced.ret == pytest.ExitCode.USAGE_ERROR, last_lines(spaced.output)
        said = [ln for ln in spaced.output.splitlines() if "as a test path" in ln]
        assert len(said) == 1, last_lines(spaced.output)
        assert f"--dflash-draft-model={drafter}" in said[0]
        assert spaced.outcomes == {}
    assert not (tmp_path / "report.json").exists()
    joined = run_plugin(proj, *args, f"--dflash-draft-model={drafter}")
    assert f"rootdir: {proj}\n" in joined.output, last_lines(joined.output)
    assert joined.outcomes == {"test_coding[gcd]": "failed"}, last_lines(joined.output)
    report = json.loads((proj / "report.json").read_text())
    assert report["configs"][0]["service"]["version"] == "0.5.23"


def test_a_config_the_real_parser_refuses_is_one_line(
    sglang_python: Path, tiny_model: Path, tmp_path: Path
) -> None:
    # An abbreviation that matches two options: SGLang's own argparse exits 2 on it...
    real = subprocess.run(
        [str(sglang_python), "-m", "sglang.launch_server", "--cuda-graph-max-bs", "32"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, **SERVER_ENV},
    )
    assert real.returncode == 2, real.stderr[-2000:]
    assert "error: ambiguous option: --cuda-graph-max-bs could match" in real.stderr
    # ...and the plugin says so in one line per test before it starts any server.
    run = run_plugin(
        project(tmp_path, launch_line(sglang_python, tiny_model)),
        *CODING,
        f"--dflash-port={free_port()}",
        "--dflash-config=algorithm=NONE,cuda_graph_max_bs=32",
        f"--basetemp={tmp_path / 'bt'}",
    )
    assert run.ret != pytest.ExitCode.OK
    refused = (
        "refuses flag --cuda-graph-max-bs: it is an ambiguous abbreviation of "
        "--cuda-graph-max-bs-decode and --cuda-graph-max-bs-prefill"
    )
    lines = [ln for ln in run.output.splitlines() if refused in ln]
    assert lines, last_lines(run.output)
    assert all(ln.startswith("dflash: collection error: ") for ln in lines), lines
    assert "Traceback" not in run.output
    assert "INTERNALERROR" not in run.output
    assert server_logs(tmp_path / "bt") == []


def test_dflash_refused_on_the_cpu_is_one_line(
    sglang_python: Path, tiny_model: Path, tmp_path: Path
) -> None:
    # SGLang 0.5.23 has no DFLASH on its CPU platform: the start fails, the tests of
    # that config error with SGLang's own exception line, not a wait or a traceback.
    run = run_plugin(
        project(tmp_path, launch_line(sglang_python, tiny_model)),
        *CODING,
        f"--dflash-port={free_port()}",
        f"--dflash-config=budget=4,window=1024,draft_model={tiny_model}",
    )
    assert run.outcomes == {"test_coding[gcd]": "error"}, last_lines(run.output)
    refused = "DFLASH speculative decoding is not supported by CpuSRTPlatform on device 'cpu'."
    assert refused in run.output, last_lines(run.output)
    assert "INTERNALERROR" not in run.output
