"""The readiness probe against the hostile server: no wait past the ready timeout.

Real HTTP on loopback (the scripted server of the throughput tests), tiny
ready timeouts: a ``/health_generate`` slower than the timeout, a
``/server_info`` sent one byte at a time, and a redirect each end the wait
with the gate's usual one-line error, never later than the timeout allows.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from pytest_specdecode.client.limits import Limits
from pytest_specdecode.client.sglang import LimitError, SGLangClient
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.service.readiness import ServiceNotReady, wait_until_ready

from ..throughput.conftest import Script, serve
from .conftest import server_checks
from .trickle import trickling

# Far below what the server would make anyone wait (30 s health, a 100 kB body at 20 ms a
# byte): ending within this proves the ready timeout bounds the wait.
BOUND = 10.0


def no_mismatch(info: Any) -> list[str]:
    return []


def test_a_health_answer_slower_than_the_ready_timeout_ends_the_wait_at_the_timeout() -> None:
    with serve(Script(health_delay=30.0)) as (url, _):
        start = time.monotonic()
        with pytest.raises(ServiceNotReady) as info:
            wait_until_ready(url, verify=no_mismatch, label="DFLASH budget=8", timeout=0.5)
        took = time.monotonic() - start
    assert info.value.reason == "timeout"
    assert "not ready after" in info.value.summary
    assert "ready timeout 0.5 s" in info.value.summary
    assert took < BOUND


def test_a_server_info_sent_one_byte_at_a_time_ends_the_wait_at_the_timeout() -> None:
    with serve(Script(slow_info=0.02)) as (url, _):
        start = time.monotonic()
        with pytest.raises(ServiceNotReady) as info:
            wait_until_ready(url, verify=no_mismatch, label="DFLASH budget=8", timeout=0.5)
        took = time.monotonic() - start
    assert info.value.reason == "timeout"
    assert took < BOUND


def test_the_live_probe_of_auto_mode_waits_no_longer_than_the_ready_timeout() -> None:
    settings = Settings(ready_timeout=0.5)
    with serve(Script(health_delay=30.0)) as (url, _):
        checks = server_checks(settings, url)
        start = time.monotonic()
        look = checks.look(SpecConfig(budget=8))
        took = time.monotonic() - start
    assert look is not None
    assert not look.verified
    assert took < BOUND


@pytest.mark.parametrize("path", ["/health_generate", "/server_info"])
def test_a_redirect_fails_the_gate_at_once_naming_the_location(path: str) -> None:
    script = Script()
    with serve(script) as (url, _):
        script.redirects[path] = "http://admin:pw@10.1.2.200:30000/x?key=secret"
        with pytest.raises(ServiceNotReady) as info:
            wait_until_ready(url, verify=no_mismatch, label="DFLASH budget=8", timeout=30.0)
    summary = info.value.summary
    assert info.value.reason == "redirect"
    assert f"on {path} redirecting to 'http://10.1.2.200:30000/x?...'" in summary
    assert "pw" not in summary
    assert "secret" not in summary
    assert not any(p == "/x" for _, p, _ in script.requests)


# -- a health answer trickling in: each byte resets a per-read timeout -------------

# A byte every 50 ms: far inside every per-read timeout (3 s first contact, 10 s after),
# so only a whole deadline per request ends the wait; the whole answer takes 500 s.
GAP = 0.05


@pytest.mark.parametrize("expect_running", [False, True], ids=["after-restart", "external"])
def test_a_health_answer_trickling_in_ends_the_gate_at_the_ready_timeout(
    expect_running: bool,
) -> None:
    with trickling(GAP) as (port, trickle):
        start = time.monotonic()
        with pytest.raises(ServiceNotReady) as info:
            wait_until_ready(
                f"http://127.0.0.1:{port}",
                verify=no_mismatch,
                label="DFLASH budget=8",
                timeout=0.5,
                expect_running=expect_running,
            )
        took = time.monotonic() - start
    assert trickle.takes > 10 * BOUND
    assert info.value.reason == "timeout", info.value.summary
    assert "ready timeout 0.5 s" in info.value.summary
    assert "last phase 'unresponsive'" in info.value.summary
    assert took < BOUND


def test_a_trickled_header_cut_by_the_deadline_is_no_health_answer() -> None:
    # The guard shuts the socket mid-header; http.client reads that as the end of the
    # headers, a "200". It must count as no answer: never healthy, no /server_info asked.
    with trickling(GAP) as (port, trickle), pytest.raises(ServiceNotReady):
        wait_until_ready(f"http://127.0.0.1:{port}", verify=no_mismatch, label="x", timeout=0.5)
    assert trickle.paths
    assert set(trickle.paths) <= {"/health_generate", "/model_info"}


def test_the_live_probe_and_external_mode_end_a_trickle_at_the_ready_timeout() -> None:
    settings = Settings(ready_timeout=0.5, restart="never", control="external")
    with trickling(GAP) as (port, _):
        checks = server_checks(settings, f"http://127.0.0.1:{port}")
        start = time.monotonic()
        look = checks.look(SpecConfig(budget=8))
        assert look is not None
        assert not look.verified
        with pytest.raises(ServiceNotReady) as info:
            checks.external(SpecConfig(budget=8))
        took = time.monotonic() - start
    assert info.value.reason == "timeout"
    assert took < 2 * BOUND


def test_the_clients_request_cut_mid_header_by_its_deadline_is_an_error_not_an_answer() -> None:
    # As for the probe: 1.5 s lets the status line through, then the guard shuts the socket
    # mid-header and http.client reads what came as a whole "200". The client must say
    # its deadline cut the headers, not go on to read a body of a cut answer.
    with trickling(GAP) as (port, trickle):
        client = SGLangClient(f"http://127.0.0.1:{port}", limits=Limits(base=1.5, stall=1.5))
        with pytest.raises(LimitError, match=r"whole deadline \(1.5 s\) while its headers came"):
            client.server_info()
        client.close()
    assert trickle.takes > 10 * BOUND
