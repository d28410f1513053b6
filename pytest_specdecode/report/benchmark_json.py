"""What pytest-benchmark saves for our tests: params in a JSON form.

pytest-benchmark writes each benchmark's ``params`` (the test's callspec) with
a JSON encoder that turns any object it does not know into the string
``UNSERIALIZABLE[SpecConfig(...)]``. The session's ``pytest_benchmark_update_json``
hook calls :func:`jsonable_params` before the file is written, so a saved run
says which config and case each benchmark measured in plain JSON.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pytest_specdecode.config.spec import SpecConfig, config_to_dict
from pytest_specdecode.throughput.workload import ThroughputCase


def to_json(value: Any) -> Any:
    """A config as its dict and label, a case as its fields and id, anything else as is."""
    if isinstance(value, SpecConfig):
        return {"label": value.label(), **config_to_dict(value)}
    if isinstance(value, ThroughputCase):
        return {"id": value.id, **asdict(value)}
    return value


def jsonable_params(output_json: dict[str, Any]) -> None:
    """Replace the params of every benchmark in pytest-benchmark's JSON, in place."""
    for bench in output_json.get("benchmarks") or []:
        params = bench.get("params") if isinstance(bench, dict) else None
        if isinstance(params, dict):
            # A new dict: the old one is the test's own callspec.params.
            bench["params"] = {name: to_json(value) for name, value in params.items()}
