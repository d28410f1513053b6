"""A worker's view of where configs run: it follows the scheduler's placement file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_specdecode.config.settings import Host
from pytest_specdecode.distributed.placement import SharedPlacement, down_hosts, write_placement
from pytest_specdecode.service.retry import HostDown
from pytest_specdecode.service.sharing import NoHostLeft

HOSTS = {"h1-30000": Host("h1"), "h2-30000": Host("h2")}


def placement(tmp_path: Path, on_sleep: object = None) -> SharedPlacement:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds
        if callable(on_sleep):
            on_sleep()

    return SharedPlacement(
        tmp_path, HOSTS, "h2-30000", "gw1", clock=lambda: now[0], sleep=sleep, timeout=3.0
    )


def test_without_a_scheduler_a_worker_serves_its_own_host(tmp_path: Path) -> None:
    assert placement(tmp_path).host_for("A") == Host("h2")


def test_a_worker_follows_its_config_off_a_lost_host(tmp_path: Path) -> None:
    write_placement(tmp_path, {"A": "h2-30000"}, {})
    waits: list[int] = []

    def scheduler_moves_it() -> None:
        waits.append(1)
        if len(waits) == 2:
            moves = {"A": [{"from": "h2", "to": "h1", "reason": "no SSH answer"}]}
            write_placement(tmp_path, {"A": "h1-30000"}, moves)

    view = placement(tmp_path, scheduler_moves_it)
    assert view.host_for("A") == Host("h2")
    view.mark_down(Host("h2"), "no SSH answer", "A")
    assert down_hosts(tmp_path) == {"h2-30000": "no SSH answer"}
    assert view.still_here("A", Host("h2"))  # until the scheduler moves it
    assert view.host_for("A") == Host("h1")  # waited for the scheduler, then followed
    assert len(waits) == 2
    assert not view.still_here("A", Host("h2"))
    assert view.moves("A") == [{"from": "h2", "to": "h1", "reason": "no SSH answer"}]


def test_no_host_left_and_a_scheduler_that_never_moves_are_one_line_errors(
    tmp_path: Path,
) -> None:
    write_placement(tmp_path, {"A": "", "B": "h2-30000"}, {})
    view = placement(tmp_path)
    with pytest.raises(NoHostLeft, match="every host of the run is down"):
        view.host_for("A")
    view.mark_down(Host("h2"), "refused", "B")
    with pytest.raises(HostDown, match=r"waited 3 s for the scheduler to move it") as info:
        view.host_for("B")
    assert "\n" not in str(info.value)
