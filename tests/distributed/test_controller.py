"""The controller plugin: registered once, only when xdist runs the session with workers,
and found through the run's ``config.stash`` (never by a plugin name)."""

from __future__ import annotations

import pytest

from pytest_specdecode.distributed.controller import XdistController
from pytest_specdecode.distributed.run import controller_of
from pytest_specdecode.session import inert

from ..conftest import sim_launch


def controllers(config: pytest.Config) -> list[XdistController]:
    return [p for p in config.pluginmanager.get_plugins() if isinstance(p, XdistController)]


# parseconfigure skips xdist's pytest_cmdline_main, which turns -n into --dist load.
WORKERS = ("-p", "xdist", "-n", "2", "--dist", "load")
USED = ("-o", f"dflash_launch={sim_launch()}")  # a dflash_* key: the session starts now


@pytest.mark.parametrize("used", [True, False], ids=["used", "dormant"])
def test_the_controller_is_registered_once_under_workers(
    pytester: pytest.Pytester, used: bool
) -> None:
    config = pytester.parseconfigure(*WORKERS, *(USED if used else ()))
    found = controller_of(config)
    assert isinstance(found, XdistController)
    assert controllers(config) == [found]
    assert found.lease_dir.is_dir()
    if not used:
        # The session starts late (the first test needing a config): it takes the
        # controller the dormant run made, whose lease directory the workers were given.
        dormant = config.pluginmanager.get_plugin("specdecode-dormant")
        assert isinstance(dormant, inert.Dormant)
        session = dormant.wake()
        assert session.services.port == found.port
        assert controllers(config) == [found]
        assert controller_of(config) is found


@pytest.mark.parametrize(
    "args",
    [
        ("-p", "xdist", *USED),
        ("-p", "xdist", "-n", "0", *USED),
        ("-p", "no:xdist", *USED),
        ("-p", "xdist"),
        (*WORKERS, *USED, "--dflash-dry-run"),  # a dry run plans here: xdist starts no worker
    ],
    ids=["no -n", "-n 0", "no xdist", "dormant, no -n", "dry run"],
)
def test_no_controller_without_workers(pytester: pytest.Pytester, args: tuple[str, ...]) -> None:
    config = pytester.parseconfigure(*args)
    assert controller_of(config) is None
    assert controllers(config) == []
