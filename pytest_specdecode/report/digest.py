"""A digest per record in the JSON report, so ``--dflash-resume`` carries only what a run wrote.

Each test entry and each coding, throughput and lossless record of a config gets a
``digest``: SHA-256 over its content as JSON (keys sorted), its config's key and
the record's kind, taken from the report exactly as written (after secrets are
masked). A resumed run recomputes it: a record edited since (a failed outcome
turned into a pass, a figure changed, a record moved to another config) no longer
matches, and is refused (its test runs again). It catches edits, not forgery by
someone who recomputes the digest: the report is not signed with a secret.

The content is the typed record as the file holds it (:func:`msgspec.to_builtins`),
less the few fields a report once wrote only when they were set (:data:`UNSET`):
left out at their default, so a record digests as it did when the report was a
dict, and a report written before the typed model still verifies.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import msgspec

from pytest_specdecode.report.model import (
    CodingRecord,
    LosslessRecord,
    Report,
    TestEntry,
    ThroughputRecord,
)

FIELD = "digest"
KINDS = ("coding", "throughput", "lossless")

Record = TestEntry | CodingRecord | ThroughputRecord | LosslessRecord
"""A record that carries a digest."""

UNSET: dict[str, dict[str, Any]] = {
    "test": {"carried": False},
    "throughput": {"speedup": None, "repetition": None, "client_limited": None},
}
"""Per kind, the fields a record had only when set, and their default (left out then)."""
METRICS_UNSET = {"repetition_baseline": None}
"""The same for a throughput record's ``metrics``."""


def content(kind: str, record: Record) -> dict[str, Any]:
    """What :func:`of` digests: the record as the file holds it, its own ``digest`` and
    its fields at their :data:`UNSET` default left out."""
    body: dict[str, Any] = msgspec.to_builtins(record)
    body.pop(FIELD, None)
    _drop_unset(body, UNSET.get(kind, {}))
    if kind == "throughput" and isinstance(body.get("metrics"), dict):
        _drop_unset(body["metrics"], METRICS_UNSET)
    return body


def _drop_unset(body: dict[str, Any], unset: dict[str, Any]) -> None:
    for name, default in unset.items():
        if name in body and body[name] is default:
            del body[name]


def of(kind: str, config: str, record: Record) -> str:
    """The digest of ``record`` (its own ``digest`` field left out)."""
    # Through JSON first: what is digested is what a reader of the file gets back.
    text = json.dumps(content(kind, record), default=str)
    canonical = json.dumps([kind, config, json.loads(text)], sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def _records(report: Report) -> Iterator[tuple[str, str, Record]]:
    """(kind, config key, record) of every record of ``report``."""
    for entry in report.tests:
        yield "test", "", entry
    for config in report.configs:
        key = str(config.key)
        yield from (("coding", key, r) for r in config.coding)
        yield from (("throughput", key, r) for r in config.throughput)
        yield from (("lossless", key, r) for r in config.lossless)


def sign(report: Report) -> None:
    """Set the digest of every record of ``report`` (in place, as the file will hold it)."""
    for kind, key, record in _records(report):
        record.digest = of(kind, key, record)


def refused(report: Report) -> dict[str, str]:
    """By node id, why its records cannot be carried: a digest that no longer matches,
    or none in a report whose other records have one. A report with no digest at
    all (made before they existed) refuses nothing: :func:`signed` tells."""
    found: dict[str, str] = {}
    if not signed(report):
        return found
    for kind, key, record in _records(report):
        stated = record.digest
        if stated is None:
            found.setdefault(record.nodeid, f"its {kind} record has no digest")
        elif stated != of(kind, key, record):
            found.setdefault(record.nodeid, f"its {kind} record no longer matches its digest")
    return found


def signed(report: Report) -> bool:
    """Whether any record of ``report`` has a digest."""
    return any(record.digest is not None for _, _, record in _records(report))
