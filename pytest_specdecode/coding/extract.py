"""From a model's reply to the code to run.

1. :func:`strip_reasoning` removes ``<think>...</think>`` blocks. A reply that
   *ends* inside ``<think>`` (the model ran out of tokens while reasoning) keeps
   only what came before it: code drafted inside unfinished reasoning is not an
   answer, and grading it would reward truncation. A stray ``</think>`` with no
   opening tag (chat templates that open the block in the prompt) drops
   everything up to it.
2. :func:`extract_code` takes the *last* fenced block that parses and defines
   the entry point at top level (models revise; usage examples come in later
   blocks that do not define it). Without one, the longest syntactically valid
   run of lines that defines it. Failing that, the longest code-like block or
   span (so the verdict can say "does not define gcd"), else None.
   The run search is bounded: from each line that starts code it tries the
   longest run first and, when that does not parse, only runs that end
   before the line the parser stopped at (no longer run can parse either);
   lines inside a run already found are not tried again, and the whole search
   stops after a fixed number of parses or at the answer's deadline
   (:class:`ExtractionTimeout`), so a hostile reply cannot stall the run.
3. The chosen code is sanitized: top-level statements that only exercise the
   code (bare expressions, asserts, loops, ``if __name__ == "__main__"``) are
   dropped; imports, definitions and assignments are kept, and imports from
   the reply's other blocks are added when the code uses their names.
"""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Callable

from pytest_specdecode.errors import SpecDecodeError

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_OPEN = re.compile(r"<think>", re.IGNORECASE)
_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:^[ \t]*\1[ \t]*$|\Z)",
                    re.DOTALL | re.MULTILINE)  # fmt: skip
_NOT_PYTHON = {"bash", "sh", "shell", "console", "text", "txt", "json", "yaml", "toml", "output"}
_CODE_START = re.compile(r"^(def |async def |class |import |from |@)")
# Parses the run search may spend on one reply, beyond one per line that starts code.
_EXTRA_PARSES = 200


class ExtractionTimeout(SpecDecodeError):
    """The answer's deadline passed while looking for its code."""


class _Budget:
    """The deadline and parse allowance of one extraction."""

    def __init__(self, deadline: float | None, clock: Callable[[], float], parses: int) -> None:
        self.deadline = deadline
        self.clock = clock
        self.parses = parses

    def spend(self) -> bool:
        """Whether one more parse is allowed; raises once the deadline passed."""
        if self.deadline is not None and self.clock() > self.deadline:
            raise ExtractionTimeout("the deadline passed while extracting the code")
        self.parses -= 1
        return self.parses >= 0


def strip_reasoning(text: str) -> str:
    """The reply without its reasoning (see module docs for unclosed tags)."""
    text = _THINK.sub("", text)
    close = list(_CLOSE.finditer(text))
    if close:
        text = text[close[-1].end() :]
    opened = _OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    return text.strip("\n")


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def _defines(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                return True
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name) == name for a in node.names
        ):
            return True
    return False


def _code_like(tree: ast.Module) -> bool:
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
    return any(isinstance(node, kinds) for node in tree.body)


def _fenced_blocks(text: str) -> list[str]:
    return [m.group(3) for m in _FENCE.finditer(text) if m.group(2).lower() not in _NOT_PYTHON]


def _error_line(code: str) -> int | None:
    """None when ``code`` parses, else the line (1-based) where the parser gave up (0: unknown)."""
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return exc.lineno or 0
    except (ValueError, MemoryError, RecursionError):
        return 0
    return None


def _spans(text: str, budget: _Budget) -> list[str]:
    """For lines that start code, the longest parseable run of lines from each (bounded)."""
    lines = text.splitlines()
    spans = []
    start = 0
    while start < len(lines):
        if not _CODE_START.match(lines[start]):
            start += 1
            continue
        end = len(lines)
        found = False
        while end > start and budget.spend():
            chunk = "\n".join(lines[start:end]) + "\n"
            error = _error_line(chunk)
            if error is None:
                spans.append(chunk)
                found = True
                break
            # Every run that holds the line the parser stopped at fails there too.
            end = min(end - 1, start + error - 1) if error > 0 else end - 1
        if budget.parses < 0:
            break
        start = end if found else start + 1
    return spans


def _is_main_guard(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "__name__" in ast.dump(node.test)


def _sanitize(code: str, tree: ast.Module, other_imports: list[ast.stmt]) -> str:
    dropped = (ast.Expr, ast.Assert, ast.For, ast.While, ast.AsyncFor)
    lines = code.splitlines()
    keep: list[str] = []
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, dropped) or _is_main_guard(node):
            continue
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        keep.append("\n".join(lines[first - 1 : node.end_lineno]))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    extra = []
    for node in other_imports:
        assert isinstance(node, (ast.Import, ast.ImportFrom))
        names = {(a.asname or a.name).split(".")[0] for a in node.names}
        if names & used and not names <= defined:
            extra.append(ast.unparse(node))
            defined |= names
    return "\n".join([*extra, *keep]) + "\n"


def _imports(blocks: list[str]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for block in blocks:
        tree = _parse(block)
        if tree is not None:
            out += [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return out


def extract_code(
    answer: str,
    entry_point: str,
    *,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> str | None:
    """The code to run from a model's reply, or None when it contains no code.

    Raises :class:`ExtractionTimeout` when ``clock()`` passes ``deadline``.
    """
    text = strip_reasoning(answer)
    blocks = _fenced_blocks(text)
    starts = sum(1 for line in text.splitlines() if _CODE_START.match(line))
    budget = _Budget(deadline, clock, len(blocks) + starts + _EXTRA_PARSES)
    parsed = [(b, t) for b in blocks if budget.spend() and (t := _parse(b)) is not None]
    chosen = next((p for p in reversed(parsed) if _defines(p[1], entry_point)), None)
    if chosen is None:
        spans = [(s, t) for s in _spans(text, budget) if (t := _parse(s)) is not None]
        defining = [p for p in spans if _defines(p[1], entry_point)]
        if defining:
            chosen = max(defining, key=lambda p: len(p[0]))
        else:
            code_like = [p for p in [*parsed, *spans] if _code_like(p[1])]
            if not code_like:
                return None
            chosen = max(code_like, key=lambda p: len(p[0]))
    code, tree = chosen
    others = [b for b in blocks if b is not code]
    return _sanitize(code, tree, _imports(others))
