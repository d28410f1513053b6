"""A format-1 report read as format 2, so every reader knows one shape.

Format 1 spelled some settings with spaces (``"sglang version"``) and keyed a few
records by a label or test id (a config's ``lossless`` by node id, ``pass_at_k`` by
k, the verdict's ``excluded`` by config label, the problem set by name); format 2
names every key in snake_case and holds records as lists. The records' digests
(:mod:`~pytest_specdecode.report.digest`) survive the move: a lossless record's
digest always covered its node id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def upgrade(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` in format 2 (a format-2 report is returned as it is)."""
    if report.get("format") != 1:
        return report
    out = dict(report, format=2)
    if isinstance(settings := report.get("settings"), Mapping):
        out["settings"] = _settings(settings)
    if isinstance(configs := report.get("configs"), list):
        out["configs"] = [_config(c) if isinstance(c, Mapping) else c for c in configs]
    if isinstance(verdict := report.get("verdict"), Mapping):
        excluded = verdict.get("excluded")
        if isinstance(excluded, Mapping):
            listed = [{"config": str(k), "reasons": list(v or [])} for k, v in excluded.items()]
            out["verdict"] = {**verdict, "excluded": listed}
    return out


def _renamed(section: Mapping[str, Any]) -> dict[str, Any]:
    """A settings section with format 2's names: format 1 spelled ``sglang_version`` (and
    every other setting of two words or more) with spaces."""
    return {k.replace(" ", "_"): v for k, v in section.items()}


def _settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    out = _renamed(settings)
    for name in ("cases", "problems"):
        if isinstance(section := out.get(name), Mapping):
            out[name] = _renamed(section)
    problems = out.get("problems")
    if isinstance(problems, dict) and isinstance(files := problems.get("files"), Mapping):
        problems["files"] = [{"path": str(p), "digest": d} for p, d in files.items()]
    if isinstance(found := out.get("problem_set"), Mapping):
        out["problem_set"] = [{"name": str(n), "digest": d} for n, d in found.items()]
    return out


def _config(config: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(config)
    if isinstance(passk := config.get("pass_at_k"), Mapping):
        out["pass_at_k"] = [{"k": _k(k), "value": v} for k, v in passk.items()]
    if isinstance(lossless := config.get("lossless"), Mapping):
        out["lossless"] = [
            {"nodeid": str(n), **r} if isinstance(r, Mapping) else {"nodeid": str(n)}
            for n, r in lossless.items()
        ]
    return out


def _k(text: Any) -> Any:
    try:
        return int(text)
    except (TypeError, ValueError):
        return text
