"""The example project's CI workflow, run as written against a stand-in GPU host.

``conftest_examples/.github/workflows/dflash.yml`` is parsed; its ``run:`` steps
run in order, in a copy of the example project (the checkout), with bash as
GitHub runs them; only the job's inputs (its ``env:`` of variables and secrets)
are filled in. The host is a real OpenSSH sshd on 127.0.0.1 whose sessions see
the stand-in systemctl/journalctl of tests/standin_host.py and run the bundled
simulator as the unit; the runner's SSH setup is a ``~/.ssh/config`` in its
own HOME. ``pip install`` is a stand-in that records what it was asked (the
package under test is already installed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_specdecode.processes.children import free_port

from .conftest import SIM, SSHD, start_sshd
from .standin_host import StandinHost, make_host

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "conftest_examples"
WORKFLOW = EXAMPLE / ".github" / "workflows" / "dflash.yml"
# GitHub's shell for a run: step on Linux.
BASH = ("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c")
DRAFTER = "/models/example-dflash"

PIP = """#!/bin/sh
echo "pip $*" >> "$(dirname "$0")/pip.log"
"""


@dataclass
class Step:
    name: str
    run: str


def workflow() -> tuple[dict[str, str], list[Step]]:
    """The job's env (its inputs) and its ``run:`` steps, in order."""
    yaml = pytest.importorskip("yaml")
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    (job,) = jobs.values()
    steps = [
        Step(s.get("name") or s["run"].split()[0], s["run"]) for s in job["steps"] if "run" in s
    ]
    return dict(job.get("env", {})), steps


def inputs(env: Mapping[str, str], given: Mapping[str, str]) -> dict[str, str]:
    """The job's env with every ``${{ ... }}`` input filled in from ``given``."""
    filled = {}
    for name, value in env.items():
        if "${{" in str(value):
            assert name in given, f"the workflow reads input {name}: the test must give it"
            filled[name] = given[name]
        else:
            filled[name] = str(value)
    return filled


def sim_launch(port: int, scale: float) -> str:
    """The host's base launch command: the simulator standing in for SGLang."""
    answers = EXAMPLE / "answers.json"
    return " ".join(
        [
            *SIM,
            *("--host", "127.0.0.1", "--port", str(port)),
            *("--sim-time-scale", str(scale), "--sim-load-seconds", "0.2"),
            *("--sim-warmup-seconds", "0.1", "--sim-answers", str(answers)),
        ]
    )


@dataclass
class Runner:
    """The self-hosted runner: its checkout, HOME, PATH and the job's inputs."""

    checkout: Path
    tools: Path
    env: dict[str, str]
    host: StandinHost
    job_env: dict[str, str]
    given: dict[str, str]

    def run(self, step: Step, **override: str) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **inputs(self.job_env, {**self.given, **override})}
        return subprocess.run(
            [*BASH, step.run],
            cwd=self.checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Runner]:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    host = make_host(tmp_path / "host")
    key_options = f'command="{host.session}",no-port-forwarding,no-agent-forwarding'
    (tmp_path / "sshd").mkdir()
    with start_sshd(tmp_path / "sshd", key_options=key_options) as sshd:
        try:
            yield _runner(tmp_path, host, sshd)
        finally:
            host.stop()


def _runner(tmp_path: Path, host: StandinHost, sshd: SSHD) -> Runner:
    checkout = tmp_path / "checkout"
    shutil.copytree(EXAMPLE, checkout, ignore=shutil.ignore_patterns(".dflash", ".benchmarks"))
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host {sshd.host}\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key}\n  UserKnownHostsFile {sshd.known_hosts}\n"
    )
    tools = tmp_path / "runner-bin"
    tools.mkdir()
    (tools / "pip").write_text(PIP)
    (tools / "pip").chmod(0o755)
    path = os.pathsep.join([str(tools), str(Path(sys.executable).parent), os.environ["PATH"]])
    env = {
        "HOME": str(home),
        "PATH": path,
        "LANG": "C.UTF-8",
        "GITHUB_ACTIONS": "true",
        "CI": "true",
        # This test's own pytest options and plugins stay out of the workflow's runs.
        "PYTEST_ADDOPTS": "",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "",
    }
    job_env, _ = workflow()
    http = free_port()
    given = {
        "DFLASH_HOST": sshd.host,
        "DFLASH_PORT": str(http),
        "DFLASH_LAUNCH": sim_launch(http, scale=0.05),
        "DFLASH_DRAFT_MODEL": DRAFTER,
        "DFLASH_API_KEY": "",
    }
    return Runner(checkout, tools, env, host, job_env, given)


def shown(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n{result.stdout[-6000:]}\n{result.stderr[-3000:]}"


def test_the_workflow_reads_its_inputs_only_from_its_env() -> None:
    # What the test fills in is what GitHub fills in: no expression inside a step.
    _, steps = workflow()
    assert steps, "the workflow has no run: steps"
    assert [s.name for s in steps if "${{" in s.run] == []


@pytest.mark.slow
def test_the_example_workflow_runs_as_written_and_its_gate_catches_a_regression(
    runner: Runner,
) -> None:
    _, steps = workflow()
    install, _, baseline, compare = steps
    for step in steps:
        result = runner.run(step)
        assert result.returncode == 0, f"step {step.name!r} failed: {shown(result)}"
        if step is install:
            assert (runner.tools / "pip.log").read_text().startswith("pip install ")
        if step is baseline:
            saved = json.loads((runner.checkout / "baseline.json").read_text())
            assert saved["benchmarks"], "the baseline step saved no case"
    # Each step's configs were started on the host, every speculative one with the drafter.
    launched = runner.host.launched()
    speculative = [argv for argv in launched if "--speculative-algorithm" in argv]
    assert len(speculative) < len(launched), "no NONE baseline was started"
    assert speculative, "no drafter config was started"
    for argv in speculative:
        assert argv[argv.index("--speculative-draft-model-path") + 1] == DRAFTER, argv
    # The compare step read what the baseline step wrote: the NONE run.
    report = json.loads((runner.checkout / ".dflash" / "report.json").read_text())
    assert (report["compare"]["baseline"], report["compare"]["baseline_configs"]) == (
        "baseline.json",
        ["NONE"],
    )
    # The same configs on a host three times slower: the compare gate fails the step.
    port = int(runner.given["DFLASH_PORT"])
    slower = runner.run(compare, DFLASH_LAUNCH=sim_launch(port, scale=0.15))
    assert slower.returncode == 1, shown(slower)
    assert re.search(r"compare gate FAILED: .* beyond the allowed drop tok_s:5%", slower.stdout), (
        shown(slower)
    )
