from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# The bundled simulator, fast: short load and warm-up phases, no modelled delay.
FAST_SIM = (
    f"{sys.executable} -m pytest_specdecode.sim --sim-load-seconds 0.3 "
    "--sim-warmup-seconds 0.3 --sim-time-scale 0"
)


def write_sim_ini(pytester: pytest.Pytester, sim_args: str = "") -> None:
    """An ini that launches the fast simulator (plus ``sim_args``) for the plugin."""
    pytester.makeini(
        f"[pytest]\ndflash_launch = {FAST_SIM} {sim_args}\ndflash_ready_timeout = 60\n"
        "dflash_report = report.json\n"
    )


@pytest.fixture
def sim_ini(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester project whose ini launches the fast simulator."""
    write_sim_ini(pytester)
    return pytester


@pytest.fixture
def sim_project() -> Callable[[pytest.Pytester, str], None]:
    """``sim_project(pytester, "--sim-quality 0.6")``: the fast simulator with more flags."""
    return write_sim_ini


@pytest.fixture
def live_sim(tmp_path: Path) -> Iterator[int]:
    """A simulator started outside the plugin (budget 8, window 2048); yields its port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [
        *shlex.split(FAST_SIM),
        *("--port", str(port), "--speculative-algorithm", "DFLASH"),
        *("--speculative-draft-model-path", "sim/dflash-drafter"),
        *("--speculative-num-draft-tokens", "8", "--speculative-draft-window-size", "2048"),
    ]
    log = (tmp_path / "live-sim.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("the live simulator did not become healthy", pytrace=False)
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        log.close()
