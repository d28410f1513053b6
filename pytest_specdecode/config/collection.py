"""What each collected test runs under: its configs.

Settings are parsed once here (``--dflash-config``, ``--dflash-sweep``, the
ini default); per test, the ``dflash`` marker is merged on top and every
resulting config is validated against the dialect, so a bad value fails at
collection naming the test. Equal configs are interned to one object, so the
session-scoped fixture sees the same parameter for every test of a config.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from pytest_specdecode.config import spec as cfg
from pytest_specdecode.config.dialects import get_dialect, script_problems
from pytest_specdecode.config.settings import Settings


def template_args(settings: Settings) -> dict[str, Any]:
    """:func:`get_dialect` arguments: the ini templates for the template dialect (others
    refuse them), the SGLang version whose option table built-ins check flags against."""
    if settings.dialect != "template":
        return {"sglang_version": settings.sglang_version, "simulator": settings.uses_simulator}
    return {"args_template": settings.args_template, "env_template": settings.env_template}


class ConfigResolver:
    """Turns markers + settings into validated, interned configs."""

    def __init__(
        self, settings: Settings, *, live: Callable[[], cfg.SpecConfig | None] | None = None
    ) -> None:
        self.settings = settings
        self.dialect = get_dialect(settings.dialect, **template_args(settings))
        # External mode: the live server's config, read at the first test that needs a
        # config, stands in for the built-in defaults (what the ini and options set
        # still apply over it); None until read, or when it could not be.
        self._live = live
        self.live: cfg.SpecConfig | None = None
        self.base = self._base()
        self.cli = (
            cfg.parse_config_option(settings.config_override) if settings.config_override else {}
        )
        self.sweep = cfg.parse_sweep_option(settings.sweep) if settings.sweep else []
        self._sweeps_drafter = any("draft_model" in point for point in self.sweep)
        self._interned: dict[cfg.SpecConfig, cfg.SpecConfig] = {}

    def _base(self) -> cfg.SpecConfig:
        s = self.settings
        return cfg.base_config(s.base_config, draft_model=s.draft_model, start=self.live)

    def configs(self, marker: Mapping[str, object] | None) -> tuple[list[cfg.SpecConfig], bool]:
        """The validated configs of one test and whether they belong in its id."""
        if self._live is not None:
            read, self._live = self._live, None
            self.live = read()
            self.base = self._base()
        resolved = cfg.merge(self.base, marker=marker, cli=self.cli, sweep=self.sweep)
        found: list[cfg.SpecConfig] = []
        for config, _ in resolved:
            config = cfg.canonical(config)
            self._validate(config)
            if config.draft_model is not None and (
                self._sweeps_drafter or config.draft_model != self.base.draft_model
            ):
                # Configs that differ only in their drafter must not share a name.
                config = replace(config, show_draft=True)
            found.append(self._interned.setdefault(config, config))
        return found, any(r.in_id for r in resolved)

    def sweep_overrides(self, marker: Mapping[str, object] | None) -> str | None:
        """A warning when ``marker`` sets keys the sweep varies: the marker wins for those
        keys, so the test runs fewer points than the sweep names. None otherwise."""
        if not self.sweep or not marker:
            return None
        points, _ = cfg.expand_marker(marker)
        if all(str(p.get("algorithm", "")).upper() == "NONE" for p in points):
            return None  # a baseline test: the non-speculative point is its purpose
        swept = {k for point in self.sweep for k in cfg.normalize(point)}
        keys = [k for k in dict.fromkeys(k for p in points for k in p) if k in swept]
        if not keys:
            return None
        values = {k: list(dict.fromkeys(str(p[k]) for p in points if k in p)) for k in keys}
        marked = ", ".join(f"{k}={'/'.join(v)}" for k, v in values.items())
        return (
            f"its dflash marker sets {marked}, which --dflash-sweep also varies: the marker "
            "wins, so this test runs only under the marker's value of "
            f"{', '.join(keys)}; drop {'them' if len(keys) > 1 else 'it'} from the marker "
            "to sweep this test too"
        )

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
