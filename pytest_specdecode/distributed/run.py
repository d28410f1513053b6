"""How this run is distributed: whether this process hands tests to xdist workers, how
many hosts serve at once, the options that cannot work with workers, and the typed
accessor of the controller plugin (``config.stash``, never a plugin name).

Imports nothing of xdist: a run without ``-n`` asks these questions too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_specdecode.config.settings import Settings, SettingsError

if TYPE_CHECKING:
    from pytest_specdecode.distributed.controller import XdistController

# The controller plugin of this run, once registered (:func:`.controller.start_controller`).
CONTROLLER: pytest.StashKey[XdistController] = pytest.StashKey()


def controller_of(config: pytest.Config) -> XdistController | None:
    """The xdist controller plugin of this run (None: not registered, or a worker)."""
    return config.stash.get(CONTROLLER, None)


def is_xdist_controller(config: pytest.Config) -> bool:
    """Whether this process hands tests to xdist workers (``-n N`` with N >= 1)."""
    return bool(
        config.pluginmanager.hasplugin("xdist")
        and not hasattr(config, "workerinput")
        and getattr(config.option, "numprocesses", None)
        and getattr(config.option, "dist", "no") != "no"
    )


def check_options(config: pytest.Config, settings: Settings) -> None:
    """Option combinations that cannot work with workers; :class:`SettingsError` says why."""
    if not is_xdist_controller(config):
        return
    if settings.restore:
        raise SettingsError(
            "--dflash-restore does not work with -n: run the restore in a run without workers"
        )


def serial_for_dry_run(config: pytest.Config) -> int:
    """A dry run plans in this process, so xdist must start no workers (a worker may start
    nothing either, but would need collecting and scheduling for it). Returns the ``-n``
    given, for the plan; called before xdist's own ``pytest_configure``."""
    if not is_xdist_controller(config):
        return 0
    workers = int(config.option.numprocesses or 0)
    config.option.dist = "no"
    config.option.tx = []
    config.option.numprocesses = 0
    return workers


def parallel_hosts(config: pytest.Config, settings: Settings) -> int:
    """How many hosts serve configs at once: under xdist, those that have workers."""
    if not is_xdist_controller(config):
        return 1
    workers = int(config.option.numprocesses or 1)
    return max(1, min(workers, len(settings.hosts) if settings.remote else 1))
