"""The session's and the fixtures' public surface has real types, not ``Any``.

mypy accepts anything from an ``Any``, so a conftest calling these methods
gets no checking at all: this test reads the annotations themselves. A JSON
object (``dict[str, Any]``: server_info, report records, pytest-benchmark's
JSON) is allowed: its values are whatever JSON holds.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_specdecode import plugin
from pytest_specdecode.client import SGLangClient
from pytest_specdecode.coding.runner import CodingRunner
from pytest_specdecode.service.handle import ServiceHandle
from pytest_specdecode.session.core import SpecDecodeSession
from pytest_specdecode.throughput.runner import LosslessChecker, ThroughputRunner

JSON_OBJECT = re.compile(r"(dict|Mapping)\[str, Any\]")
FIXTURES = [
    "dflash_config",
    "dflash_service",
    "dflash_problem",
    "dflash_case",
    "dflash_client",
    "dflash_throughput",
    "dflash_lossless",
    "dflash_coding",
]


def public_methods() -> list[tuple[str, Callable[..., object]]]:
    found: list[tuple[str, Callable[..., object]]] = []
    classes = (
        SpecDecodeSession,
        ServiceHandle,
        SGLangClient,
        CodingRunner,
        ThroughputRunner,
        LosslessChecker,
    )
    for cls in classes:
        for name, member in vars(cls).items():
            if not name.startswith("_") and inspect.isfunction(member):
                found.append((f"{cls.__name__}.{name}", member))
    return found


def any_in(annotation: object) -> bool:
    text = JSON_OBJECT.sub("", str(annotation))
    return re.search(r"\bAny\b", text) is not None


@pytest.mark.parametrize(("name", "method"), public_methods(), ids=[n for n, _ in public_methods()])
def test_public_methods_have_no_any(name: str, method: Callable[..., object]) -> None:
    annotations = dict(method.__annotations__)
    assert "return" in annotations, f"{name} has no return annotation"
    loose = {k: v for k, v in annotations.items() if any_in(v)}
    assert not loose, f"{name}: Any in {loose}"


def fixture_returns() -> dict[str, str]:
    """Each ``@pytest.fixture`` of plugin.py and its return annotation, as written."""
    tree = ast.parse(Path(plugin.__file__).read_text())
    return {
        node.name: ast.unparse(node.returns) if node.returns is not None else ""
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any("fixture" in ast.unparse(d) for d in node.decorator_list)
    }


def test_every_documented_fixture_is_found() -> None:
    assert set(FIXTURES) <= set(fixture_returns())


@pytest.mark.parametrize("name", sorted(fixture_returns()))
def test_fixtures_return_real_types(name: str) -> None:
    returned = fixture_returns()[name]
    assert returned, f"{name} has no return annotation"
    assert not any_in(returned), f"{name} returns {returned}"
