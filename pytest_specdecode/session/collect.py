"""The collection: which configs, problems and cases each test runs under, and the
order the collected tests run in (each config applied once, the baseline first)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from pytest_specdecode import records
from pytest_specdecode.config.collection import ConfigResolver
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import ConfigError, SpecConfig, config_to_dict
from pytest_specdecode.distributed import shared_files
from pytest_specdecode.errors import SweepOverrideWarning
from pytest_specdecode.service.checks import live_config
from pytest_specdecode.session.items import PARAM, item_config, item_kind, speedup_cases
from pytest_specdecode.throughput.runner import LosslessBaseline
from pytest_specdecode.throughput.workload import marker_cases

if TYPE_CHECKING:
    # Imported when used: a run without coding tests or --dflash-resume never loads them.
    from pytest_specdecode.coding.problem import Problem


class Collection:
    """Parametrises the plugin's fixtures at collection; a bad marker or source marks only
    its own test invalid (:attr:`invalid`: its error line, by definition node id)."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        # Everything that can reject the options comes first, before resources.
        self.resolver = ConfigResolver(settings, live=self._live_reader())
        self.invalid: dict[str, str] = {}
        self.items: dict[str, pytest.Item] = {}
        self.planned: dict[str, int] = {}  # config key -> tests to run (serially)
        self.configured = False  # a test runs under configs: the run is the plugin's
        self._problems: list[Problem] | None = None

    def _live_reader(self) -> Callable[[], SpecConfig | None] | None:
        """External mode (a dry run contacts nothing): what the live server runs."""
        settings = self.settings
        if settings.control != "external" or settings.dry_run:
            return None
        return lambda: live_config(settings, self.resolver.dialect)

    def problems(self) -> list[Problem]:
        """The run's coding problems, loaded once; a bad source is a :class:`ConfigError`."""
        if self._problems is None:
            from pytest_specdecode.coding.runner import load_problems

            try:
                self._problems = load_problems(self.settings, self.config)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        return self._problems

    def problem_set(self) -> dict[str, str] | None:
        """The run's problems by name and definition digest (for --dflash-resume); None
        when they do not load (their collection error says why)."""
        from pytest_specdecode.report.json_report import problem_set

        try:
            return problem_set(self.problems())
        except ConfigError:
            return None

    def generate(self, metafunc: pytest.Metafunc) -> None:
        """Parametrise one test definition with its configs, problems and cases."""
        try:
            if PARAM in metafunc.fixturenames:
                self._parametrize_config(metafunc)
            elif metafunc.definition.get_closest_marker("dflash") is not None:
                raise ConfigError(
                    "has @pytest.mark.dflash but uses no dflash fixture; request "
                    "dflash_service (or dflash_client) so the server runs that config"
                )
            if "dflash_problem" in metafunc.fixturenames:
                problems = self.problems()
                ids = [p.name for p in problems]
                metafunc.parametrize("dflash_problem", problems, ids=ids, indirect=True)
            if "dflash_case" in metafunc.fixturenames:
                marker = metafunc.definition.get_closest_marker("throughput")
                cases = marker_cases(dict(marker.kwargs) if marker else {}, self.settings)
                ids = [c.id for c in cases]
                metafunc.parametrize("dflash_case", cases, ids=ids, indirect=True)
        except ConfigError as exc:
            self.invalid[metafunc.definition.nodeid] = f"{metafunc.definition.nodeid}: {exc}"

    def _parametrize_config(self, metafunc: pytest.Metafunc) -> None:
        marker = metafunc.definition.get_closest_marker("dflash")
        if marker is not None and marker.args:
            raise ConfigError("@pytest.mark.dflash takes keyword arguments only")
        kwargs = dict(marker.kwargs) if marker else None
        try:
            found, in_id = self.resolver.configs(kwargs)
        except ConfigError as exc:
            raise ConfigError(f"bad dflash config: {exc}") from None
        ids = [c.test_id() if in_id else pytest.HIDDEN_PARAM for c in found]
        metafunc.parametrize(PARAM, found, indirect=True, ids=ids, scope="session")
        self.configured = True
        # Once per test (metafunc is per definition).
        if warning := self.resolver.sweep_overrides(kwargs):
            node = metafunc.definition
            node.warn(SweepOverrideWarning(f"{node.nodeid}: {warning}"))

    def order(self, items: list[pytest.Item], baseline: LosslessBaseline) -> None:
        """Each config's tests together, the non-speculative baseline's first (the
        lossless check needs it), each item labelled with its config and kind."""
        # pytest groups session-scoped params by index, not value (9.0/9.1), and
        # only best-effort: sort ourselves so each config is applied once.
        order: dict[SpecConfig, int] = {}
        keyed: list[tuple[int, int, pytest.Item]] = []
        for position, item in enumerate(items):
            config = item_config(item)
            if config is None:
                keyed.append((-1, position, item))
                continue
            rank = order.setdefault(config, len(order)) + (
                0 if config.algorithm == "NONE" else 1 << 20
            )
            keyed.append((rank, position, item))
            if config.algorithm == "NONE" and item_kind(item) == "lossless":
                baseline.expected.add(item.nodeid)
            item.user_properties.extend(
                [
                    (records.CONFIG, config.label()),
                    (records.CONFIG_KEY, config.key()),
                    (records.CONFIG_DATA, config_to_dict(config)),
                    (records.KIND, item_kind(item)),
                ]
            )
        keyed.sort(key=lambda entry: (entry[0], entry[1]))
        items[:] = [item for _, _, item in keyed]
        self.items = {item.nodeid: item for item in items}
        baseline.speedup_cases = speedup_cases(items)

    def finish(self, items: list[pytest.Item]) -> None:
        """What the collection leaves for the run: the xdist controller's scheduler
        groups (one config at a time per host) and the tests planned per config."""
        groups = {i.nodeid: c.key() for i in items if (c := item_config(i))}
        shared_files.write_groups(self.config, groups)
        self.planned = dict(Counter(groups.values()))

    def notes(self) -> list[tuple[str, bool]]:
        """The collection's lines for the terminal (shown at collection too, so
        --collect-only tells about them), each with whether it is an error."""
        lines = [
            (f"dflash: collection error: {message}", True) for message in self.invalid.values()
        ]
        if self.resolver.live is not None:
            lines.append(
                (
                    f"dflash: the live server runs {self.resolver.live.label()}: tests without "
                    "a config of their own run under it (--dflash-restart=never)",
                    False,
                )
            )
        return lines
