"""Fixtures that run the simulator as a real subprocess and always stop it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path

import pytest
import requests

from pytest_specdecode.processes.children import free_port

from ..conftest import DFLASH, FAST, Sim, run_sim

__all__ = ["DFLASH", "FAST", "Sim", "free_port", "run_sim", "stream_events"]


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
