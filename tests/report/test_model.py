"""The typed report (format 2): its shipped JSON Schema, snake_case keys, format 1 read."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_specdecode.report import json_report, model, upgrade
from pytest_specdecode.report.cli import run as cli_run

FORMAT_1 = Path(__file__).parent / "data" / "report_format1.json"  # the demo's, before format 2
KEY = re.compile(r"^[a-z][a-z0-9_]*$")


def keys(value: Any, where: str = "$") -> Iterator[tuple[str, str]]:
    """Every (path, key) of every object in ``value``, however deep."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield where, key
            yield from keys(item, f"{where}.{key}")
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield from keys(item, f"{where}[{n}]")


def bad_keys(report: Any) -> list[str]:
    return [f"{where}: {key!r}" for where, key in keys(report) if not KEY.match(key)]


@functools.cache
def validator() -> jsonschema.Draft202012Validator:
    """The shipped schema's validator, built once (building it is the slow part)."""
    return jsonschema.Draft202012Validator(model.shipped_schema())


def check(report: dict[str, Any]) -> None:
    """What the issue asks of a report: format 2, snake_case keys, valid by the schema."""
    assert report["format"] == 2
    assert bad_keys(report) == []
    validator().validate(report)
    assert model.Report.from_dict(report).to_dict() == model.Report.from_dict(report).to_dict()


def test_the_shipped_schema_is_the_one_generated_from_the_model() -> None:
    assert model.shipped_schema() == model.schema(), (
        "regenerate: python -m pytest_specdecode.report.model > "
        "pytest_specdecode/report/report.schema.json"
    )
    jsonschema.Draft202012Validator.check_schema(model.shipped_schema())


def test_the_format_1_file_had_keys_format_2_does_not() -> None:
    old = json.loads(FORMAT_1.read_text())
    assert old["format"] == 1
    assert "$.settings: 'sglang version'" in bad_keys(old)
    assert any("lossless: 'tests/test_lossless.py::" in found for found in bad_keys(old))


def upgraded() -> dict[str, Any]:
    """The format-1 demo file as format 2, before the typed model reads it."""
    found: dict[str, Any] = upgrade.upgrade(json.loads(FORMAT_1.read_text()))
    return found


def test_a_demo_report_read_as_format_2_validates_and_keeps_every_figure() -> None:
    old = json.loads(FORMAT_1.read_text())
    data = json_report.load(FORMAT_1)
    check(upgraded())
    check(data.to_dict())
    assert data.settings is not None
    assert data.settings.sglang_version is None
    assert data.settings.cases.max_concurrency == old["settings"]["cases"]["max concurrency"]
    names = [p.name for p in data.settings.problem_set or []]
    assert names == list(old["settings"]["problem set"])
    for before, raw, now in zip(old["configs"], upgraded()["configs"], data.configs, strict=True):
        assert raw["throughput"] == before["throughput"]
        assert contained(before["throughput"], msgspec.to_builtins(now.throughput))
        assert {r.nodeid: r.passed for r in now.lossless} == {
            n: r["passed"] for n, r in before["lossless"].items()
        }
    # The typed value holds everything the file does: nothing is lost on the way through.
    assert data.configs[2].lossless[0].nodeid == "tests/test_lossless.py::test_lossless"
    assert model.Report.from_json(data.to_json()) == data
    assert json.loads(data.to_json()) == data.to_dict()


def contained(part: Any, whole: Any) -> bool:
    """Whether every key and value of ``part`` is in ``whole`` (which may have more keys)."""
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(
            k in whole and contained(v, whole[k]) for k, v in part.items()
        )
    if isinstance(part, list):
        return (
            isinstance(whole, list)
            and len(part) == len(whole)
            and all(contained(a, b) for a, b in zip(part, whole, strict=True))
        )
    return bool(part == whole)


def test_the_typed_report_keeps_every_key_and_value_of_the_file() -> None:
    data = upgraded()
    back = json_report.load(FORMAT_1).to_dict()
    assert contained(data, back)
    assert not contained({**data, "format": 3}, back)  # the check can fail


def test_the_cli_renders_a_format_1_file_as_its_format_2_reading(tmp_path: Path) -> None:
    saved = tmp_path / "r2.json"
    json_report.write_atomic(saved, json_report.load(FORMAT_1))
    for extra in ([], ["--markdown"]):
        old = _run("report", str(FORMAT_1), *extra)
        new = _run("report", str(saved), *extra)
        assert old[0] == 0, old
        assert old == new
    assert "budget=16" in old[1]


def _run(*argv: str) -> tuple[int, str, str]:
    import io

    out, err = io.StringIO(), io.StringIO()
    status = cli_run(list(argv), out, err)
    return status, out.getvalue(), err.getvalue()


def test_a_report_of_another_shape_is_refused_by_the_model() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"\$\.configs\[0\]\.lossless"):
        model.Report.from_dict({"format": 2, "configs": [{"label": "A", "lossless": {"t": {}}}]})


labels = st.text(min_size=1, max_size=12)


@settings(deadline=None, max_examples=40)
@given(
    passk=st.dictionaries(st.sampled_from(["1", "5", "10"]), st.floats(0, 1)),
    lossless=st.dictionaries(labels, st.booleans(), max_size=3),
    excluded=st.dictionaries(labels, st.lists(labels, max_size=2), max_size=3),
    problems=st.dictionaries(labels, st.text(max_size=8), max_size=3),
)
def test_any_format_1_report_reads_as_a_valid_format_2_one(
    passk: dict[str, float],
    lossless: dict[str, bool],
    excluded: dict[str, list[str]],
    problems: dict[str, str],
) -> None:
    old = {
        "format": 1,
        "settings": {"sglang version": "0.5.23", "problem set": problems, "cases": {}},
        "configs": [
            {
                "label": "A b",
                "pass_at_k": passk,
                "lossless": {n: {"passed": p, "detail": n} for n, p in lossless.items()},
            }
        ],
        "verdict": {"excluded": excluded},
    }
    new = upgrade.upgrade(json.loads(json.dumps(old)))
    check(new)
    assert [r["nodeid"] for r in new["configs"][0]["lossless"]] == list(lossless)
    assert {e["config"]: e["reasons"] for e in new["verdict"]["excluded"]} == excluded
    assert {p["k"]: p["value"] for p in new["configs"][0]["pass_at_k"]} == {
        int(k): v for k, v in passk.items()
    }
    typed = model.Report.from_dict(new)
    assert model.Report.from_json(typed.to_json()) == typed
