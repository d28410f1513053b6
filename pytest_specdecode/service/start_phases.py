"""What one server start cost, phase by phase, read from the server's own log.

SGLang 0.5.23 logs each step of a start (the lines below are its own, from
``model_runner.py``, ``memory_pool.py``, ``kv_cache_configurator.py``,
``cuda_graph_setup.py`` and ``http_server.py`` of the wheel)::

    Load weight begin. avail mem=78.52 GB
    Load weight end. elapsed=41.20 s, type=..., avail mem=62.12 GB, mem usage=16.40 GB.
    KV Cache is allocated. dtype: torch.bfloat16, #tokens: ..., K size: ... GB, V size: ... GB
    Memory pool end. avail mem=... GB
    Capture target verify CUDA graph begin. backend=..., num_tokens_per_req=..., avail mem=...
    Capture target verify CUDA graph end. bs=[...], elapsed=12.04 s, mem usage=..., avail mem=...
    The server is fired up and ready to roll!

each after ``[YYYY-MM-DD HH:MM:SS]`` (``.mmm`` too under ``SGLANG_LOG_MS=1``,
which the plugin sets for the servers it launches). A target and a drafter
each load weights, allocate their pool and capture graphs: a phase is the sum
over both. :func:`read_phases` turns the lines into seconds: a line's own
``elapsed=`` figure where it has one (SGLang times those steps itself), else
the time since the step before it; warm-up is from the last step before the
"fired up" line to it. The plugin's own clock gives the rest
(:class:`StartPhases`): the whole start and the first healthy generate, both
from the launch. Durations only, so a server whose clock differs from the
plugin's still reads right.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# The phases the log says, in the order a start goes through them, and their names for people.
PHASES = ("load", "kv_cache", "graph_capture", "warmup")
PHASE_LABELS = {
    "load": "load",
    "kv_cache": "KV cache",
    "graph_capture": "CUDA graphs",
    "warmup": "warm-up",
}

LOG_STAMP = re.compile(
    r"^\[(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<ms>\.\d{1,6})?[^\]]*\]\s?(?P<message>.*)$"
)
_ELAPSED = re.compile(r"\belapsed=(?P<seconds>\d{1,9}(?:\.\d{1,9})?) ?s\b")
_LOAD_BEGIN = "Load weight begin."
_LOAD_END = "Load weight end."
_KV = re.compile(r"\bKV Cache is allocated\.|\bMemory pool end\.")
_GRAPH_BEGIN = re.compile(r"\bCapture .{0,80}? graph begin\.", re.IGNORECASE)
_GRAPH_END = re.compile(r"\bCapture .{0,80}? graph end\.", re.IGNORECASE)
READY_LINE = "The server is fired up and ready to roll!"
# The lines above as one extended regex (grep -E), for reading only them off a remote journal.
LOG_GREP = (
    r"Load weight (begin|end)\.|KV Cache is allocated\.|Memory pool end\.|"
    r"Capture .* graph (begin|end)\.|fired up and ready to roll|Weight cache not available"
)
# The client of a weight-cache daemon that did not find it (ipc_loader.py).
CACHE_FALLBACK = "Weight cache not available or config mismatch, falling back to disk load"


@dataclass(frozen=True)
class LogPhases:
    """The phases one start's log lines say; None: no line for that phase."""

    load: float | None = None
    kv_cache: float | None = None
    graph_capture: float | None = None
    warmup: float | None = None
    # The log's timestamps step by this many seconds (1.0 without SGLANG_LOG_MS).
    resolution: float | None = None
    cache_fell_back: bool = False


@dataclass(frozen=True)
class StartPhases:
    """One start of a config: where its seconds went (the record the search reads).

    ``total``: the plugin's clock from the launch to the passed gate (the
    handle's ``ready_seconds``); ``first_generate``: from the launch to the
    first healthy ``/health_generate``. ``load``, ``kv_cache``,
    ``graph_capture`` and ``warmup`` come from the server's log (None where
    it has no such line, or no log could be read: ``source`` says which).
    ``weight_cache``: ``off``, ``client`` (loaded through the daemon) or
    ``fell back`` (asked to, but the server loaded from disk).
    """

    total: float
    first_generate: float | None = None
    load: float | None = None
    kv_cache: float | None = None
    graph_capture: float | None = None
    warmup: float | None = None
    resolution: float | None = None
    weight_cache: str = "off"
    source: str = ""

    @property
    def other(self) -> float | None:
        """The seconds of the start no phase accounts for (imports, tokenizer, scheduler)."""
        known = [v for v in (self.load, self.kv_cache, self.graph_capture, self.warmup) if v]
        if not known:
            return None
        return max(0.0, self.total - sum(known))

    def describe(self) -> str:
        """``load 0.40s, KV cache 0.20s, CUDA graphs 0.30s, warm-up 0.20s`` (the known ones)."""
        parts = [
            f"{PHASE_LABELS[name]} {value:.2f}s"
            for name in PHASES
            if (value := getattr(self, name)) is not None
        ]
        if self.weight_cache != "off":
            parts.append(f"weight cache: {self.weight_cache}")
        return ", ".join(parts) if parts else "phases unknown"

    def to_json(self) -> dict[str, Any]:
        """JSON-able, seconds rounded to milliseconds."""
        return {
            "total_seconds": _round(self.total),
            "first_generate_seconds": _round(self.first_generate),
            **{f"{name}_seconds": _round(getattr(self, name)) for name in PHASES},
            "other_seconds": _round(self.other),
            "resolution_seconds": self.resolution,
            "weight_cache": self.weight_cache,
            "source": self.source,
        }

    @classmethod
    def of(
        cls,
        log: LogPhases | None,
        *,
        total: float,
        first_generate: float | None,
        weight_cache: str,
        source: str,
    ) -> StartPhases:
        """The record of a start from its log's phases and the plugin's clock."""
        if log is None:
            return cls(total, first_generate, weight_cache=weight_cache, source=source)
        cache = "fell back" if weight_cache == "client" and log.cache_fell_back else weight_cache
        measured = {name: getattr(log, name) for name in (*PHASES, "resolution")}
        return cls(total, first_generate, weight_cache=cache, source=source, **measured)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _stamp(match: re.Match[str]) -> float | None:
    try:
        when = datetime.strptime(match["stamp"], "%Y-%m-%d %H:%M:%S").timestamp()
    except (ValueError, OverflowError, OSError):  # a stamp no clock can hold
        return None
    return when + (float(match["ms"]) if match["ms"] else 0.0)


class _Tally:
    """The sums of one start, line by line."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.previous: float | None = None
        self.began: dict[str, float] = {}
        self.ready = False
        self.fell_back = False
        self.resolution: float | None = None

    def add(self, phase: str, seconds: float | None) -> None:
        if seconds is not None and math.isfinite(seconds) and seconds >= 0:
            self.sums[phase] = self.sums.get(phase, 0.0) + seconds

    def since(self, start: float | None, at: float) -> float | None:
        return None if start is None else at - start

    def line(self, at: float, message: str, fine: bool) -> None:
        elapsed = _ELAPSED.search(message)
        own = float(elapsed["seconds"]) if elapsed else None
        if _LOAD_BEGIN in message:
            self.began["load"] = at
        elif _LOAD_END in message:
            self.add(
                "load", own if own is not None else self.since(self.began.pop("load", None), at)
            )
        elif _KV.search(message):
            self.add("kv_cache", self.since(self.previous, at))
        elif _GRAPH_BEGIN.search(message):
            self.began["graph"] = at
        elif _GRAPH_END.search(message):
            began = self.began.pop("graph", None)
            self.add("graph_capture", own if own is not None else self.since(began, at))
        elif READY_LINE in message:
            self.add("warmup", self.since(self.previous, at))
            self.ready = True
        else:
            return
        self.previous = at
        step = 0.001 if fine else 1.0
        self.resolution = step if self.resolution is None else max(self.resolution, step)

    def phases(self) -> LogPhases:
        return LogPhases(
            **{name: _round(self.sums[name]) for name in PHASES if name in self.sums},
            resolution=self.resolution,
            cache_fell_back=self.fell_back,
        )


def read_phases(text: str) -> LogPhases | None:
    """The phases of the last start in ``text`` (a server's log); None: no phase line in it.

    A log that holds several starts (a ``Load weight begin`` after a "fired
    up" line) is read from its last start on.
    """
    tally = _Tally()
    for raw in text.splitlines():
        found = LOG_STAMP.match(raw.strip())
        if found is None:
            continue
        message = found["message"]
        at = _stamp(found)
        if at is None:
            continue
        if tally.ready and _LOAD_BEGIN in message:
            tally = _Tally()
        if CACHE_FALLBACK in message:
            tally.fell_back = True
        tally.line(at, message, fine=found["ms"] is not None)
    return tally.phases() if tally.resolution is not None else None
