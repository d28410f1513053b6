"""One path per concern: one probe, one lease acquire path.

Every look at a server (the readiness gate after a restart, auto mode's look
at the live server, external mode, a worker joining another's server) goes
through :meth:`ServerProbe.look`: a spy on it sees each mode, and the fake
HTTP session sees no request from anywhere else. Under pytest-xdist the lease
is built in one place, :func:`worker_lease`, under the worker's real id, and
taken on one path (``ServiceManager._leased`` -> ``HostLease.turn``).
"""

from __future__ import annotations

import ast
import inspect
import json
from dataclasses import replace
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

import pytest_specdecode
from pytest_specdecode.config.settings import Host, Settings
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.distributed.lease import HostLease, write_active
from pytest_specdecode.distributed.placement import host_key
from pytest_specdecode.distributed.shared_files import LEASE_DIR, LEASES, PORT
from pytest_specdecode.distributed.worker_side import worker_lease
from pytest_specdecode.output.progress import Progress
from pytest_specdecode.service import probe as probe_module
from pytest_specdecode.service.manager import OtherConfigLive, ServiceManager

from .fakes import (
    FakeClock,
    FakeController,
    FakeResponse,
    FakeServer,
    FakeSession,
    fake_manager,
    info_from_argv,
)

A = SpecConfig(algorithm="DFLASH", budget=4, window=2048, draft_model="d")
B = SpecConfig(algorithm="DFLASH", budget=8, window=2048, draft_model="d")
LOCAL = Settings(port=30000, port_given=True, ready_timeout=60.0, draft_model="d")
REMOTE = replace(LOCAL, control="systemd", hosts=(Host("gpu"),), unit="sglang.service")
PACKAGE = Path(pytest_specdecode.__file__).parent


class Spied:
    """A fake server whose every request must come from inside ``ServerProbe.look``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, settings: Settings) -> None:
        self.clock = FakeClock()
        self.server = FakeServer(self.clock)
        self.controller = FakeController(server=self.server, clock=self.clock)
        self.settings = settings
        self.callers: list[str] = []
        self.outside: list[str] = []
        self._inside = 0
        session = FakeSession(self.clock, self.server.behaviour)
        real_get, real_look = session.get, probe_module.ServerProbe.look

        def get(url: str, *, timeout: float, headers: Any, **kwargs: Any) -> FakeResponse:
            if not self._inside:
                self.outside.append(url)
            return real_get(url, timeout=timeout, headers=headers, **kwargs)

        def look(probe: probe_module.ServerProbe, budget: float | None = None) -> Any:
            self.callers.append(inspect.stack()[1].function)
            self._inside += 1
            try:
                return real_look(probe, budget)
            finally:
                self._inside -= 1

        monkeypatch.setattr(session, "get", get)
        monkeypatch.setattr(probe_module.ServerProbe, "look", look)
        self.session = session

    def manager(self, settings: Settings | None = None, **kwargs: Any) -> ServiceManager:
        return fake_manager(
            settings or self.settings, self.controller, self.session, self.clock, **kwargs
        )


def test_a_restart_in_auto_mode_looks_and_gates_through_the_one_probe(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    world = Spied(monkeypatch, LOCAL)
    handle = world.manager().acquire(A, tmp_path)
    assert handle.restarted
    # auto's look at the live server (probe_live) and the gate's polls (_Gate.run).
    assert set(world.callers) == {"probe_live", "run"}
    assert world.session.calls, "the server was never asked"
    assert world.outside == []


def test_auto_keeping_a_live_server_uses_the_one_probe(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    world = Spied(monkeypatch, LOCAL)
    world.server.running(info_from_argv(world.manager().renderer.render(A).argv))
    assert not world.manager().acquire(A, tmp_path).restarted
    assert set(world.callers) == {"probe_live"}
    assert world.outside == []


def test_external_mode_verifies_and_refuses_through_the_one_probe(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    world = Spied(monkeypatch, replace(LOCAL, restart="never"))
    world.server.running(info_from_argv(world.manager().renderer.render(A).argv))
    assert not world.manager().acquire(A, tmp_path).restarted
    with pytest.raises(OtherConfigLive):
        world.manager().acquire(B, tmp_path)
    assert set(world.callers) == {"run"}  # the gate, with expect_running
    assert world.outside == []


def test_a_joining_worker_verifies_through_the_one_probe(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    world = Spied(monkeypatch, REMOTE)
    leases = tmp_path / "leases"
    write_active(leases, "gpu", A.key())

    def lease(worker: str, pid: int) -> HostLease:
        return HostLease(leases, "gpu", worker, pid=pid, alive={1, 2}.__contains__)

    world.manager(lease=lease("gw0", 1)).acquire(A, tmp_path)
    world.callers.clear()
    assert not world.manager(lease=lease("gw1", 2)).acquire(A, tmp_path).restarted
    assert set(world.callers) == {"probe_live"}
    assert world.outside == []


# --- one lease path ---------------------------------------------------------


@cache
def _calls() -> dict[str, set[str]]:
    """Called name -> ``module:function`` (the innermost def) of each call in the package."""
    found: dict[str, set[str]] = {}

    class Calls(ast.NodeVisitor):
        def __init__(self, module: str) -> None:
            self.module, self.where = module, "<module>"

        def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
            outer, self.where = self.where, node.name
            self.generic_visit(node)
            self.where = outer

        def visit_Call(self, node: ast.Call) -> None:
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if name:
                found.setdefault(name, set()).add(f"{self.module}:{self.where}")
            self.generic_visit(node)

    for path in sorted(PACKAGE.rglob("*.py")):
        Calls(str(path.relative_to(PACKAGE))).visit(ast.parse(path.read_text(), str(path)))
    return found


def calls_of(name: str) -> list[str]:
    return sorted(_calls().get(name, set()))


def test_the_lease_is_built_and_taken_on_one_path() -> None:
    # Built once, under the worker's id (the fixture once built its own with rank 0).
    assert calls_of("HostLease") == ["distributed/worker_side.py:lease_for"]
    assert calls_of("worker_lease") == ["session/target.py:services"]
    # Taken on one path: the manager's lease path -> a turn of the lease.
    assert calls_of("turn") == ["service/manager.py:_leased"]


def test_each_worker_leases_under_its_own_id(tmp_path: Path) -> None:
    clock = FakeClock()
    server = FakeServer(clock)
    controller = FakeController(server=server, clock=clock)

    def worker(name: str) -> tuple[ServiceManager, Any]:
        config = SimpleNamespace(
            workerinput={"workerid": name, LEASE_DIR: str(tmp_path), PORT: 30000}
        )
        bound = worker_lease(cast(pytest.Config, config), REMOTE)
        assert bound is not None
        manager = ServiceManager(
            REMOTE,
            progress=Progress(None, isatty=False),
            controller_factory=lambda *args: controller,
            target=bound.host,
            port=bound.port,
            lease=bound.lease,
            lease_for=bound.lease_for,
            http=FakeSession(clock, server.behaviour),  # type: ignore[arg-type]
            clock=clock,
            sleep=clock.sleep,
        )
        return manager, bound

    first, bound3 = worker("gw3")
    second, bound5 = worker("gw5")
    assert (bound3.lease.worker, bound5.lease.worker) == ("gw3", "gw5")
    assert bound3.lease_for(Host("other")).worker == "gw3"  # a move keeps the id too
    assert first.acquire(A, tmp_path).restarted
    assert not second.acquire(A, tmp_path).restarted
    state = json.loads(bound3.lease.state_path.read_text())
    assert sorted(state["users"]) == ["gw3", "gw5"]
    assert bound3.lease.state_path.parent == tmp_path / LEASES
    assert bound3.lease.state_path.stem == host_key(REMOTE, Host("gpu"), 30000)
    assert sorted(p.stem for p in (tmp_path / LEASES / "workers").glob("*.pid")) == ["gw3", "gw5"]
