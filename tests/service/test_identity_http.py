"""Identity over HTTP: the server that passed the gate is the one each test measured.

Against the hostile server (real HTTP on loopback): a handle from external
mode notices another ``launch_command``, counters that went back to zero (a
restart with the same command line), and a server that cannot show its
identity; once seen, a change is final.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.service.handle import ServiceHandle
from pytest_specdecode.service.identity import HttpIdentity

from ..throughput.conftest import Script, serve
from .conftest import server_checks

B8 = SpecConfig(budget=8)
INFO = {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 8}


@contextmanager
def watching(script: Script) -> Iterator[ServiceHandle]:
    """A handle on the server ``script`` plays, as external mode makes it, after the first
    test noted its identity."""
    settings = Settings(ready_timeout=10.0, restart="never")
    with serve(script) as (url, _):
        handle = server_checks(settings, url).external(B8)
        handle.note_identity()  # the first test starts
        try:
            yield handle
        finally:
            handle.client.close()


@pytest.fixture
def external() -> Iterator[tuple[ServiceHandle, Script]]:
    """A handle on the hostile server as external mode makes it, and the server's script."""
    script = Script(
        info={**INFO, "launch_command": "sglang a"},
        swapped_info={**INFO, "launch_command": "sglang b"},
    )
    with watching(script) as handle:
        yield handle, script


def test_the_same_server_passes_and_its_counters_may_grow(
    external: tuple[ServiceHandle, Script],
) -> None:
    handle, script = external
    assert handle.changed() is None
    script.generation_tokens += 100
    assert handle.changed() is None


def test_another_launch_command_is_another_server_for_good(
    external: tuple[ServiceHandle, Script],
) -> None:
    handle, script = external
    script.swap_after = 0
    line = handle.changed()
    assert line == (
        f"the server at {handle.base_url} changed between the gate and this test: "
        "launch_command 'sglang a' -> 'sglang b'; its figures are not filed under DFLASH budget=8"
    )
    script.swap_after = None  # even if the old one came back: the config's figures are mixed
    assert handle.changed() == line
    assert handle.known_change() == line


def test_counters_going_back_show_a_restart_with_the_same_command_line(
    external: tuple[ServiceHandle, Script],
) -> None:
    handle, script = external
    script.generation_tokens = 1.0
    line = handle.changed()
    assert line is not None
    assert "sglang:generation_tokens_total went back from 42 to 1" in line


def test_gzipped_counters_still_show_a_restart() -> None:
    # SGLang's exporter gzips /metrics for a request that accepts gzip: read undecoded,
    # the counters were none from the gate on and a restart with the same command line
    # went unseen.
    script = Script(info={**INFO, "launch_command": "a"}, metrics_coding="gzip")
    with watching(script) as handle:
        script.generation_tokens = 1.0
        line = handle.changed()
    assert line is not None
    assert "sglang:generation_tokens_total went back from 42 to 1" in line


def test_a_server_that_cannot_show_its_identity_files_nothing(
    external: tuple[ServiceHandle, Script],
) -> None:
    handle, script = external
    script.old_endpoints = True  # /server_info answers 404
    line = handle.changed()
    assert line is not None
    assert line.startswith(f"cannot tell whether the server at {handle.base_url} is still")


def test_a_swap_between_the_gate_and_the_first_test_is_seen() -> None:
    script = Script(
        info={**INFO, "launch_command": "a"}, swapped_info={**INFO, "launch_command": "b"}
    )
    settings = Settings(ready_timeout=10.0, restart="never")
    with serve(script) as (url, _):
        checks = server_checks(settings, url)
        handle = checks.external(B8)
        script.swap_after = 0
        handle.note_identity()
        handle.client.close()
    assert handle.known_change() is not None


@pytest.mark.parametrize(
    ("before", "after", "what"),
    [
        ({"version": "0.5.23"}, {"version": "0.5.24"}, "version '0.5.23' -> '0.5.24'"),
        ({"speculative_num_draft_tokens": 8}, {}, "speculative_num_draft_tokens 8 -> (absent)"),
    ],
)
def test_identity_fields(before: dict[str, object], after: dict[str, object], what: str) -> None:
    assert HttpIdentity.of(before, None).changed(HttpIdentity.of(after, None)) == what


def test_metrics_that_disappear_are_a_change() -> None:
    was = HttpIdentity.of({}, "sglang:num_requests_total 5\n")
    assert (
        was.changed(HttpIdentity.of({}, None))
        == "/metrics no longer shows sglang:num_requests_total"
    )
    assert was.changed(HttpIdentity.of({}, "sglang:num_requests_total 7\n")) is None
