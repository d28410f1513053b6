"""LocalController and the readiness gate against the real simulator process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.processes.children import free_port
from pytest_specdecode.service.base import LINE_CHARS, LaunchSpec, ServiceStartError, last_lines
from pytest_specdecode.service.local import LocalController, describe_exit
from pytest_specdecode.service.readiness import (
    LOADING,
    VERIFIED,
    WARMING_UP,
    ServiceNotReady,
    wait_until_ready,
)
from pytest_specdecode.statefiles import wait_until

from .conftest import dialect_verify, pid_gone, sim_argv

LABEL = "DFLASH budget=8 window=2048"


def gate(port: int, controller: LocalController, timeout: float = 30.0, **kwargs: object):  # type: ignore[no-untyped-def]
    return wait_until_ready(
        f"http://127.0.0.1:{port}",
        controller=controller,
        verify=kwargs.pop("verify", dialect_verify()),  # type: ignore[arg-type]
        label=LABEL,
        timeout=timeout,
        poll_interval=0.05,
        failure_check_interval=0.2,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture
def controller(tmp_path: Path):  # type: ignore[no-untyped-def]
    ctl = LocalController(tmp_path / "logs", stop_grace=5.0)
    yield ctl
    ctl.stop()


def test_gate_passes_through_refused_503_verified_and_stop_ends_the_group(
    controller: LocalController,
) -> None:
    port = free_port()
    identity = controller.apply(LaunchSpec(argv=sim_argv(port), label=LABEL))
    assert identity.kind == "local"
    assert identity.pid is not None
    progress: list[str] = []
    ready = gate(port, controller, on_progress=lambda phase, elapsed, line: progress.append(phase))
    assert [p.phase for p in ready.phases] == [LOADING, WARMING_UP, VERIFIED]
    assert [p.detail for p in ready.phases[:2]] == ["connection refused", "HTTP 503"]
    assert ready.server_info["speculative_num_draft_tokens"] == 8
    assert ready.identity == identity
    assert progress[0] == LOADING
    assert progress[-1] == VERIFIED
    assert "fired up and ready to roll" in controller.logs()
    assert controller.log_path is not None
    assert controller.log_path.parent.name == "logs"
    controller.stop()
    assert pid_gone(identity.pid)
    assert controller.identity() is None
    assert controller.failure() is None
    controller.stop()  # twice is fine


def test_apply_again_stops_the_previous_group_first(controller: LocalController) -> None:
    port = free_port()
    first = controller.apply(LaunchSpec(argv=sim_argv(port), label=LABEL))
    second = controller.apply(
        LaunchSpec(argv=sim_argv(port, budget=16), label="DFLASH budget=16 window=2048")
    )
    assert first.pid is not None
    assert pid_gone(first.pid, timeout=0.0)  # stopped before the new one started
    assert second.pid != first.pid
    ready = gate(port, controller, verify=dialect_verify(budget=16))
    assert ready.server_info["speculative_num_draft_tokens"] == 16
    assert controller.log_path is not None
    assert controller.log_path.name == "server-2.log"


def test_crash_on_start_fails_fast_with_the_log_tail(controller: LocalController) -> None:
    port = free_port()
    controller.apply(LaunchSpec(argv=sim_argv(port, "--sim-fault", "crash-on-start"), label=LABEL))
    started = time.monotonic()
    with pytest.raises(ServiceNotReady) as info:
        gate(port, controller, timeout=60.0)
    assert time.monotonic() - started < 30  # half the ready timeout: it did not wait for it
    err = info.value
    assert err.reason == "died"
    assert "exited with status 1" in err.summary
    assert str(controller.log_path) in err.summary
    assert "Load weight begin" in err.log_tail
    assert len(err.log_tail.splitlines()) <= 30
    # The simulator logs its ServerArgs on one line of ~16 kB, as SGLang does: cut in the tail.
    (args_line,) = [line for line in err.log_tail.splitlines() if "server_args=" in line]
    assert len(args_line) < 400
    assert args_line.endswith(" more characters)")


def test_hang_on_load_times_out_in_phase_loading(controller: LocalController) -> None:
    port = free_port()
    controller.apply(LaunchSpec(argv=sim_argv(port, "--sim-fault", "hang-on-load"), label=LABEL))
    with pytest.raises(ServiceNotReady) as info:
        gate(port, controller, timeout=2.0)
    err = info.value
    assert err.reason == "timeout"
    assert err.phase == LOADING
    assert f"http://127.0.0.1:{port}" in err.summary
    assert LABEL in err.summary
    assert "last phase 'loading' (connection refused)" in err.summary
    assert "Load weight begin" in err.log_tail


def test_unhealthy_times_out_in_phase_warming_up(controller: LocalController) -> None:
    port = free_port()
    controller.apply(LaunchSpec(argv=sim_argv(port, "--sim-fault", "unhealthy"), label=LABEL))
    with pytest.raises(ServiceNotReady) as info:
        gate(port, controller, timeout=3.0)
    assert info.value.phase == WARMING_UP
    assert "last phase 'warming up' (HTTP 503)" in info.value.summary


@pytest.mark.parametrize(
    ("argv_extra", "budget", "field"),
    [
        ((), 4, "speculative_num_draft_tokens"),
        (("--sim-fault", "stale-config"), 8, "speculative_draft_window_size"),
    ],
    ids=["other-flags", "stale-config"],
)
def test_server_not_running_the_config_fails_verification_naming_the_field(
    controller: LocalController, argv_extra: tuple[str, ...], budget: int, field: str
) -> None:
    port = free_port()
    controller.apply(LaunchSpec(argv=sim_argv(port, *argv_extra, budget=budget), label=LABEL))
    with pytest.raises(ServiceNotReady) as info:
        gate(port, controller)
    err = info.value
    assert err.reason == "mismatch"
    assert field in err.summary
    assert any(field in line for line in err.mismatches)


def test_stop_kills_the_whole_group_and_escalates_to_sigkill(tmp_path: Path) -> None:
    # The shell and its child both ignore SIGTERM (an inherited disposition),
    # so only SIGKILL after the grace period ends them.
    script = 'trap "" TERM; sleep 300 & echo child $!; wait'
    controller = LocalController(tmp_path, stop_grace=0.3)
    identity = controller.apply(LaunchSpec(argv=("sh", "-c", script)))
    assert identity.pid is not None
    wait_until(lambda: "child" in controller.logs(), timeout=60, what="the child's pid", poll=0.02)
    child = int(controller.logs().split()[-1])
    assert os.getpgid(child) == identity.pid
    started = time.monotonic()
    controller.stop()
    # The grace first, then SIGKILL: not the 300 s the sleep would run.
    assert 0.3 <= time.monotonic() - started < 60
    # No running member is left: the child too (at most an unreaped zombie).
    assert pid_gone(identity.pid, timeout=1.0)


def test_missing_command_is_a_one_line_start_error(tmp_path: Path) -> None:
    controller = LocalController(tmp_path)
    with pytest.raises(ServiceStartError) as info:
        controller.apply(LaunchSpec(argv=("/nonexistent/python", "-m", "x"), label=LABEL))
    message = str(info.value)
    assert "\n" not in message
    assert "'/nonexistent/python'" in message
    assert "No such file or directory" in message
    controller.stop()


def test_env_is_added_and_failure_reports_the_exit_status(tmp_path: Path) -> None:
    controller = LocalController(tmp_path)
    code = "import os, sys; print(os.environ['SPEC_TEST']); sys.exit(7)"
    controller.apply(LaunchSpec(argv=(sys.executable, "-c", code), env={"SPEC_TEST": "hello"}))
    deadline = time.monotonic() + 10
    while controller.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert controller.failure() == "exited with status 7"
    assert controller.logs() == "hello"
    controller.stop()


def test_describe_exit_names_signals() -> None:
    assert describe_exit(-signal.SIGKILL) == "killed by signal SIGKILL"
    assert describe_exit(3) == "exited with status 3"


def test_process_runs_in_its_own_session(tmp_path: Path) -> None:
    controller = LocalController(tmp_path)
    identity = controller.apply(LaunchSpec(argv=("sleep", "30")))
    try:
        assert identity.pid is not None
        assert os.getpgid(identity.pid) == identity.pid != os.getpgid(0)
        assert subprocess.run(["true"], check=False).returncode == 0
    finally:
        controller.stop()


# A foreign program holding a port: listens, says so, never answers (a silent listener).
LISTENER = (
    "import socket, sys, time; s = socket.socket(); "
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); print('listening', flush=True); "
    "time.sleep(60)"
)


@pytest.fixture
def foreign(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Start a silent listener on a port (another process); yields (port, its pid)."""
    started: list[subprocess.Popen[str]] = []

    def start(port: int) -> int:
        proc = subprocess.Popen(
            [sys.executable, "-c", LISTENER, str(port)], stdout=subprocess.PIPE, text=True
        )
        started.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline() == "listening\n"
        return proc.pid

    yield start
    for proc in started:
        proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


def test_a_port_held_by_another_process_is_refused_before_launch_within_seconds(
    controller: LocalController, foreign: Any
) -> None:
    port = free_port()
    pid = foreign(port)
    started = time.monotonic()
    with pytest.raises(ServiceStartError) as info:
        controller.apply(LaunchSpec(argv=sim_argv(port), label=LABEL, port=port))
    assert time.monotonic() - started < 30  # not a ready timeout (60 s) waited out
    err = info.value
    assert err.reason == "port-busy"
    assert f"port {port} on 127.0.0.1 is already served by another process (pid {pid} (" in (
        err.summary
    )
    assert "--dflash-port" in err.summary
    assert controller.identity() is None  # nothing was started


def test_the_listener_is_proven_to_be_the_started_server_or_named_as_foreign(
    controller: LocalController, foreign: Any
) -> None:
    port = free_port()
    controller.apply(LaunchSpec(argv=(sys.executable, "-c", LISTENER, str(port)), port=port))
    deadline = time.monotonic() + 10
    while "listening" not in controller.logs() and time.monotonic() < deadline:
        time.sleep(0.02)
    identity = controller.identity()
    assert identity is not None
    check = controller.check_listener()
    assert check.ok is True
    assert check.detail == f"port {port} is served by pid {identity.pid} (started here)"
    # A server that never binds, while another process takes its port.
    other = free_port()
    controller.apply(LaunchSpec(argv=("sleep", "30"), port=other))
    pid = foreign(other)
    check = controller.check_listener()
    assert check.ok is False
    assert f"port {other} is served by pid {pid} (" in check.detail
    assert "not by the server started here" in check.detail


@given(
    st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=2000)),
    st.integers(min_value=1, max_value=40),
)
def test_a_log_tail_keeps_the_last_lines_each_cut_to_its_width(lines: list[str], tail: int) -> None:
    text = "\n".join(lines)
    whole = text.rstrip("\n").splitlines()[-tail:]
    cut = [
        line
        if len(line) <= LINE_CHARS
        else f"{line[:LINE_CHARS]}... ({len(line) - LINE_CHARS:,} more characters)"
        for line in whole
    ]
    assert last_lines(text, tail) == "\n".join(cut)
