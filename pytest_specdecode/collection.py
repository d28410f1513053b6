"""What each collected test runs under: its configs and its throughput cases.

Settings are parsed once here (``--dflash-config``, ``--dflash-sweep``, the
ini default); per test, the ``dflash`` marker is merged on top and every
resulting config is validated against the dialect, so a bad value fails at
collection naming the test. Equal configs are interned to one object, so the
session-scoped fixture sees the same parameter for every test of a config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from pytest_specdecode import config as cfg
from pytest_specdecode.dialects import Dialect, get_dialect, script_problems
from pytest_specdecode.settings import Settings
from pytest_specdecode.throughput.workload import ThroughputCase, make_cases

_CASE_KEYS = ("contexts", "concurrency", "output_tokens")


def template_args(settings: Settings) -> dict[str, str | None]:
    """The ini templates, for the template dialect only (others refuse them)."""
    if settings.dialect != "template":
        return {}
    return {"args_template": settings.args_template, "env_template": settings.env_template}


class ConfigResolver:
    """Turns markers + settings into validated, interned configs and cases."""

    def __init__(self, settings: Settings, dialect: Dialect | None = None) -> None:
        self.settings = settings
        self.dialect = dialect or get_dialect(
            settings.dialect,
            **template_args(settings),
        )
        self.base = cfg.base_config(settings.base_config, draft_model=settings.draft_model)
        self.cli = (
            cfg.parse_config_option(settings.config_override) if settings.config_override else {}
        )
        self.sweep = cfg.parse_sweep_option(settings.sweep) if settings.sweep else []
        self._interned: dict[cfg.SpecConfig, cfg.SpecConfig] = {}

    def configs(self, marker: Mapping[str, object] | None) -> tuple[list[cfg.SpecConfig], bool]:
        """The validated configs of one test and whether they belong in its id."""
        resolved = cfg.merge(self.base, marker=marker, cli=self.cli, sweep=self.sweep)
        found: list[cfg.SpecConfig] = []
        for config, _ in resolved:
            config = cfg.canonical(config)
            self._validate(config)
            found.append(self._interned.setdefault(config, config))
        return found, any(r.in_id for r in resolved)

    def _validate(self, config: cfg.SpecConfig) -> None:
        s = self.settings
        if s.control == "script" and s.restart_cmd:
            # The user's script starts the server: only its placeholders must fit
            # (it knows the drafter path; the dialect still verifies /server_info).
            found = cfg.problems(config) or script_problems(s.restart_cmd, config)
        elif s.control == "external":
            found = cfg.problems(config)
        else:
            cfg.validate(config, self.dialect)
            return
        if found:
            raise cfg.ConfigError(found[0])

    def cases(self, marker: pytest.Mark | None) -> list[ThroughputCase]:
        """Throughput cases: the ``throughput`` marker's values over the settings'."""
        kwargs: dict[str, Any] = dict(marker.kwargs) if marker else {}
        unknown = sorted(set(kwargs) - set(_CASE_KEYS))
        if unknown:
            raise cfg.ConfigError(
                f"@pytest.mark.throughput got unknown keys {unknown}; use {', '.join(_CASE_KEYS)}"
            )
        s = self.settings
        contexts = _ints(kwargs.get("contexts", s.contexts), "contexts")
        concurrency = _ints(kwargs.get("concurrency", s.concurrency), "concurrency")
        tokens = _ints(kwargs.get("output_tokens", s.output_tokens), "output_tokens")
        if len(tokens) != 1:
            raise cfg.ConfigError("output_tokens takes one integer")
        return make_cases(contexts, concurrency, tokens[0])


def _ints(value: Any, name: str) -> tuple[int, ...]:
    values = value if isinstance(value, (list, tuple)) else [value]
    out: list[int] = []
    for item in values:
        if isinstance(item, bool) or not isinstance(item, int) or item < 1:
            raise cfg.ConfigError(f"{name}={value!r}: expected integers >= 1")
        out.append(item)
    if not out:
        raise cfg.ConfigError(f"{name}=[]: give at least one value")
    return tuple(out)
