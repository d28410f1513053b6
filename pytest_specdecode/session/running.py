"""Around each test: its setup fails at once for a bad marker, a server replaced or
dead; a failure names where its config was tried; the report says the phase."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from pytest_specdecode import records
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.report.outputs import RunOutputs
from pytest_specdecode.service.manager import ServiceManager
from pytest_specdecode.session.collect import Collection
from pytest_specdecode.session.items import definition_id, item_config, item_kind, service_of
from pytest_specdecode.throughput.runner import LosslessBaseline


@dataclass(eq=False)
class Running:
    settings: Settings
    collection: Collection
    services: ServiceManager
    baseline: LosslessBaseline
    outputs: RunOutputs

    def await_baseline(self, item: pytest.Item) -> None:
        """A lossless check under xdist whose baseline another worker has not recorded
        yet waits for it, holding nothing, so that worker can bring the server to the
        baseline config meanwhile (serially the baseline tests run first)."""
        config = item_config(item)
        baseline = self.baseline
        if not (config and config.algorithm != "NONE" and item_kind(item) == "lossless"):
            return
        if baseline.directory is not None and baseline.expected and not baseline.load():
            baseline.wait(self.settings.ready_timeout + 300)

    def starting(self, nodeid: str) -> None:
        config = item_config(self.collection.items.get(nodeid))
        # Setup is where a config's server starts and its readiness is awaited.
        where = f" (its setup brings up {config.label()})" if config is not None else ""
        self.outputs.phase = f"test {nodeid}{where}"

    def setup(self, item: pytest.Item) -> Iterator[None]:
        """The body of the innermost ``pytest_runtest_setup`` wrapper."""
        message = self.collection.invalid.get(definition_id(item))
        if message is not None:
            # Before any fixture: the test's bad marker or source is its error.
            pytest.fail(f"collection error: {message}", pytrace=False)
        try:
            yield
        except BaseException:
            # A config that did not come up: where it was tried and how, for the report.
            config = item_config(item)
            log = self.services.start_log(config) if config is not None else None
            if log is not None:
                item.user_properties.append((records.SERVICE, log))
            raise
        handle = service_of(item)
        if handle is None:
            return
        # The verified server's facts travel with the report (to the xdist controller too).
        item.user_properties.append((records.SERVICE, handle.summary()))
        # The counters the runners compare with before filing figures; a server already
        # seen replaced fails the config's remaining tests at once.
        handle.note_identity()
        if (changed := handle.known_change()) is not None:
            pytest.fail(changed, pytrace=False)
        gone = handle.gone()
        if gone is not None:
            # Asking a dead server would count as a wrong answer: error at once instead.
            item.user_properties.append((records.DIED, gone.summary))
            pytest.fail(str(gone), pytrace=False)

    @staticmethod
    def note_death(
        item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport
    ) -> None:
        """A test that failed because its server died during it says so."""
        handle = service_of(item)
        if call.when == "call" and report.failed and handle is not None:
            gone = handle.gone(settle=2.0)
            if gone is not None:
                report.user_properties.append((records.DIED, gone.summary))
