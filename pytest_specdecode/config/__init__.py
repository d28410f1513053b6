"""Settings and configs: ``--dflash-*`` options, their resolution, SpecConfig, dialects.

``SpecConfig`` and ``ConfigError`` are re-exported here, the import path
conftests use: ``from pytest_specdecode.config import SpecConfig``.
"""

from __future__ import annotations

from pytest_specdecode.config.spec import ConfigError, SpecConfig

__all__ = ["ConfigError", "SpecConfig"]
