"""The run's warnings about what it cannot protect: the fallback sandbox, a launch's
process that may leave its group."""

from __future__ import annotations

import pytest

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.session.items import terminal


class Notices:
    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self._sandbox_warned = False
        if settings.sandbox == "require":
            from pytest_specdecode.coding.sandbox import require_bwrap

            require_bwrap()  # a SettingsError: a usage error when bubblewrap cannot run

    def sandbox(self) -> None:
        """Say once per run what the fallback sandbox cannot protect (if it is used)."""
        from pytest_specdecode.coding import sandbox_warning

        reporter = terminal(self.config)
        warning = sandbox_warning(self.settings.sandbox)
        if warning and reporter is not None and not self._sandbox_warned:
            reporter.write_line(f"dflash: WARNING: {warning}", yellow=True)
        self._sandbox_warned = True

    def untracked(self, reporter: pytest.TerminalReporter) -> None:
        """Say once where a launch's process that left its group may outlive the run."""
        from pytest_specdecode.processes.lineage import untracked

        why = untracked()
        if why is not None:
            reporter.write_line(
                f"dflash: WARNING: {why}: a process of the launch that leaves its process "
                "group and clears its environment can outlive the run",
                yellow=True,
            )
