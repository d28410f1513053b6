"""The service manager's decisions, against a fake controller, server and clock (milliseconds).

Whether to restart (auto / always / never), one start per config, the error
kept per config, the proof of a restart, a server that dies after the gate,
and the xdist lease path: one worker switches, the others join, and a config
becomes live only when the scheduler made it active.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_specdecode.config.settings import Host, Settings
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.distributed.lease import HostLease, write_active
from pytest_specdecode.service.base import ListenerCheck, ServiceController
from pytest_specdecode.service.manager import (
    OtherConfigLive,
    ServiceManager,
    ServiceUnavailable,
)

from .fakes import FakeClock, FakeController, FakeServer, FakeSession, fake_manager, info_from_argv

A = SpecConfig(algorithm="DFLASH", budget=4, window=2048, draft_model="d")
B = SpecConfig(algorithm="DFLASH", budget=8, window=2048, draft_model="d")
LOCAL = Settings(port=30000, port_given=True, ready_timeout=60.0, draft_model="d")


class World:
    """One fake server, its controller, and managers built around them."""

    def __init__(self, settings: Settings = LOCAL, **controller: object) -> None:
        self.clock = FakeClock()
        self.server = FakeServer(self.clock)
        self.controller = FakeController(server=self.server, clock=self.clock, **controller)  # type: ignore[arg-type]
        self.settings = settings
        self.session = FakeSession(self.clock, self.server.behaviour)

    def factory(self, *args: object) -> ServiceController:
        return self.controller

    def manager(self, settings: Settings | None = None, **kwargs: object) -> ServiceManager:
        return fake_manager(
            settings or self.settings, self.controller, self.session, self.clock, **kwargs
        )


def test_each_config_starts_once_and_its_handle_is_reused(tmp_path: Path) -> None:
    world = World()
    manager = world.manager()
    first = manager.acquire(A, tmp_path)
    assert manager.acquire(A, tmp_path) is first
    second = manager.acquire(B, tmp_path)
    assert [s["speculative_num_draft_tokens"] for s in world.server.starts] == [4, 8]
    assert second.server_info["speculative_num_draft_tokens"] == 8
    # auto looked at the live server first: it ran budget 4, so the new one differs.
    assert second.restarted
    assert second.proof == (
        "seen down (connection refused) after the restart; launch_command changed"
    )
    assert second.ready_seconds == pytest.approx(1.5, abs=0.3)
    assert [name for name, _ in second.phases] == ["loading", "warming up", "verified"]
    messages = manager.drain_messages()
    assert messages[0].startswith("DFLASH budget=4 window=2048")
    assert "ready in 1.5s (loading (refused) -> warming up (503) -> verified)" in messages[1]
    manager.shutdown()
    assert world.controller.stopped == 1


def test_auto_keeps_a_live_server_that_passes_the_probe(tmp_path: Path) -> None:
    world = World()
    world.server.running(info_from_argv(world.manager().renderer.render(A).argv))
    handle = world.manager().acquire(A, tmp_path)
    assert not handle.restarted
    assert world.controller.launches == []


def test_always_restarts_a_live_server_anyway(tmp_path: Path) -> None:
    world = World(replace(LOCAL, restart="always"))
    world.server.running(info_from_argv(world.manager().renderer.render(A).argv))
    world.manager().acquire(A, tmp_path)
    assert len(world.controller.launches) == 1


def test_a_failed_config_keeps_its_error_and_is_not_started_again(tmp_path: Path) -> None:
    world = World(fail_at=0.5)
    manager = world.manager()
    with pytest.raises(ServiceUnavailable, match=r"stopped during startup.*exited with status 3"):
        manager.acquire(A, tmp_path)
    with pytest.raises(ServiceUnavailable, match="exited with status 3") as again:
        manager.acquire(A, tmp_path)
    assert len(world.controller.launches) == 1
    err = again.value
    assert "\n" not in err.summary
    # The cause's details travel with it: reason, phase, log tail, config.
    assert (err.reason, err.phase, err.config) == ("died", "loading", A.label())
    assert err.log_tail.endswith("log line 49")
    assert str(err).endswith("log line 49")
    assert again.value.__context__ is None  # no "During handling of the above exception"


def test_never_with_nothing_listening_waits_the_ready_timeout_once(tmp_path: Path) -> None:
    # A server still loading refuses connections too (SGLang opens its port after the
    # model loads): it gets the ready timeout; the endpoint's next config is not waited
    # for again.
    world = World(replace(LOCAL, restart="never"))
    manager = world.manager()
    started = world.clock.now
    with pytest.raises(
        ServiceUnavailable, match=r"no server answered at http://127\.0\.0\.1:30000"
    ) as first:
        manager.acquire(A, tmp_path)
    assert first.value.reason == "not-running"
    assert 60.0 <= world.clock.now - started < 61.0
    again = world.clock.now
    with pytest.raises(ServiceUnavailable, match=r"no server answered at"):
        manager.acquire(B, tmp_path)
    assert world.clock.now - again < 1.0


def test_never_with_another_config_live_skips_with_the_reason(tmp_path: Path) -> None:
    world = World(replace(LOCAL, restart="never"))
    world.server.running(info_from_argv(world.manager().renderer.render(B).argv))
    with pytest.raises(OtherConfigLive, match="not DFLASH budget=4"):
        world.manager().acquire(A, tmp_path)


def test_a_401_fails_at_once_not_at_the_ready_timeout(tmp_path: Path) -> None:
    world = World()
    world.server.status = 401
    started = world.clock.now
    with pytest.raises(ServiceUnavailable, match="needs an API key") as info:
        world.manager().acquire(A, tmp_path)
    assert info.value.reason == "auth"
    assert world.clock.now - started < 1.0


def test_a_server_that_dies_after_the_gate_is_known_gone(tmp_path: Path) -> None:
    world = World()
    handle = world.manager().acquire(A, tmp_path)
    assert handle.gone() is None
    world.controller.die("killed by signal SIGKILL")
    gone = handle.gone()
    assert gone is not None
    assert gone.reason == "died"
    assert "exited after it passed the gate: killed by signal SIGKILL" in gone.summary
    assert "'DFLASH budget=4 window=2048'" in gone.summary
    assert gone.log_tail.endswith("log line 49")


def test_another_process_on_the_port_is_not_accepted(tmp_path: Path) -> None:
    world = World(listener=ListenerCheck(False, "port 30000 is served by pid 7 (old)"))
    with pytest.raises(ServiceUnavailable, match="not from the process just started") as info:
        world.manager().acquire(A, tmp_path)
    assert info.value.reason == "foreign"


SCRIPT = replace(
    LOCAL, control="script", hosts=(Host("gpu"),), restart_cmd="/opt/reconfig {budget}"
)


def test_a_script_that_changed_nothing_is_reported_as_not_proven(tmp_path: Path) -> None:
    world = World(SCRIPT, kind="script", may_answer_stale=True, noop=True)
    manager = world.manager()
    world.server.running(info_from_argv(manager.renderer.render(A).argv))
    handle = world.manager(replace(SCRIPT, restart="always")).acquire(A, tmp_path)
    assert len(world.controller.launches) == 1  # the script ran
    assert handle.restarted
    assert handle.proof is None
    assert handle.summary()["restart_proven"] is False
    assert "restart not proven" in handle.ready_message()


def test_a_script_that_restarted_the_server_is_proven(tmp_path: Path) -> None:
    world = World(SCRIPT, kind="script", may_answer_stale=True)
    world.server.running(info_from_argv(world.manager().renderer.render(B).argv))
    handle = world.manager().acquire(A, tmp_path)
    assert handle.proof == (
        "seen down (connection refused) after the restart; launch_command changed"
    )
    assert handle.summary()["restart_proven"] is True


REMOTE = replace(LOCAL, control="systemd", hosts=(Host("gpu"),), unit="sglang.service")


def test_under_the_lease_one_worker_switches_and_the_other_joins(tmp_path: Path) -> None:
    world = World(REMOTE)
    alive = {1, 2}.__contains__
    leases = tmp_path / "leases"
    write_active(leases, "gpu", A.key())

    def lease(worker: str, pid: int) -> HostLease:
        return HostLease(leases, "gpu", worker, pid=pid, alive=alive, poll_interval=0.01)

    first = world.manager(lease=lease("gw0", 1)).acquire(A, tmp_path)
    joined = world.manager(lease=lease("gw1", 2)).acquire(A, tmp_path)
    assert first.restarted
    assert not joined.restarted
    assert len(world.controller.launches) == 1

    # B is not active yet: gw1 waits until the scheduler says so, then switches.
    waits: list[float] = []

    def scheduler_moves_on(seconds: float) -> None:
        waits.append(seconds)
        write_active(leases, "gpu", B.key())

    waiting = HostLease(leases, "gpu", "gw1", pid=2, alive=alive, sleep=scheduler_moves_on)
    handle = world.manager(lease=waiting).acquire(B, tmp_path)
    assert waits == [0.1]
    assert handle.restarted
    assert [s["speculative_num_draft_tokens"] for s in world.server.starts] == [4, 8]


def test_a_start_says_when_it_began_and_when_it_was_ready(tmp_path: Path) -> None:
    world = World()
    handle = world.manager(wall=lambda: 1_700_000_000.25).acquire(A, tmp_path)
    summary = handle.summary()
    assert summary["started_at"] == 1_700_000_000.25
    assert summary["ready_at"] == pytest.approx(1_700_000_000.25 + handle.ready_seconds, abs=1e-3)
