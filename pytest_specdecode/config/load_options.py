"""Parsers of the throughput workload's options: domains, request rates, SLOs.

Kept out of :mod:`pytest_specdecode.config.settings` (which calls them) so
that module stays about resolution; each parser raises ``ValueError`` with
the reason, which settings turns into one line naming the option's source.
Also reads the two pytest-benchmark options the plugin follows
(``--benchmark-compare``, ``--benchmark-storage``).
"""

from __future__ import annotations

import math
import re
from typing import Any

DOMAINS = ("code", "math", "chat", "summary")
"""Every domain of the prompt set (``throughput/prompt_set``), in report order."""
DEFAULT_DOMAINS = ("chat",)
"""Without ``--dflash-domains``: one domain, so the default run has as many cases as
before (domains multiply the cases); chat, the domain where drafters accept least, so a
default speedup is not flattered by easy text."""
SLO_METRICS = ("ttft", "tpot", "e2e")

Slo = tuple[tuple[str, float], ...]
"""``(("ttft", 0.5), ("tpot", 0.03))``: limits in seconds, per metric."""


def parse_domains(value: str) -> tuple[str, ...]:
    """``code,math`` (or ``all``) -> ``("code", "math")``."""
    names = [item.strip().lower() for item in value.split(",") if item.strip()]
    if names == ["all"]:
        return DOMAINS
    for name in names:
        if name not in DOMAINS:
            raise ValueError(f"unknown domain {name!r}; choose from {', '.join(DOMAINS)} or all")
    if not names:
        raise ValueError(f"give at least one domain of {', '.join(DOMAINS)}")
    return tuple(dict.fromkeys(names))


def parse_rates(value: str) -> tuple[float, ...]:
    """``4,8,16`` -> ``(4.0, 8.0, 16.0)`` requests per second (finite, > 0)."""
    rates: list[float] = []
    for item in value.split(","):
        text = item.strip()
        if not text:
            continue
        try:
            rate = float(text)
        except ValueError:
            raise ValueError(f"expected request rates such as '4,8,16', got {text!r}") from None
        if not (0 < rate < math.inf):
            raise ValueError(f"a request rate must be a finite number > 0, got {text!r}")
        rates.append(rate)
    if not rates:
        raise ValueError("expected at least one request rate, e.g. '4,8,16'")
    return tuple(dict.fromkeys(rates))


_SLO_PART = re.compile(r"^(?P<metric>[a-z0-9]+):(?P<num>\d+(?:\.\d+)?)(?P<unit>ms|s)$")


def parse_slo(value: str) -> Slo:
    """``ttft:500ms,tpot:30ms,e2e:2s`` -> ``(("ttft", 0.5), ("tpot", 0.03), ("e2e", 2.0))``."""
    found: dict[str, float] = {}
    for part in value.split(","):
        text = part.strip().lower()
        if not text:
            continue
        match = _SLO_PART.match(text)
        if not match or match["metric"] not in SLO_METRICS:
            raise ValueError(
                f"bad SLO {part.strip()!r}: expected METRIC:TIME with METRIC one of "
                f"{', '.join(SLO_METRICS)} and TIME like 500ms or 2s (e.g. 'ttft:500ms,tpot:30ms')"
            )
        if match["metric"] in found:
            raise ValueError(f"SLO {match['metric']!r} given twice; give it once")
        seconds = float(match["num"]) / (1000 if match["unit"] == "ms" else 1)
        if seconds <= 0:
            raise ValueError(f"SLO {part.strip()!r} must be > 0")
        found[match["metric"]] = seconds
    if not found:
        raise ValueError("no SLO given; write e.g. 'ttft:500ms,tpot:30ms'")
    return tuple(found.items())


def slo_text(slo: Slo) -> str:
    """The SLO as it is written: ``ttft:500ms,tpot:30ms``."""
    return ",".join(f"{name}:{seconds * 1000:g}ms" for name, seconds in slo)


def benchmark_option(config: Any, name: str) -> Any:
    """A pytest-benchmark option's value, or None when pytest-benchmark is not loaded."""
    try:
        return config.getoption(name)
    except (ValueError, AttributeError):
        return None


def benchmark_compare(config: Any) -> str | None:
    """``--benchmark-compare``: ``NNNN``, or ``"latest"`` when given without a value."""
    value = benchmark_option(config, "benchmark_compare")
    if value is True:
        return "latest"
    return str(value) if value else None
