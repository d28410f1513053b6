"""The plugin stays inert in a run that does not use it.

Installed in an environment, the plugin is loaded by every pytest run there,
also in projects that never use it. Such a run must not change: no signal
handler, no header or summary line, no file, no report hook doing work, and
xdist's own scheduler for the user's ``--dist``. So the session object
(:class:`pytest_specdecode.session.core.SpecDecodeSession`, whose construction
installs the handlers and whose hooks print and write) is made only when the
run uses the plugin:

- at ``pytest_configure``, when a ``--dflash-*`` option or ``dflash_*`` ini
  key is set (:func:`explicitly_used`);
- otherwise when the first test needing a config is seen
  (:class:`Dormant`): at collection, a test with a plugin fixture or a
  ``dflash`` marker; in the xdist controller, which never collects, when a
  worker reports a collection with a test under a config.

Like pytest-xdist, which registers its session only in distribution mode.
This module imports nothing heavy: a run that never uses the plugin never
loads its service, client or report code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

# Loaded with the plugin, so the controller's stash key is one object for the process's
# life: pytester's in-process runs drop the modules a run imported, and a key imported
# again would not find what the first one stored.
from pytest_specdecode.distributed import run as distributed_run

# The plugin's fixtures: a test requesting one (directly or through another
# fixture) uses the plugin.
FIXTURES = frozenset(
    {
        "dflash_config",
        "dflash_service",
        "dflash_client",
        "dflash_problem",
        "dflash_case",
        "dflash_throughput",
        "dflash_lossless",
        "dflash_coding",
    }
)
OPTION_PREFIX = "dflash_"

# The ini keys the options declared (filled by :class:`IniRecorder` at pytest_addoption;
# the same names in every run of a process).
INI_KEYS: set[str] = set()


class IniRecorder:
    """A stand-in for the :class:`pytest.Parser` that notes every ini key declared
    through it, so :func:`explicitly_used` knows which keys are the plugin's."""

    def __init__(self, parser: pytest.Parser, keys: set[str] = INI_KEYS) -> None:
        self._parser = parser
        self._keys = keys

    def addini(self, name: str, *args: Any, **kwargs: Any) -> None:
        self._keys.add(name)
        self._parser.addini(name, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._parser, name)


def _given(value: Any) -> bool:
    # Option defaults are None, [], "" or False (store_true): anything else was given.
    return not (value is None or value is False or value == [] or value == "")


def explicitly_used(config: pytest.Config, ini_keys: set[str] = INI_KEYS) -> bool:
    """Whether a ``--dflash-*`` option (command line, ``addopts``, ``PYTEST_ADDOPTS``)
    or a ``dflash_*`` ini key (ini file or ``-o``) is set in this run."""
    for name, value in vars(config.option).items():
        if name.startswith(OPTION_PREFIX) and _given(value):
            return True
    for key in sorted(ini_keys):
        try:
            value = config.getini(key)
        except ValueError:  # declared by another pytest run of this process only
            continue
        if _given(value):
            return True
    return False


def uses_plugin(metafunc: pytest.Metafunc) -> bool:
    """Whether a test needs the plugin: a plugin fixture or a ``dflash`` marker."""
    if any(name in FIXTURES for name in metafunc.fixturenames):
        return True
    return metafunc.definition.get_closest_marker("dflash") is not None


class Dormant:
    """Registered in a run that does not (yet) use the plugin; starts the session
    (``start()``, which returns it) at the first test that needs a config."""

    def __init__(self, config: pytest.Config, start: Callable[[], Any]) -> None:
        self.config = config
        self._start = start
        self.session: Any = None

    def wake(self) -> Any:
        if self.session is None:
            self.session = self._start()
        return self.session

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if self.session is not None or not uses_plugin(metafunc):
            return
        session = self.wake()
        # Registered during this hook's call, the session does not get this one from
        # pytest: hand it the test that woke it.
        session.pytest_generate_tests(metafunc)

    @pytest.hookimpl(trylast=True)  # after pytest's "collected N items"
    def pytest_collection_finish(self) -> None:
        if self.session is not None and self.session.header_due:
            self.session.write_header()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # The xdist controller collects nothing: the workers wrote which collected tests
        # run under a config before reporting their collection (session/collect.py).
        if self.session is not None:
            return
        from pytest_specdecode.distributed.shared_files import planned_tests

        if planned_tests(self.config):
            self.wake().write_header()


def xdist_controller(config: pytest.Config) -> bool:
    """Whether this process may hand tests to xdist workers (the cheap test first)."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return False
    return distributed_run.is_xdist_controller(config)


def prepare_xdist(config: pytest.Config, settings: Any) -> None:
    """In a dormant xdist controller: what the workers need before anyone collected
    (the lease directory and port), and the scheduler, which must be chosen now: it
    hands a run whose workers collected no test under a config to xdist's own."""
    from pytest_specdecode.distributed.controller import start_controller
    from pytest_specdecode.service.launch_command import endpoint

    start_controller(config, settings, endpoint(settings).port)
