"""The load client's null-server figures, calibrated once before the first throughput
case: a round run on a loaded machine is measured again against them."""

from __future__ import annotations

import functools

import pytest

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.report.outputs import RunOutputs
from pytest_specdecode.session.items import case_of, item_kind, runs_tests, terminal
from pytest_specdecode.throughput import calibration


class Calibrating:
    def __init__(self, config: pytest.Config, settings: Settings, outputs: RunOutputs) -> None:
        self.config = config
        self.settings = settings
        self.outputs = outputs
        self.found: calibration.Calibration | None = None  # the null-server figures, once made

    def before_run(self, items: list[pytest.Item], base_url: str) -> None:
        """The load client's ceiling, only in a run that has a throughput case (under
        xdist the controller collects nothing, so no), its rounds waiting for bytes as
        the run's rounds against ``base_url`` will (``--dflash-client-wait``)."""
        if self.settings.client_calibration == "off" or not runs_tests(self.config):
            return
        cases = [case_of(i) for i in items if item_kind(i) == "throughput"]
        concurrencies = calibration.case_concurrencies(cases)
        if not concurrencies:
            return
        # Imported here: aiohttp is a fifth of a run's start-up (a run with throughput
        # cases imports it anyway).
        from pytest_specdecode.throughput.aioload import Target

        wait = "poll" if Target(base_url, wait=self.settings.client_wait).polls else "sleep"
        found = calibration.calibrate(
            concurrencies,
            max(c.max_tokens for c in cases),
            one_round=functools.partial(calibration.measure_round, wait=wait),
        )
        self.outputs.calibration = found.to_json()
        self.found = found
        reporter = terminal(self.config)
        if reporter is not None:
            reporter.write_line(calibration.summary_line(found))
