"""A digest per record in the JSON report, so ``--dflash-resume`` carries only what a run wrote.

Each test entry and each coding, throughput and lossless record of a config gets a
``digest``: SHA-256 over its content as JSON (keys sorted), its config's key and
the record's kind, taken from the report exactly as written (after secrets are
masked). A resumed run recomputes it: a record edited since (a failed outcome
turned into a pass, a figure changed, a record moved to another config) no longer
matches, and is refused (its test runs again). It catches edits, not forgery by
someone who recomputes the digest: the report is not signed with a secret.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

FIELD = "digest"
KINDS = ("coding", "throughput", "lossless")


def of(kind: str, config: str, record: Mapping[str, Any]) -> str:
    """The digest of ``record`` (its own ``digest`` field left out)."""
    body = {k: v for k, v in record.items() if k != FIELD}
    # Through JSON first: what is digested is what a reader of the file gets back.
    text = json.dumps(body, default=str)
    canonical = json.dumps([kind, config, json.loads(text)], sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def _records(report: Mapping[str, Any]) -> Iterator[tuple[str, str, str, Any]]:
    """(kind, config key, node id, record) of every record of ``report``."""
    for entry in report.get("tests") or []:
        if isinstance(entry, Mapping):
            yield "test", "", str(entry.get("nodeid")), entry
    for config in report.get("configs") or []:
        if not isinstance(config, Mapping):
            continue
        key = str(config.get("key"))
        for kind in KINDS:
            for record in config.get(kind) or []:
                if isinstance(record, Mapping):
                    yield kind, key, str(record.get("nodeid")), record


def sign(report: dict[str, Any]) -> None:
    """Add a digest to every record of ``report`` (in place, as the file will hold it)."""
    for config in report.get("configs") or []:
        key = str(config.get("key"))
        for kind in KINDS:
            config[kind] = [{**r, FIELD: of(kind, key, r)} for r in config.get(kind) or []]
    report["tests"] = [{**t, FIELD: of("test", "", t)} for t in report.get("tests") or []]


def refused(report: Mapping[str, Any]) -> dict[str, str]:
    """By node id, why its records cannot be carried: a digest that no longer matches,
    or none in a report whose other records have one. A report with no digest at
    all (made before they existed) refuses nothing: :func:`signed` tells."""
    found: dict[str, str] = {}
    if not signed(report):
        return found
    for kind, key, nodeid, record in _records(report):
        stated = record.get(FIELD)
        if stated is None:
            found.setdefault(nodeid, f"its {kind} record has no digest")
        elif stated != of(kind, key, record):
            found.setdefault(nodeid, f"its {kind} record no longer matches its digest")
    return found


def signed(report: Mapping[str, Any]) -> bool:
    """Whether any record of ``report`` has a digest."""
    return any(FIELD in record for _, _, _, record in _records(report))
