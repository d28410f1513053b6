"""SpecConfig: one speculative-decoding configuration of a server.

A frozen, hashable value. Parsing (markers, ``--dflash-config``,
``--dflash-sweep``), validation and sweeps live here too; rendering a config
into a command line is the job of :mod:`pytest_specdecode.dialects`.
"""

from __future__ import annotations

from dataclasses import dataclass

ALGORITHMS = ("DFLASH", "DDTREE", "EAGLE", "NONE")


class ConfigError(ValueError):
    """A config value is invalid; the message is one line meant for users."""


@dataclass(frozen=True)
class SpecConfig:
    """What the server must run: the drafter algorithm and its knobs.

    ``budget`` is the number of draft tokens (DFLASH block size) or the
    DDTree tree budget; ``window`` is the drafter's sliding window (``None``
    means full attention); ``extra`` holds further ``--flag value`` pairs,
    sorted, so equal configs compare and hash equal.
    """

    algorithm: str = "DFLASH"
    budget: int | None = None
    topk: int | None = None
    window: int | None = None
    draft_model: str | None = None
    extra: tuple[tuple[str, str], ...] = ()

    def label(self) -> str:
        """Human-readable, e.g. ``DFLASH budget=8 window=2048``."""
        parts = [self.algorithm]
        for key in ("budget", "topk", "window"):
            value = getattr(self, key)
            if value is not None:
                parts.append(f"{key}={value}")
        parts.extend(f"{k}={v}" for k, v in self.extra)
        return " ".join(parts)

    def test_id(self) -> str:
        """Compact id for test ids under a sweep, e.g. ``DFLASH-b8-w2048``."""
        parts = [self.algorithm]
        for key, short in (("budget", "b"), ("topk", "k"), ("window", "w")):
            value = getattr(self, key)
            if value is not None:
                parts.append(f"{short}{value}")
        parts.extend(f"{k}{v}" for k, v in self.extra)
        return "-".join(parts)

    def sort_key(self) -> tuple[object, ...]:
        """A total order usable although fields may be ``None``."""
        return (
            self.algorithm,
            -1 if self.budget is None else self.budget,
            -1 if self.topk is None else self.topk,
            -1 if self.window is None else self.window,
            self.draft_model or "",
            self.extra,
        )
