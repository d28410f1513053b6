"""The readiness gate's state machine, against a fake server, clock and sleep."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from pytest_specdecode.service.base import LaunchSpec, ProcessIdentity
from pytest_specdecode.service.readiness import (
    LOADING,
    STALE,
    UNRESPONSIVE,
    VERIFIED,
    WARMING_UP,
    ServiceNotReady,
    wait_until_ready,
)

URL = "http://127.0.0.1:30000"
GOOD_INFO = {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 8}


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.sleeps.append(seconds)
        self.now += seconds


class FakeResponse:
    def __init__(self, status: int, body: Any = None) -> None:
        self.status_code = status
        self._body = body
        self.closed = False

    def json(self) -> Any:
        if self._body is None:
            raise ValueError("no JSON")
        return self._body

    def close(self) -> None:
        self.closed = True


def refused() -> Exception:
    return requests.exceptions.ConnectionError(ConnectionRefusedError(111, "Connection refused"))


# A behaviour maps (path, seconds since start) to a response or an exception to raise.
Behaviour = Callable[[str, float], "FakeResponse | Exception"]


class FakeSession:
    def __init__(self, clock: FakeClock, behaviour: Behaviour) -> None:
        self.clock = clock
        self.start = clock.now
        self.behaviour = behaviour
        self.calls: list[tuple[str, float, dict[str, str]]] = []

    def get(self, url: str, *, timeout: float, headers: Mapping[str, str]) -> FakeResponse:
        assert 0 < timeout <= 10.0
        path = url.removeprefix(URL)
        self.calls.append((path, self.clock.now - self.start, dict(headers)))
        outcome = self.behaviour(path, self.clock.now - self.start)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def startup(load: float = 1.0, warm: float = 1.0, info: dict[str, Any] | None = None) -> Behaviour:
    """A server that refuses for ``load`` s, answers 503 for ``warm`` s, then 200."""

    def behaviour(path: str, t: float) -> FakeResponse | Exception:
        if t < load:
            return refused()
        if path == "/health_generate":
            return FakeResponse(503 if t < load + warm else 200)
        return FakeResponse(200, info if info is not None else GOOD_INFO)

    return behaviour


def verify_draft_tokens(expected: int) -> Callable[[Mapping[str, Any]], list[str]]:
    def verify(info: Mapping[str, Any]) -> list[str]:
        got = info.get("speculative_num_draft_tokens")
        if got != expected:
            return [f"speculative_num_draft_tokens: expected {expected!r}, server has {got!r}"]
        return []

    return verify


@dataclass
class FakeController:
    kind: str = "fake"
    may_answer_stale: bool = False
    fail_at: float | None = None
    clock: FakeClock | None = None
    start: float = 100.0
    log_lines: list[str] = field(default_factory=lambda: [f"log line {i}" for i in range(50)])
    failure_calls: int = 0

    def apply(self, launch: LaunchSpec) -> ProcessIdentity:
        return ProcessIdentity(kind=self.kind, pid=42)

    def alive(self) -> bool:
        return self.failure() is None

    def failure(self) -> str | None:
        self.failure_calls += 1
        assert self.clock is not None
        if self.fail_at is not None and self.clock.now - self.start >= self.fail_at:
            return "exited with status 3"
        return None

    def logs(self, tail: int = 30) -> str:
        return "\n".join(self.log_lines[-tail:])

    def log_location(self) -> str | None:
        return "/tmp/fake.log"

    def identity(self) -> ProcessIdentity | None:
        return ProcessIdentity(kind=self.kind, pid=42)

    def stop(self) -> None:
        pass

    def restore(self) -> None:
        pass


def run_gate(
    behaviour: Behaviour,
    *,
    timeout: float = 1800.0,
    controller: FakeController | None = None,
    verify: Callable[[Mapping[str, Any]], Any] | None = None,
    **kwargs: Any,
) -> tuple[Any, FakeSession, FakeClock, list[tuple[str, float, str | None]]]:
    clock = FakeClock()
    if controller is not None:
        controller.clock = clock
        controller.start = clock.now
    session = FakeSession(clock, behaviour)
    progress: list[tuple[str, float, str | None]] = []
    result: Any = None
    try:
        result = wait_until_ready(
            URL,
            verify=verify or verify_draft_tokens(8),
            label="DFLASH budget=8 window=2048",
            timeout=timeout,
            controller=controller,
            session=session,  # type: ignore[arg-type]
            clock=clock,
            sleep=clock.sleep,
            on_progress=lambda phase, elapsed, line: progress.append((phase, elapsed, line)),
            **kwargs,
        )
    except ServiceNotReady as exc:
        result = exc
    return result, session, clock, progress


def test_refused_then_503_then_verified() -> None:
    result, session, _, progress = run_gate(
        startup(load=1.0, warm=1.0), controller=FakeController()
    )
    assert [p.phase for p in result.phases] == [LOADING, WARMING_UP, VERIFIED]
    assert [p.detail for p in result.phases[:2]] == ["connection refused", "HTTP 503"]
    assert result.phases[1].at == pytest.approx(1.0, abs=0.3)
    assert result.phases[2].at == pytest.approx(2.0, abs=0.3)
    assert result.server_info == GOOD_INFO
    assert result.identity == ProcessIdentity(kind="fake", pid=42)
    assert "loading (connection refused) 0.0s -> warming up (HTTP 503)" in result.describe_phases()
    # /server_info is read only once the server can generate.
    first_info = next(t for path, t, _ in session.calls if path == "/server_info")
    assert first_info >= 2.0
    # Progress: every phase change, with the last log line.
    assert [p[0] for p in progress][:1] == [LOADING]
    assert {p[0] for p in progress} >= {LOADING, WARMING_UP, VERIFIED}
    assert progress[-1][2] == "log line 49"


def test_ready_within_one_poll_interval() -> None:
    result, _, clock, _ = run_gate(startup(load=0.0, warm=3.0), poll_interval=0.25)
    assert 3.0 <= result.elapsed <= 3.25 + 1e-9
    assert max(clock.sleeps) <= 0.25


def test_timeout_names_url_config_phase_elapsed_and_log_tail() -> None:
    err, _, _, _ = run_gate(startup(load=1e9), timeout=5.0, controller=FakeController())
    assert isinstance(err, ServiceNotReady)
    assert err.reason == "timeout"
    first, _, rest = str(err).partition("\n")
    assert URL in first
    assert "'DFLASH budget=8 window=2048'" in first
    assert "last phase 'loading' (connection refused)" in first
    assert "not ready after 5.0 s" in first
    assert "/tmp/fake.log" in first
    assert rest.splitlines()[0] == "--- last 30 log lines ---"
    assert rest.splitlines()[-1] == "log line 49"
    assert "log line 19" not in rest
    assert err.phase == LOADING


def test_timeout_while_warming_up() -> None:
    err, _, _, _ = run_gate(startup(load=0.5, warm=1e9), timeout=3.0)
    assert isinstance(err, ServiceNotReady)
    assert "last phase 'warming up' (HTTP 503)" in err.summary


def test_dead_process_fails_fast_not_at_timeout() -> None:
    controller = FakeController(fail_at=1.2)
    err, _, _, _ = run_gate(startup(load=1e9), timeout=1800.0, controller=controller)
    assert isinstance(err, ServiceNotReady)
    assert err.reason == "died"
    assert err.elapsed < 2.5
    assert "exited with status 3" in err.summary
    assert err.log_tail.endswith("log line 49")


def test_failure_is_checked_at_the_configured_interval() -> None:
    controller = FakeController()
    run_gate(startup(load=5.0, warm=0.0), controller=controller, failure_check_interval=1.0)
    # about one check per second over 5 s, plus one just before declaring ready
    assert 5 <= controller.failure_calls <= 8


def test_mismatch_names_the_field_and_fails_at_once() -> None:
    info = dict(GOOD_INFO, speculative_num_draft_tokens=4)
    err, session, _, _ = run_gate(
        startup(load=0.5, warm=0.5, info=info), controller=FakeController()
    )
    assert isinstance(err, ServiceNotReady)
    assert err.reason == "mismatch"
    assert "speculative_num_draft_tokens: expected 8, server has 4" in err.summary
    assert err.mismatches == ["speculative_num_draft_tokens: expected 8, server has 4"]
    assert sum(path == "/server_info" for path, _, _ in session.calls) == 1


@dataclass
class Outcome:
    mismatches: list[str]
    unverified: list[str]
    ok: bool = True


def test_verification_object_passes_unverified_notes_through() -> None:
    def verify(info: Mapping[str, Any]) -> Outcome:
        return Outcome([], ["topk: passed via SGLANG_DDTREE_MAX_TOPK, not visible in /server_info"])

    result, _, _, _ = run_gate(startup(load=0.0, warm=0.0), verify=verify)
    assert result.unverified == [
        "topk: passed via SGLANG_DDTREE_MAX_TOPK, not visible in /server_info"
    ]


def old_then_new(switch_at: float, *, down_between: bool) -> Behaviour:
    """The old process (budget 4) answers until ``switch_at``; then the new one (budget 8)."""

    def behaviour(path: str, t: float) -> FakeResponse | Exception:
        if t < switch_at:
            if path == "/health_generate":
                return FakeResponse(200)
            return FakeResponse(200, dict(GOOD_INFO, speculative_num_draft_tokens=4))
        if down_between and t < switch_at + 1.0:
            return refused()
        return startup(load=0.0, warm=0.0)(path, t)

    return behaviour


def test_stale_old_process_gets_a_grace_period_in_script_mode() -> None:
    controller = FakeController(may_answer_stale=True)
    result, _, _, _ = run_gate(
        old_then_new(2.0, down_between=False), controller=controller, stale_grace=10.0
    )
    assert [p.phase for p in result.phases] == [STALE, VERIFIED]
    assert "old process" in result.phases[0].detail


def test_stale_mismatch_fails_after_the_grace() -> None:
    controller = FakeController(may_answer_stale=True)
    err, _, _, _ = run_gate(
        old_then_new(1e9, down_between=False), controller=controller, stale_grace=3.0
    )
    assert isinstance(err, ServiceNotReady)
    assert err.reason == "mismatch"
    assert 3.0 <= err.elapsed < 4.0
    assert "still after 3 s" in err.summary


def test_mismatch_after_the_server_was_seen_down_is_final_even_in_script_mode() -> None:
    def behaviour(path: str, t: float) -> FakeResponse | Exception:
        if t < 1.0:
            return refused()
        if path == "/health_generate":
            return FakeResponse(200)
        return FakeResponse(200, dict(GOOD_INFO, speculative_num_draft_tokens=4))

    controller = FakeController(may_answer_stale=True)
    err, _, _, _ = run_gate(behaviour, controller=controller, stale_grace=60.0)
    assert isinstance(err, ServiceNotReady)
    assert err.reason == "mismatch"
    assert err.elapsed < 2.0


@pytest.mark.parametrize(
    ("api_key", "expected"), [(None, "needs an API key"), ("k", "refused the API key")]
)
def test_401_is_a_clear_api_key_error(api_key: str | None, expected: str) -> None:
    err, session, _, _ = run_gate(lambda path, t: FakeResponse(401), api_key=api_key)
    assert isinstance(err, ServiceNotReady)
    assert err.reason == "auth"
    assert expected in err.summary
    assert "--dflash-api-key" in err.summary
    assert len(session.calls) == 1
    assert session.calls[0][2] == ({"Authorization": "Bearer k"} if api_key else {})


def test_404_means_not_sglang() -> None:
    err, _, _, _ = run_gate(lambda path, t: FakeResponse(404))
    assert isinstance(err, ServiceNotReady)
    assert err.reason == "not-sglang"


def test_old_server_info_path_is_used_when_the_new_one_is_missing() -> None:
    def behaviour(path: str, t: float) -> FakeResponse | Exception:
        if path == "/server_info":
            return FakeResponse(404)
        return FakeResponse(200, GOOD_INFO if path == "/get_server_info" else None)

    result, session, _, _ = run_gate(behaviour)
    assert result.server_info == GOOD_INFO
    assert [c[0] for c in session.calls] == ["/health_generate", "/server_info", "/get_server_info"]


def test_read_timeout_is_unresponsive_and_request_timeouts_stay_within_the_deadline() -> None:
    def behaviour(path: str, t: float) -> FakeResponse | Exception:
        if t < 2.0:
            return requests.exceptions.ReadTimeout("read timed out")
        return startup(load=0.0, warm=0.0)(path, t)

    result, _, _, _ = run_gate(behaviour, request_timeout=5.0)
    assert [p.phase for p in result.phases] == [UNRESPONSIVE, VERIFIED]


def test_bad_server_info_keeps_polling_until_it_is_valid() -> None:
    def behaviour(path: str, t: float) -> FakeResponse | Exception:
        if path == "/health_generate":
            return FakeResponse(200)
        return FakeResponse(200, None if t < 1.0 else GOOD_INFO)

    result, _, _, _ = run_gate(behaviour)
    assert result.elapsed >= 1.0
    assert result.phases[0].detail == "GET /server_info: not JSON"


def test_log_tail_and_progress_lines_are_masked_when_the_server_dies() -> None:
    from pytest_specdecode.redact import Redactor

    secret = "sk-gate-7f3a9c1e"
    controller = FakeController(fail_at=0.5)
    controller.log_lines = [f"server_args=ServerArgs(port=1, api_key='{secret}')", "Load weight"]
    err, _, _, progress = run_gate(
        startup(load=1e9), controller=controller, redact=Redactor([secret])
    )
    assert isinstance(err, ServiceNotReady)
    assert err.reason == "died"
    assert "api_key='***'" in err.log_tail
    assert secret not in str(err)
    assert all(secret not in (line or "") for _, _, line in progress)
