"""The readiness gate's state machine, against a fake server, clock and sleep."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_specdecode.service.base import ListenerCheck, ProcessIdentity
from pytest_specdecode.service.identity import Fingerprint
from pytest_specdecode.service.readiness import (
    LOADING,
    STALE,
    UNRESPONSIVE,
    VERIFIED,
    WARMING_UP,
    ReadyResult,
    ServiceNotReady,
    wait_until_ready,
)

from .fakes import (
    GOOD_INFO,
    URL,
    Behaviour,
    FakeClock,
    FakeController,
    FakeResponse,
    FakeSession,
    read_timeout,
    refused,
    startup,
    verify_draft_tokens,
)


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


def test_a_busy_server_is_unresponsive_not_silent_and_timeouts_stay_within_the_deadline() -> None:
    def behaviour(path: str, t: float) -> FakeResponse | Exception:
        if t < 8.0 and path == "/health_generate":
            return read_timeout()
        return startup(load=0.0, warm=0.0)(path, t)  # /model_info answers at once

    result, session, _, _ = run_gate(behaviour, request_timeout=5.0, silent_timeout=3.0)
    assert [p.phase for p in result.phases] == [UNRESPONSIVE, VERIFIED]
    # First contact waits 3 s; once the server answered HTTP, the full 5 s.
    timeouts = [t for path, t, _ in session.calls if path == "/health_generate"]
    assert timeouts == [0.0, 3.25, 8.5]


def test_bad_server_info_keeps_polling_until_it_is_valid() -> None:
    def behaviour(path: str, t: float) -> FakeResponse | Exception:
        if path == "/health_generate":
            return FakeResponse(200)
        return FakeResponse(200, None if t < 1.0 else GOOD_INFO)

    result, _, _, _ = run_gate(behaviour)
    assert result.elapsed >= 1.0
    assert result.phases[0].detail == "GET /server_info: not JSON"


def test_log_tail_and_progress_lines_are_masked_when_the_server_dies() -> None:
    from pytest_specdecode.output.redact import Redactor

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


def test_a_silent_listener_fails_within_seconds_not_at_the_timeout() -> None:
    # Accepts TCP connections, never answers: every request times out.
    err, session, _, _ = run_gate(lambda path, t: read_timeout(), timeout=1800.0)
    assert isinstance(err, ServiceNotReady)
    assert err.reason == "silent"
    assert err.elapsed <= 6.0
    assert "accepts TCP connections but answered no HTTP request within 3 s" in err.summary
    assert "ss -ltnp 'sport = :30000'" in err.summary
    assert [c[0] for c in session.calls] == ["/health_generate", "/model_info"]


@pytest.mark.parametrize("api_key", [None, "k"])
def test_401_on_server_info_fails_at_once(api_key: str | None) -> None:
    def behaviour(path: str, t: float) -> FakeResponse | Exception:
        return FakeResponse(200 if path == "/health_generate" else 401)

    err, session, _, _ = run_gate(behaviour, api_key=api_key)
    assert isinstance(err, ServiceNotReady)
    assert err.reason == "auth"
    assert err.elapsed == 0.0
    assert "HTTP 401 on /server_info" in err.summary
    assert "--dflash-api-key" in err.summary
    assert len(session.calls) == 2


def test_a_server_still_loading_is_waited_for_when_nothing_is_being_started() -> None:
    # SGLang opens its port only once its model is loaded: refused, then 503, then ready.
    result, _, _, _ = run_gate(startup(load=40.0, warm=3.0), timeout=60.0, expect_running=True)
    assert isinstance(result, ReadyResult), result
    assert [p.phase for p in result.phases] == ["loading", "warming up", "verified"]
    assert result.elapsed >= 43.0


def test_nothing_listening_fails_at_the_ready_timeout_when_nothing_is_being_started() -> None:
    err, _, _, _ = run_gate(lambda path, t: refused(), timeout=60.0, expect_running=True)
    assert isinstance(err, ServiceNotReady)
    assert err.reason == "not-running"
    assert 60.0 <= err.elapsed < 61.0
    assert err.summary.startswith(
        f"no server answered at {URL} (connection refused) for config "
        "'DFLASH budget=8 window=2048' within the ready timeout of 60 s, and none is being "
        "started (--dflash-restart=never)"
    )


def test_another_process_on_the_port_fails_the_gate_even_when_it_verifies() -> None:
    controller = FakeController(
        listener=ListenerCheck(False, "port 30000 is served by pid 7 (old sim), not by pid 43")
    )
    err, _, _, _ = run_gate(startup(load=0.0, warm=0.0), controller=controller)
    assert isinstance(err, ServiceNotReady)
    assert err.reason == "foreign"
    assert "not from the process just started: port 30000 is served by pid 7" in err.summary


def test_the_result_says_how_the_restart_was_proven() -> None:
    controller = FakeController(listener=ListenerCheck(True, "port 30000 is served by pid 43"))
    result, _, _, _ = run_gate(startup(load=0.5, warm=0.0), controller=controller)
    assert result.proof == (
        "port 30000 is served by pid 43; seen down (connection refused) after the restart"
    )


def test_a_script_that_restarted_nothing_is_not_proven() -> None:
    # The old server already runs the config; the script did nothing.
    info = dict(GOOD_INFO, launch_command="sglang --x", random_seed=5)
    controller = FakeController(may_answer_stale=True)
    before = Fingerprint.of(info)
    result, _, _, _ = run_gate(
        startup(load=0.0, warm=0.0, info=info), controller=controller, before=before
    )
    assert result.phases[-1].phase == VERIFIED
    assert result.proof is None


def test_a_changed_random_seed_proves_a_new_process() -> None:
    info = dict(GOOD_INFO, launch_command="sglang --x", random_seed=6)
    before = Fingerprint.of(dict(info, random_seed=5))
    result, _, _, _ = run_gate(
        startup(load=0.0, warm=0.0, info=info),
        controller=FakeController(may_answer_stale=True),
        before=before,
    )
    assert result.proof == "random_seed changed (5 -> 6)"


def test_a_changed_fingerprint_makes_a_mismatch_final_in_script_mode() -> None:
    # A new process (other launch_command) with the wrong config: no stale grace.
    info = dict(GOOD_INFO, speculative_num_draft_tokens=4, launch_command="new")
    err, _, _, _ = run_gate(
        startup(load=0.0, warm=0.0, info=info),
        controller=FakeController(may_answer_stale=True),
        before=Fingerprint("old", None),
        stale_grace=60.0,
    )
    assert isinstance(err, ServiceNotReady)
    assert err.reason == "mismatch"
    assert err.elapsed < 1.0
