"""Startup phases, exit codes and every fault, seen from outside the process."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from ..conftest import SIM
from .conftest import DFLASH, FAST, Sim, stream_events

GREEDY = {
    "text": "Tell me a long story.",
    "sampling_params": {"max_new_tokens": 200, "ignore_eos": True, "temperature": 0},
}


def status(sim: Sim, path: str = "/health") -> str:
    try:
        return str(requests.get(sim.url + path, timeout=2).status_code)
    except requests.ConnectionError:
        return "refused"


def test_phases_refused_then_503_then_200(sim_factory: Any) -> None:
    sim = sim_factory(
        *DFLASH, "--sim-load-seconds", "0.4", "--sim-warmup-seconds", "2", wait=False, fast=False
    )
    seen: list[str] = []
    during_warmup: list[str] = []
    # A warm-up of 2 s: a poll on a loaded machine (a load average of 10) missed one of
    # 0.4 s. The deadline is a bound no load reaches, not a speed requirement.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and seen[-1:] != ["200"]:
        state = status(sim)
        if not seen or seen[-1] != state:
            seen.append(state)
        if state == "503":
            during_warmup.append(status(sim, "/server_info") + status(sim, "/v1/models"))
        time.sleep(0.02)
    assert seen == ["refused", "503", "200"]
    assert during_warmup
    assert set(during_warmup) == {"200200"}
    log = sim.stderr()
    assert "Initialized DFLASH draft runner." in log
    assert "block_size=8, draft_window_size=2048, compact_cache=True" in log
    assert log.index("Load weight end") < log.index("The server is fired up and ready to roll!")


def run(*args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SIM, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_bad_window_exits_nonzero_with_clear_message() -> None:
    done = run(*DFLASH, "--speculative-draft-window-size", "4")
    assert done.returncode != 0
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == "Traceback (most recent call last):"
    assert done.stderr.splitlines()[-1] == (
        "ValueError: --speculative-draft-window-size must be >= --speculative-num-draft-tokens "
        "(block_size). window_size=4, block_size=8."
    )


def test_unknown_flag_exits_2() -> None:
    done = run("--speculative-whatever", "3")
    assert done.returncode == 2
    assert "unrecognized arguments: --speculative-whatever" in done.stderr


def test_crash_on_start_exits_1_after_loading() -> None:
    done = run(*FAST, "--sim-fault", "crash-on-start")
    assert done.returncode == 1
    assert "Traceback" in done.stderr
    assert "crash-on-start" in done.stderr


def wait_for_log(sim: Any, line: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while line not in sim.stderr():
        assert sim.proc.poll() is None, sim.stderr()
        assert time.monotonic() < deadline, f"no {line!r} in the log:\n{sim.stderr()}"
        time.sleep(0.02)


def test_hang_on_load_never_listens(sim_factory: Any) -> None:
    sim = sim_factory("--sim-fault", "hang-on-load", wait=False)
    # The load began (with 0 load seconds it would listen at once) and the process is
    # parked in its sleep there, not starting to serve.
    wait_for_log(sim, "Load weight begin")
    wchan = Path(f"/proc/{sim.proc.pid}/wchan")
    deadline = time.monotonic() + 10
    while wchan.read_text() != "0" and "nanosleep" not in wchan.read_text():  # "0": hidden
        assert time.monotonic() < deadline, f"not parked in a sleep: {wchan.read_text()!r}"
        time.sleep(0.02)
    assert "Load weight end" not in sim.stderr()
    assert status(sim) == "refused"
    assert sim.proc.poll() is None


def test_unhealthy_stays_503_while_info_answers(sim_factory: Any) -> None:
    sim = sim_factory("--sim-fault", "unhealthy", wait=False)
    deadline = time.monotonic() + 10
    while status(sim, "/server_info") != "200" and time.monotonic() < deadline:
        time.sleep(0.02)
    # Past the point where health would turn 200: it stays 503.
    wait_for_log(sim, "warmup done, health stays 503")
    assert status(sim) == "503"
    assert status(sim, "/health_generate") == "503"
    assert "fired up" not in sim.stderr()


def test_die_after_n_requests(sim_factory: Any) -> None:
    sim = sim_factory("--sim-fault", "die-after:2")
    for _ in range(2):
        reply = requests.post(sim.url + "/generate", json=GREEDY, timeout=10).json()
        assert reply["meta_info"]["completion_tokens"] == 200
    assert sim.proc.wait(timeout=5) == 1
    assert "die-after:2" in sim.stderr()


def test_slow_first_token(sim_factory: Any) -> None:
    sim = sim_factory("--sim-fault", "slow-first-token:0.4")
    start = time.monotonic()
    with requests.post(
        sim.url + "/generate", json={**GREEDY, "stream": True}, stream=True, timeout=10
    ) as r:
        next(r.iter_lines())
        assert time.monotonic() - start >= 0.4


def test_lossy_breaks_greedy_equality_only_with_speculation(sim_factory: Any) -> None:
    def greedy_text(*args: str) -> str:
        sim = sim_factory(*args)
        reply = requests.post(sim.url + "/generate", json=GREEDY, timeout=10).json()
        return str(reply["text"])

    reference = greedy_text()
    assert greedy_text(*DFLASH) == reference
    assert greedy_text(*DFLASH, "--sim-fault", "lossy") != reference


def test_stale_config_reports_another_window(sim_factory: Any) -> None:
    sim = sim_factory(*DFLASH, "--sim-fault", "stale-config")
    info = requests.get(sim.url + "/server_info", timeout=5).json()
    assert info["speculative_draft_window_size"] == 1024
    assert "--speculative-draft-window-size 2048" in info["launch_command"]


def test_scripted_answers_and_ddtree_log(sim_factory: Any, tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps([{"match": "gcd", "response": "```python\nboom\n```"}]))
    sim = sim_factory(
        "--sim-build", "ddtree", "--speculative-algorithm", "DDTREE",
        "--speculative-draft-model-path", "d", "--speculative-ddtree-budget", "12",
        "--sim-answers", str(answers),
        env={"SGLANG_DDTREE_MAX_TOPK": "3"},
    )  # fmt: skip
    events = stream_events(sim.url + "/generate", {"text": "def gcd", "sampling_params": {}})
    assert events[-1]["text"] == "```python\nboom\n```"
    info = requests.get(sim.url + "/server_info", timeout=5).json()
    assert (info["speculative_eagle_topk"], info["speculative_ddtree_budget"]) == (3, 12)
    assert "Initialized DDTree worker. block_size=16, tree_budget=12" in sim.stderr()


@pytest.mark.slow
def test_a_first_start_fault_fails_only_the_first_start_for_its_state_file(
    tmp_path: Path,
) -> None:
    # crash-on-start as well: a start the first-start fault lets through ends at once.
    state = str(tmp_path / "state")
    args = (*FAST, "--sim-fault", "oom-on-first-start", "--sim-state-file", state)
    first = run(*args, "--sim-fault", "crash-on-start")
    assert first.returncode == 1
    assert "torch.OutOfMemoryError: CUDA out of memory" in first.stderr
    second = run(*args, "--sim-fault", "crash-on-start")
    assert "CUDA out of memory" not in second.stderr
    assert "illegal memory access" in second.stderr
    killed = run(*FAST, "--sim-fault", "sigkill-on-first-start", "--sim-state-file", state + "2")
    assert killed.returncode == -9
    missing = run(*FAST, "--sim-fault", "oom-on-first-start")
    assert missing.returncode == 2
    assert "--sim-fault oom-on-first-start needs --sim-state-file PATH" in missing.stderr
