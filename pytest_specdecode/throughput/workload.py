"""Throughput cases and the prompts they send.

Prompts are real text (the standard library's Python sources, read at run
time) cut to a target length measured in the *server's* tokens. Every prompt
starts at a different place in the corpus, so the prefix cache cannot serve
one request from another.
"""

from __future__ import annotations

import argparse
import itertools
import sysconfig
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_specdecode.config.spec import ConfigError

if TYPE_CHECKING:
    from pytest_specdecode.config.settings import Settings

DEFAULT_CONTEXTS = (60, 1024, 4096)
DEFAULT_CONCURRENCY = (1, 8, 32)
DEFAULT_MAX_TOKENS = 512


@dataclass(frozen=True, order=True)
class ThroughputCase:
    """One load point: prompt length x concurrent requests x output tokens."""

    context: int
    concurrency: int
    max_tokens: int = DEFAULT_MAX_TOKENS
    ignore_eos: bool = True

    @property
    def id(self) -> str:
        """Test id part, e.g. ``ctx1024-c8`` (``-t128`` added for non-default tokens)."""
        base = f"ctx{self.context}-c{self.concurrency}"
        return base if self.max_tokens == DEFAULT_MAX_TOKENS else f"{base}-t{self.max_tokens}"


def parse_int_list(text: str, *, what: str = "value", minimum: int = 1) -> tuple[int, ...]:
    """Parse ``"60,1024,4096"``; raises ``argparse.ArgumentTypeError`` with one line."""
    values: list[int] = []
    for part in text.split(","):
        item = part.strip()
        try:
            value = int(item)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"invalid {what} {item!r} in {text!r}: expected comma-separated integers "
                f"such as '60,1024,4096'"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(
                f"invalid {what} {value!r} in {text!r}: must be >= {minimum}"
            )
        values.append(value)
    return tuple(dict.fromkeys(values))


def make_cases(
    contexts: Iterable[int] = DEFAULT_CONTEXTS,
    concurrency: Iterable[int] = DEFAULT_CONCURRENCY,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    *,
    ignore_eos: bool = True,
) -> list[ThroughputCase]:
    """Every context x concurrency combination, in the given order."""
    return [
        ThroughputCase(ctx, conc, max_tokens, ignore_eos)
        for ctx, conc in itertools.product(tuple(contexts), tuple(concurrency))
    ]


CASE_KEYS = ("contexts", "concurrency", "output_tokens")


def marker_cases(kwargs: Mapping[str, Any], settings: Settings) -> list[ThroughputCase]:
    """Throughput cases: a ``throughput`` marker's values over the settings'."""
    unknown = sorted(set(kwargs) - set(CASE_KEYS))
    if unknown:
        raise ConfigError(
            f"@pytest.mark.throughput got unknown keys {unknown}; use {', '.join(CASE_KEYS)}"
        )
    s = settings
    contexts = _ints(kwargs.get("contexts", s.contexts), "contexts")
    concurrency = _ints(kwargs.get("concurrency", s.concurrency), "concurrency")
    tokens = _ints(kwargs.get("output_tokens", s.output_tokens), "output_tokens")
    if len(tokens) != 1:
        raise ConfigError("output_tokens takes one integer")
    return make_cases(contexts, concurrency, tokens[0])


def _ints(value: Any, name: str) -> tuple[int, ...]:
    values = value if isinstance(value, (list, tuple)) else [value]
    out: list[int] = []
    for item in values:
        if isinstance(item, bool) or not isinstance(item, int) or item < 1:
            raise ConfigError(f"{name}={value!r}: expected integers >= 1")
        out.append(item)
    if not out:
        raise ConfigError(f"{name}=[]: give at least one value")
    return tuple(out)


def parse_case_id(text: str) -> ThroughputCase:
    """Inverse of :attr:`ThroughputCase.id` (``ctx1024-c8`` or ``ctx60-c1-t128``)."""
    parts = text.split("-")
    try:
        if not (2 <= len(parts) <= 3 and parts[0].startswith("ctx") and parts[1].startswith("c")):
            raise ValueError
        context, conc = int(parts[0][3:]), int(parts[1][1:])
        tokens = DEFAULT_MAX_TOKENS
        if len(parts) == 3:
            if not parts[2].startswith("t"):
                raise ValueError
            tokens = int(parts[2][1:])
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid throughput case {text!r}: expected e.g. 'ctx1024-c8' or 'ctx60-c1-t128'"
        ) from None
    return ThroughputCase(context, conc, tokens)


def stdlib_corpus(min_chars: int = 4_000_000) -> str:
    """Python sources of the standard library, in a stable order, joined.

    Read at run time rather than shipped, so the package carries no text.
    """
    root = Path(sysconfig.get_paths()["stdlib"])
    chunks: list[str] = []
    size = 0
    for path in sorted(root.glob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        chunks.append(text)
        size += len(text)
        if size >= min_chars:
            break
    if not chunks:
        raise RuntimeError(f"no Python sources found under {str(root)!r} to build prompts from")
    return "\n".join(chunks)


@dataclass(frozen=True)
class Prompt:
    """A prompt and its length in the server's tokens."""

    text: str
    tokens: int


class PromptBuilder:
    """Cuts corpus slices to a token length using the server's counts.

    The chars-per-token ratio is learnt once and refined as prompts are
    measured, so most prompts cost one count request.
    """

    def __init__(
        self,
        count_tokens: Callable[[str], int],
        corpus: str | None = None,
        *,
        tolerance: float = 0.02,
        max_tries: int = 5,
    ) -> None:
        self._count = count_tokens
        self._corpus = corpus
        self.tolerance = tolerance
        self.max_tries = max_tries
        self._ratio: float | None = None
        self._next_offset = 0

    @property
    def corpus(self) -> str:
        """The text prompts are cut from (the stdlib sources unless one was given)."""
        if self._corpus is None:
            self._corpus = stdlib_corpus()
        return self._corpus

    def chars_per_token(self) -> float:
        """The current chars-per-token estimate, measured on first use."""
        if self._ratio is None:
            sample = self.corpus[:8000]
            self._ratio = len(sample) / max(1, self._count(sample))
        return self._ratio

    def _slice(self, offset: int, chars: int) -> str:
        corpus = self.corpus
        start = offset % len(corpus)
        text = corpus[start : start + chars]
        while len(text) < chars:  # wrap around a short corpus
            text += "\n" + corpus[: chars - len(text) - 1]
        return text

    def one(self, target_tokens: int, offset: int) -> Prompt:
        """A prompt of about ``target_tokens`` tokens starting at corpus ``offset``."""
        if target_tokens < 1:
            raise ValueError(f"target_tokens must be >= 1, got {target_tokens!r}")
        slack = max(1, round(self.tolerance * target_tokens))
        chars = max(1, round(target_tokens * self.chars_per_token()))
        best: Prompt | None = None
        for _ in range(self.max_tries):
            text = self._slice(offset, chars)
            tokens = self._count(text)
            if best is None or abs(tokens - target_tokens) < abs(best.tokens - target_tokens):
                best = Prompt(text, tokens)
            if abs(tokens - target_tokens) <= slack:
                break
            ratio = len(text) / max(1, tokens)
            self._ratio = 0.5 * (self.chars_per_token() + ratio)
            chars = max(1, round(chars * target_tokens / max(1, tokens)))
        assert best is not None
        return best

    def build(self, target_tokens: int, n: int) -> list[Prompt]:
        """``n`` prompts, each starting where no earlier prompt of this builder did."""
        prompts: list[Prompt] = []
        for _ in range(n):
            chars = round(target_tokens * self.chars_per_token())
            prompts.append(self.one(target_tokens, self._next_offset))
            # Step past this prompt so the next one starts on new text; a
            # little extra keeps starts apart even when the ratio moves.
            self._next_offset += chars + 97
        return prompts


def batches(prompts: Sequence[Prompt], size: int) -> list[list[Prompt]]:
    """Split prompts into consecutive batches of ``size`` (the last may be shorter)."""
    if size < 1:
        raise ValueError(f"batch size must be >= 1, got {size!r}")
    return [list(prompts[i : i + size]) for i in range(0, len(prompts), size)]
