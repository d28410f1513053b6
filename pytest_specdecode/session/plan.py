"""--dflash-dry-run: the plan the collection makes, written instead of running it."""

from __future__ import annotations

import pytest

from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.redact import Redactor
from pytest_specdecode.service.manager import ServiceManager
from pytest_specdecode.session.collect import Collection
from pytest_specdecode.session.items import item_config


def dry_run_lines(
    items: list[pytest.Item],
    collection: Collection,
    services: ServiceManager,
    *,
    carried: list[tuple[SpecConfig, int]],
    workers: int,
    redactor: Redactor,
) -> list[str]:
    """The configs to start in order (those a resume carries whole first), each with
    its tests, and the collection's errors."""
    from pytest_specdecode.service.dryrun import Planned, plan_lines

    counts: dict[SpecConfig, int] = {}
    for item in items:
        if (config := item_config(item)) is not None:
            counts[config] = counts.get(config, 0) + 1
    planned = [Planned(c, n, carried=True) for c, n in carried]
    planned += [Planned(config, n) for config, n in counts.items()]
    lines = plan_lines(
        collection.settings,
        collection.resolver.dialect,
        planned,
        workers=workers,
        port=services.port,
        invalid=collection.invalid,
        redactor=redactor,
    )
    return redactor.lines(lines)
