"""``--dflash-weight-cache``: whether configs load through SGLang's weight-cache daemon.

``off`` (default); ``on``: one daemon per host holds the weights, every config
starts as its client, the daemon is stopped at the end; ``keep``: the same,
left running at the end. Add ``,fallback`` to load from disk (with one line
saying why) when the daemon cannot be started or dies; without it that is an
error of every config.
"""

from __future__ import annotations

from dataclasses import dataclass

WORDS = ("off", "on", "keep", "fallback")


@dataclass(frozen=True)
class WeightCacheSetting:
    """The resolved ``--dflash-weight-cache``."""

    on: bool = False
    keep: bool = False
    fallback: bool = False

    def __str__(self) -> str:
        if not self.on:
            return "off"
        return ("keep" if self.keep else "on") + (",fallback" if self.fallback else "")


OFF = WeightCacheSetting()


def parse(value: str) -> WeightCacheSetting:
    """``off``, ``on``, ``keep``, ``on,fallback`` or ``keep,fallback``."""
    words = [w.strip() for w in value.split(",") if w.strip()]
    wrong = [w for w in words if w not in WORDS]
    if not words or wrong or len(set(words)) != len(words) or ("off" in words and len(words) > 1):
        raise ValueError("expected off, on, keep, on,fallback or keep,fallback")
    if words == ["off"]:
        return OFF
    if "on" in words and "keep" in words:
        raise ValueError("on and keep exclude each other (keep is on, left running at the end)")
    return WeightCacheSetting(on=True, keep="keep" in words, fallback="fallback" in words)
