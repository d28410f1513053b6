"""The weight-cache daemon's life on a fake controller, and its command line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_specdecode.config.cache_setting import OFF, WeightCacheSetting, parse
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.service.base import LaunchSpec, ProcessIdentity
from pytest_specdecode.service.weight_cache import (
    CachePaths,
    WeightCache,
    WeightCacheFailed,
    daemon_argv,
    for_settings,
)

from .fakes import FakeController

READY = "[2026-12-01 10:00:00] All 1 weight cache daemons on node 0 are ready (pp_ranks=0..0)"


def cache(
    tmp_path: Path, controller: FakeController, setting: str = "on", launch: str = ""
) -> WeightCache:
    settings = Settings(
        weight_cache=parse(setting),
        launch=launch or "python -m sglang.launch_server --model-path /m --tp-size 2",
        uses_simulator=False,
    )
    return WeightCache(
        settings, controller, paths=CachePaths(str(tmp_path)), timeout=0.5, poll=0.01
    )


@pytest.mark.parametrize(
    ("launch", "expected"),
    [
        (
            "python3 -m sglang.launch_server --model-path '/m x' --tp-size 8",
            [sys.executable, "-m", "sglang.srt.weight_cache.daemon", "--model-path", "/m x",
             "--tp-size", "8"],
        ),
        (
            "/opt/venv/bin/sglang serve --model-path /m",
            [sys.executable, "-m", "sglang.srt.weight_cache.daemon", "--model-path", "/m"],
        ),
        (
            "env X=1 /usr/bin/python -m pytest_specdecode.sim --sim-load-seconds 3",
            ["env", "X=1", "/usr/bin/python", "-m", "pytest_specdecode.sim.weight_cache",
             "--sim-load-seconds", "3"],
        ),
    ],
)  # fmt: skip
def test_the_daemon_runs_the_launch_command_with_its_daemon_module(
    launch: str, expected: list[str]
) -> None:
    assert daemon_argv(launch) == expected


def test_a_launch_without_a_known_server_module_is_one_line() -> None:
    with pytest.raises(WeightCacheFailed, match="needs a launch command that runs -m sglang"):
        daemon_argv("/srv/start-my-server.sh --fast")


def test_ready_daemon_makes_every_launch_a_client(tmp_path: Path) -> None:
    daemon = FakeController(log_lines=["loading", READY])
    wc = cache(tmp_path, daemon)
    wc.ensure(pytest.fail)
    wc.ensure(pytest.fail)  # started once, checked again
    (started,) = daemon.launches
    assert started.argv[:3] == (sys.executable, "-m", "sglang.srt.weight_cache.daemon")
    assert started.env["SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE"] == f"{tmp_path}/{{device_uuid}}.sock"
    client = wc.client(LaunchSpec(argv=("srv", "--port", "1"), env={"A": "1"}))
    assert client.argv == ("srv", "--port", "1", "--weight-cache-mode", "client")
    assert client.env["A"] == "1"
    assert client.env["SGLANG_WEIGHT_CACHE_READY_TEMPLATE"] == f"{tmp_path}/{{device_uuid}}.ready"
    assert wc.mode == "client"
    assert wc.finish() is None
    assert daemon.stopped == 1


class DiesAtStart(FakeController):
    """A daemon that exits at once (CUDA out of memory, say)."""

    def apply(self, launch: LaunchSpec) -> ProcessIdentity:
        identity = super().apply(launch)
        self.exit_status = "exited with status 1"
        return identity


def test_a_daemon_that_exits_before_ready_is_one_line_with_its_last_log_line(
    tmp_path: Path,
) -> None:
    wc = cache(tmp_path, DiesAtStart(log_lines=["RuntimeError: CUDA out of memory"], pid=6))
    with pytest.raises(WeightCacheFailed) as info:
        wc.ensure(pytest.fail)
    line = info.value.summary
    assert "\n" not in line
    assert line.startswith("weight-cache daemon (pid 7) exited with status 1 before it was ready")
    assert "RuntimeError: CUDA out of memory; log: /tmp/fake.log" in line
    assert line.endswith("or add ',fallback' to load from disk")


def test_a_daemon_never_ready_times_out_in_one_line(tmp_path: Path) -> None:
    wc = cache(tmp_path, FakeController(log_lines=["still loading"]))
    with pytest.raises(WeightCacheFailed, match=r"was not ready within 0.5 s .*ready-timeout"):
        wc.ensure(pytest.fail)


def test_with_fallback_a_dead_daemon_is_said_once_and_configs_load_from_disk(
    tmp_path: Path,
) -> None:
    daemon = FakeController(log_lines=[READY])
    wc = cache(tmp_path, daemon, "keep,fallback")
    said: list[str] = []
    wc.ensure(said.append)
    daemon.die()
    wc.ensure(said.append)
    wc.ensure(said.append)
    assert len(said) == 1
    assert "killed by signal SIGKILL after it was ready" in said[0]
    assert said[0].endswith("every config loads its weights from disk (,fallback)")
    assert wc.mode == "off"
    launch = LaunchSpec(argv=("srv",))
    assert wc.client(launch) == launch
    wc.finish()
    assert daemon.stopped == 1  # kept only while it serves


def test_keep_leaves_a_live_daemon_and_says_how_to_stop_it(tmp_path: Path) -> None:
    daemon = FakeController(log_lines=[READY])
    wc = cache(tmp_path, daemon, "keep")
    wc.ensure(pytest.fail)
    kept = wc.finish()
    assert kept is not None
    assert f"kill {wc.pid}" in kept
    assert daemon.stopped == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("off", OFF),
        ("on", WeightCacheSetting(on=True)),
        ("keep", WeightCacheSetting(on=True, keep=True)),
        (" on , fallback ", WeightCacheSetting(on=True, fallback=True)),
        ("fallback", WeightCacheSetting(on=True, fallback=True)),
        ("keep,fallback", WeightCacheSetting(on=True, keep=True, fallback=True)),
    ],
)
def test_the_setting_reads_back_as_it_prints(text: str, expected: WeightCacheSetting) -> None:
    assert parse(text) == expected
    assert parse(str(expected)) == expected


@pytest.mark.parametrize("text", ["", "yes", "off,on", "on,on", "on,keep", ","])
def test_bad_settings_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"expected off, on, keep|exclude each other"):
        parse(text)


def test_under_systemd_the_daemon_is_a_unit_of_its_own_with_its_sockets_in_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[dict[str, object]] = []
    daemon = FakeController(log_lines=[READY])

    def build(*args: object, **kwargs: object) -> FakeController:
        made.append(kwargs)
        return daemon

    monkeypatch.setattr("pytest_specdecode.service.controllers.build_controller", build)
    settings = Settings(
        control="systemd",
        unit="sglang.service",
        launch="python3 -m sglang.launch_server --model-path /m",
        uses_simulator=False,
        weight_cache=parse("on"),
    )
    wc = for_settings(settings, tmp_path, None, None)
    runtime = "pytest-specdecode-sglang-weight-cache"
    assert made == [
        {"unit": "sglang-weight-cache.service", "whole_unit": True, "runtime_directory": runtime}
    ]
    wc.ensure(pytest.fail)
    (started,) = daemon.launches
    # The host's own python, not this machine's interpreter.
    assert started.argv == ("python3", "-m", "sglang.srt.weight_cache.daemon", "--model-path", "/m")
    assert (
        started.env["SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE"] == f"/run/{runtime}/{{device_uuid}}.sock"
    )
    assert started.env["SGLANG_LOG_MS"] == "1"
    client = wc.client(LaunchSpec(argv=("python3", "-m", "sglang.launch_server")))
    assert (
        client.env["SGLANG_WEIGHT_CACHE_READY_TEMPLATE"] == f"/run/{runtime}/{{device_uuid}}.ready"
    )
    assert wc.finish() is None
    assert daemon.stopped == 1
