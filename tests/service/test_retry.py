"""Start-up retries and lost hosts, against fake controllers, servers and a fake clock.

Which failures are transient (retried after the pause) and which deterministic
(never), every try in the report, and a host that cannot serve handing its
configs to the next host, while a config with a bad flag fails once, where it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pytest_specdecode.config.settings import Host, Settings
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.output.progress import Progress
from pytest_specdecode.service import retry
from pytest_specdecode.service.base import (
    LaunchSpec,
    ProcessIdentity,
    ServiceController,
    ServiceStartError,
    SSHError,
)
from pytest_specdecode.service.manager import ServiceManager, ServiceUnavailable
from pytest_specdecode.service.readiness import ServiceNotReady

from .fakes import FakeClock, FakeController, FakeResponse, FakeServer, FakeSession, fake_manager

A = SpecConfig(algorithm="DFLASH", budget=4, window=2048, draft_model="d")
B = SpecConfig(algorithm="DFLASH", budget=8, window=2048, draft_model="d")
LOCAL = Settings(port=30000, port_given=True, ready_timeout=60.0, draft_model="d")


def died(status: str, log: str = "") -> ServiceNotReady:
    return ServiceNotReady(
        f"server for config 'x' at u stopped during startup after 1.0 s in phase 'loading': "
        f"{status}; full log: /tmp/l",
        reason="died",
        url="u",
        label="x",
        phase="loading",
        elapsed=1.0,
        log_tail=log,
    )


def gate(reason: str) -> ServiceNotReady:
    return ServiceNotReady("not ready", reason=reason, url="u", label="x", phase=None, elapsed=1.0)


OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
BAD_WINDOW = "ValueError: speculative_draft_window_size must be >= speculative_num_draft_tokens"


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (died("killed by signal SIGKILL"), retry.SIGNAL),
        (died("exited with status 1", f"loading\n{OOM}"), retry.CUDA_OOM),
        (died("exited with status 1", "OSError: [Errno 98] Address already in use"), "port-busy"),
        (ServiceStartError("port 30000 ... already served", reason="port-busy"), "port-busy"),
        (SSHError("SSH connection to gpu1:22 refused", reason="ssh-refused"), "ssh-unreachable"),
        (SSHError("no answer from gpu1:22 within 9 s", reason="stalled"), "ssh-unreachable"),
        (died("exited with status 2", "sglang serve: error: unrecognized arguments: --x"), "deter"),
        (died("exited with status 1", f"Traceback ...\n{BAD_WINDOW}"), "deterministic"),
        # A ValueError says the flags are wrong even when memory also ran short.
        (died("exited with status 1", f"{OOM}\n{BAD_WINDOW}"), "deterministic"),
        (SSHError("SSH login to gpu1:22 failed", reason="ssh-auth"), "deterministic"),
        (gate("timeout"), "deterministic"),
        (gate("mismatch"), "deterministic"),
        (died("exited with status 1", "RuntimeError: CUDA error: an illegal memory access"), "unk"),
    ],
)
def test_which_start_failures_are_transient(error: Exception, kind: str) -> None:
    verdict = retry.classify(error)
    assert verdict.kind.startswith(kind), verdict
    assert verdict.transient == (kind in ("signal", "cuda-oom", "port-busy", "ssh-unreachable"))


def test_a_host_is_down_after_two_transient_failures_or_no_ssh_answer() -> None:
    oom = retry.Verdict(retry.CUDA_OOM, "oom")
    ssh = retry.Verdict(retry.SSH_UNREACHABLE, "no answer")
    bad = retry.Verdict(retry.DETERMINISTIC, "exit 2")
    assert retry.host_down([oom, oom])
    assert not retry.host_down([oom])  # once may be the previous process's memory
    assert retry.host_down([ssh])
    assert not retry.host_down([oom, bad])
    assert not retry.host_down([])


@dataclass
class FlakyController(FakeController):
    """Its first ``fail_starts`` starts die at once with ``status`` and ``log``."""

    fail_starts: int = 0
    status: str = "killed by signal SIGKILL"
    log: str = ""
    applied: int = 0

    def apply(self, launch: LaunchSpec) -> ProcessIdentity:
        identity = super().apply(launch)
        self.applied += 1
        if self.applied <= self.fail_starts:
            self.log_lines = ["loading", *self.log.splitlines()]
            self.die(self.status)
        return identity


class World:
    def __init__(self, settings: Settings = LOCAL, **controller: Any) -> None:
        self.clock = FakeClock()
        self.server = FakeServer(self.clock)
        self.controller = FlakyController(server=self.server, clock=self.clock, **controller)
        self.session = FakeSession(self.clock, self.server.behaviour)
        self.settings = settings

    def manager(self) -> ServiceManager:
        return fake_manager(self.settings, self.controller, self.session, self.clock)


def test_a_transient_start_failure_is_retried_after_the_pause(tmp_path: Path) -> None:
    world = World(replace(LOCAL, start_retry_pause=7.0), fail_starts=1)
    manager = world.manager()
    handle = manager.acquire(A, tmp_path)
    assert world.controller.applied == 2
    assert 7.0 in world.clock.sleeps
    (attempt,) = handle.summary()["start_attempts"]
    assert attempt["kind"] == "signal"
    assert attempt["retried_after_seconds"] == 7.0
    assert "killed by signal SIGKILL" in attempt["error"]
    wanted = "start 1 on localhost failed (killed by signal SIGKILL): retrying in 7 s"
    assert any(wanted in m for m in manager.drain_messages())


def test_a_bad_flag_is_not_retried(tmp_path: Path) -> None:
    world = World(fail_starts=5, status="exited with status 2", log="error: unrecognized")
    manager = world.manager()
    with pytest.raises(ServiceUnavailable, match="exited with status 2"):
        manager.acquire(A, tmp_path)
    assert world.controller.applied == 1
    assert world.clock.sleeps.count(LOCAL.start_retry_pause) == 0
    log = manager.start_log(A)
    assert log is not None
    (attempt,) = log["start_attempts"]
    assert (attempt["kind"], attempt["retried_after_seconds"]) == ("deterministic", None)


def test_retries_run_out_and_the_error_says_every_start_failed(tmp_path: Path) -> None:
    world = World(replace(LOCAL, start_retries=2), fail_starts=9, log=OOM)
    with pytest.raises(ServiceUnavailable, match=r"all 3 starts failed: CUDA out of memory"):
        world.manager().acquire(A, tmp_path)
    assert world.controller.applied == 3


def test_no_retries_when_asked_for_none(tmp_path: Path) -> None:
    world = World(replace(LOCAL, start_retries=0), fail_starts=1)
    with pytest.raises(ServiceUnavailable, match="killed by signal SIGKILL"):
        world.manager().acquire(A, tmp_path)
    assert world.controller.applied == 1


# --- several hosts: one is lost ----------------------------------------------

SCRIPT = replace(
    LOCAL,
    control="script",
    hosts=(Host("gpu1"), Host("gpu2")),
    restart_cmd="/opt/reconfig {budget}",
    restart="always",
    start_retry_pause=5.0,
)


@dataclass
class Hosts:
    """Two fake hosts; ``unreachable`` ones refuse SSH, ``bad_flags`` configs exit 2."""

    clock: FakeClock = field(default_factory=FakeClock)
    servers: dict[str, FakeServer] = field(default_factory=dict)
    controllers: dict[str, FlakyController] = field(default_factory=dict)
    unreachable: set[str] = field(default_factory=set)
    bad_flags: set[int] = field(default_factory=set)

    def factory(self, settings: Settings, log_dir: Path, root: Any, host: Any) -> ServiceController:
        name = host.name
        if name not in self.controllers:
            self.servers[name] = FakeServer(self.clock)
            hosts = self

            @dataclass
            class Remote(FlakyController):
                def apply(self, launch: LaunchSpec) -> ProcessIdentity:
                    if name in hosts.unreachable:
                        raise SSHError(f"SSH connection to {name}:22 refused", reason="ssh-refused")
                    budget = int(launch.script.split()[-1]) if launch.script else 0
                    self.fail_starts = self.applied + 1 if budget in hosts.bad_flags else 0
                    self.status = "exited with status 2"
                    return super().apply(launch)

            self.controllers[name] = Remote(server=self.servers[name], clock=self.clock)
        return self.controllers[name]

    def behaviour(self, path: str, t: float) -> FakeResponse | Exception:
        raise AssertionError("dispatched by get()")

    def session(self) -> Any:
        hosts = self

        class ByHost(FakeSession):
            def get(self, url: str, *, timeout: float, headers: Any, **kwargs: Any) -> FakeResponse:
                server = hosts.servers.get(urlsplit(url).hostname or "")
                self.behaviour = server.behaviour if server else (lambda p, t: _refused())
                return super().get(url, timeout=timeout, headers=headers, **kwargs)

        return ByHost(self.clock, self.behaviour)

    def manager(self) -> ServiceManager:
        return ServiceManager(
            SCRIPT,
            progress=Progress(None, isatty=False),
            controller_factory=self.factory,
            http=self.session(),
            clock=self.clock,
            sleep=self.clock.sleep,
        )


def _refused() -> Exception:
    from .fakes import refused

    return refused()


def test_a_host_that_refuses_ssh_hands_its_configs_to_the_next(tmp_path: Path) -> None:
    hosts = Hosts(unreachable={"gpu1"})
    manager = hosts.manager()
    handle = manager.acquire(A, tmp_path)
    assert handle.host == "gpu2"
    assert handle.base_url == "http://gpu2:30000"
    (move,) = handle.summary()["moves"]
    assert (move["from"], move["to"]) == ("gpu1", "gpu2")
    assert "refused" in move["reason"]
    tried = handle.summary()["start_attempts"]
    assert [(a["host"], a["kind"]) for a in tried] == [("gpu1", "ssh-unreachable")] * 2
    # The next config goes to gpu2 at once: gpu1 is down for the rest of the run.
    second = manager.acquire(B, tmp_path)
    assert second.host == "gpu2"
    assert second.summary()["moves"] == []
    assert [s["speculative_num_draft_tokens"] for s in hosts.servers["gpu2"].starts] == [4, 8]


def test_a_bad_flag_fails_once_on_one_host_and_is_not_moved(tmp_path: Path) -> None:
    hosts = Hosts(bad_flags={4})
    manager = hosts.manager()
    with pytest.raises(ServiceUnavailable, match="exited with status 2"):
        manager.acquire(A, tmp_path)
    assert hosts.controllers["gpu1"].applied == 1
    assert "gpu2" not in hosts.controllers
    assert manager.acquire(B, tmp_path).host == "gpu1"


def test_every_host_lost_fails_the_config_with_one_line(tmp_path: Path) -> None:
    hosts = Hosts(unreachable={"gpu1", "gpu2"})
    with pytest.raises(ServiceUnavailable, match="every host of the run is down") as info:
        hosts.manager().acquire(A, tmp_path)
    assert "\n" not in info.value.summary
