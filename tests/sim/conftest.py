"""Fixtures that run the simulator as a real subprocess and always stop it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

FAST = ("--sim-time-scale", "0", "--sim-load-seconds", "0", "--sim-warmup-seconds", "0")
DFLASH = (
    "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d",
    "--speculative-num-draft-tokens", "8", "--speculative-draft-window-size", "2048",
)  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Sim:
    """A running simulator subprocess."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stderr(self) -> str:
        return self.log.read_text()

    def wait_healthy(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"simulator exited early:\n{self.stderr()}"
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.02)
        raise AssertionError(f"simulator not healthy after {timeout}s:\n{self.stderr()}")


@contextmanager
def run_sim(
    tmp_path: Path, *args: str, fast: bool = True, env: dict[str, str] | None = None
) -> Iterator[Sim]:
    """Start the simulator; kill its process group on exit, whatever happened."""
    port = free_port()
    log = tmp_path / f"sim-{port}.log"
    cmd = [sys.executable, "-m", "pytest_specdecode.sim", "--port", str(port)]
    cmd += [*FAST, *args] if fast else list(args)
    with log.open("wb") as err:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    try:
        yield Sim(proc, port, log)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture
def sim_factory(tmp_path: Path) -> Iterator[Callable[..., Sim]]:
    """Start simulators with given flags (healthy before returned); all stopped at teardown."""
    with ExitStack() as stack:

        def start(
            *args: str, wait: bool = True, fast: bool = True, env: dict[str, str] | None = None
        ) -> Sim:
            sim = stack.enter_context(run_sim(tmp_path, *args, fast=fast, env=env))
            if wait:
                sim.wait_healthy()
            return sim

        yield start


@pytest.fixture(scope="module")
def dflash_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    """One DFLASH simulator (block 8, window 2048, metrics on) shared by a module."""
    with run_sim(tmp_path_factory.mktemp("sim"), *DFLASH, "--enable-metrics") as sim:
        sim.wait_healthy()
        yield sim


def stream_events(url: str, body: Mapping[str, object], **kw: object) -> list[dict[str, object]]:
    """POST with stream=true; the decoded JSON events before ``[DONE]`` (which must come)."""
    import json

    events: list[dict[str, object]] = []
    done = False
    with requests.post(url, json={**body, "stream": True}, stream=True, timeout=30, **kw) as r:  # type: ignore[arg-type]
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if not line:
                continue
            assert line.startswith(b"data: "), line
            payload = line[6:]
            if payload == b"[DONE]":
                done = True
                continue
            assert not done, "event after [DONE]"
            events.append(json.loads(payload))
    assert done
    return events
