"""Throughput cases and the prompts they send.

A case is a load point (closed-loop concurrency, or Poisson arrivals at a
request rate) x prompt length x output tokens x prompt domain. Prompts are
cut from the pinned prompt set (:mod:`pytest_specdecode.throughput.domains`)
to a target length measured in the *server's* tokens. Every prompt of a case
starts at a different place in the domain's text, so the prefix cache cannot
serve one request from another; the same case sends the same prompts under
every config and on every machine.
"""

from __future__ import annotations

import argparse
import itertools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_specdecode.config.load_options import DEFAULT_DOMAINS, DOMAINS
from pytest_specdecode.config.spec import ConfigError
from pytest_specdecode.errors import SpecDecodeError
from pytest_specdecode.throughput import domains as prompt_set

if TYPE_CHECKING:
    from pytest_specdecode.config.settings import Settings

DEFAULT_CONTEXTS = (60, 1024, 4096)
DEFAULT_CONCURRENCY = (1, 8, 32)
DEFAULT_MAX_TOKENS = 512
DEFAULT_RATE_REQUESTS = 16


@dataclass(frozen=True, order=True)
class ThroughputCase:
    """One load point: prompt length x load x output tokens x prompt domain.

    Closed loop (``rate == 0``): ``concurrency`` requests are sent at once and
    a round waits for all of them. Open loop (``rate > 0``): a round sends
    ``requests`` requests with Poisson arrivals at ``rate`` per second, at most
    ``concurrency`` in flight (0: no limit).
    """

    context: int
    concurrency: int
    max_tokens: int = DEFAULT_MAX_TOKENS
    ignore_eos: bool = True
    domain: str = DEFAULT_DOMAINS[0]
    rate: float = 0.0
    requests: int = 0

    @property
    def open_loop(self) -> bool:
        """Whether requests arrive at a rate rather than all at once."""
        return self.rate > 0

    @property
    def load(self) -> str:
        """The load point for people and tables: ``c8`` or ``r4`` (``r4-m8`` capped)."""
        if not self.open_loop:
            return f"c{self.concurrency}"
        cap = f"-m{self.concurrency}" if self.concurrency else ""
        return f"r{self.rate:g}{cap}"

    @property
    def round_requests(self) -> int:
        """Requests per round."""
        return self.requests if self.open_loop else self.concurrency

    @property
    def id(self) -> str:
        """Test id part, e.g. ``ctx1024-c8-code`` or ``ctx1024-r8-chat``.

        ``-t128`` is added for non-default output tokens and ``-n32`` for a
        non-default number of requests per rate round.
        """
        parts = [f"ctx{self.context}", self.load]
        if self.open_loop and self.requests != DEFAULT_RATE_REQUESTS:
            parts.append(f"n{self.requests}")
        if self.max_tokens != DEFAULT_MAX_TOKENS:
            parts.append(f"t{self.max_tokens}")
        parts.append(self.domain)
        return "-".join(parts)


def make_cases(
    contexts: Iterable[int] = DEFAULT_CONTEXTS,
    concurrency: Iterable[int] = DEFAULT_CONCURRENCY,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    *,
    ignore_eos: bool = True,
    domains: Iterable[str] = DEFAULT_DOMAINS,
    rates: Iterable[float] = (),
    max_concurrency: int | None = None,
    rate_requests: int = DEFAULT_RATE_REQUESTS,
) -> list[ThroughputCase]:
    """Every context x load x domain combination, in the given order (domain fastest).

    Loads are the concurrency levels, then the request rates.
    """
    loads = [(c, 0.0, 0) for c in concurrency]
    loads += [(max_concurrency or 0, float(r), rate_requests) for r in rates]
    return [
        ThroughputCase(ctx, conc, max_tokens, ignore_eos, domain, rate, requests)
        for ctx, (conc, rate, requests), domain in itertools.product(
            tuple(contexts), loads, tuple(domains)
        )
    ]


CASE_KEYS = ("contexts", "concurrency", "output_tokens", "domains", "request_rates")


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
    names = _names(kwargs.get("domains", s.domains))
    rates = _rates(kwargs.get("request_rates", s.request_rates))
    return make_cases(
        contexts,
        concurrency,
        tokens[0],
        domains=names,
        rates=rates,
        max_concurrency=s.max_concurrency,
        rate_requests=s.rate_requests,
    )


def _ints(value: Any, name: str) -> tuple[int, ...]:
    values = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    if not values:
        raise ConfigError(f"{name}=[]: give at least one value")
    for item in values:
        if isinstance(item, bool) or not isinstance(item, int) or item < 1:
            raise ConfigError(f"{name}={value!r}: expected integers >= 1")
    return values


def _names(value: Any) -> tuple[str, ...]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, (list, tuple)) or not values:
        raise ConfigError(f"domains={value!r}: give domain names, e.g. ['code', 'math']")
    for item in values:
        if item not in DOMAINS:
            raise ConfigError(f"domains={value!r}: unknown {item!r}; choose from {DOMAINS}")
    return tuple(dict.fromkeys(values))


def _rates(value: Any) -> tuple[float, ...]:
    values = value if isinstance(value, (list, tuple)) else [value]
    for item in values:
        if isinstance(item, bool) or not isinstance(item, (int, float)) or not item > 0:
            raise ConfigError(f"request_rates={value!r}: expected request rates > 0")
    return tuple(float(v) for v in values)


_CASE_ID = re.compile(
    r"ctx(?P<context>\d+)-(?:c(?P<concurrency>\d+)|r(?P<rate>\d+(?:\.\d+)?)(?:-m(?P<cap>\d+))?)"
    r"(?:-n(?P<requests>\d+))?(?:-t(?P<tokens>\d+))?-(?P<domain>[a-z]+)"
)


def parse_case_id(text: str) -> ThroughputCase:
    """Inverse of :attr:`ThroughputCase.id` (``ctx1024-c8-code``, ``ctx60-r4-t128-chat``)."""
    match = _CASE_ID.fullmatch(text)
    if match is None or match["domain"] not in DOMAINS or (match["requests"] and not match["rate"]):
        raise argparse.ArgumentTypeError(
            f"invalid throughput case {text!r}: expected e.g. 'ctx1024-c8-code', "
            "'ctx60-c1-t128-chat' or 'ctx1024-r8-math'"
        )
    context, tokens = int(match["context"]), int(match["tokens"] or DEFAULT_MAX_TOKENS)
    if not match["rate"]:
        return ThroughputCase(context, int(match["concurrency"]), tokens, True, match["domain"])
    requests = int(match["requests"] or DEFAULT_RATE_REQUESTS)
    cap, rate = int(match["cap"] or 0), float(match["rate"])
    return ThroughputCase(context, cap, tokens, True, match["domain"], rate, requests)


SAMPLE_CHARS = 8000
"""The most characters of the corpus counted to learn its chars-per-token ratio."""

WINDOW_MARGIN = 2
"""Tokens of the server's context a request leaves unused: SGLang refuses a prompt plus
its output tokens that reach one less than its context length."""


def context_window(server_info: Mapping[str, Any]) -> int | None:
    """The server's context length in tokens, from its ``/server_info``: ``context_length``
    when it was given, else ``max_req_input_len`` + 1 (what SGLang's scheduler reports of
    its model's resolved length); None when it shows neither as a positive integer."""
    for key, extra in (("context_length", 0), ("max_req_input_len", 1)):
        value = server_info.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value + extra
    return None


def prompt_room(window: int | None, max_tokens: int) -> int | None:
    """The most prompt tokens a request asking ``max_tokens`` can send within ``window``
    (None: no window known, no limit)."""
    return None if window is None else window - max_tokens - WINDOW_MARGIN


def fit_error(case: ThroughputCase, window: int | None) -> str | None:
    """One line when ``case`` cannot fit the server's context, else None."""
    room = prompt_room(window, case.max_tokens)
    if room is None or case.context <= room:
        return None
    return (
        f"{case.id}: a prompt of {case.context} tokens and {case.max_tokens} output tokens do "
        f"not fit the server's context length of {window} tokens (its /server_info); give "
        f"--dflash-contexts at most {max(room, 0)} or fewer output tokens"
    )


class PromptTooLong(SpecDecodeError, ValueError):
    """No prompt of the corpus fits within the builder's ``max_prompt`` tokens."""


@dataclass(frozen=True)
class Prompt:
    """A prompt and its length in the server's tokens."""

    text: str
    tokens: int


class PromptBuilder:
    """Cuts slices of a domain's text to a token length using the server's counts.

    A prompt is the domain's prefix, a slice of its corpus and its suffix;
    the slice grows or shrinks until the whole prompt has the target length.
    The chars-per-token ratio is learnt once and refined as prompts are
    measured, so most prompts cost one count request. ``corpus`` replaces the
    domain's text (tests); then there is no prefix or suffix.

    ``max_prompt`` is the most tokens the server takes in a prompt (see
    :func:`prompt_room`): no text longer than it is ever sent to be counted (the
    server refuses it) and no prompt longer than it is returned. Every length is
    the server's own count: its tokenizer, not a guess of characters per token.
    """

    def __init__(
        self,
        count_tokens: Callable[[str], int],
        corpus: str | None = None,
        *,
        domain: str = DEFAULT_DOMAINS[0],
        tolerance: float = 0.02,
        max_tries: int = 5,
        max_prompt: int | None = None,
    ) -> None:
        self._count = count_tokens
        self.max_prompt = max_prompt
        self.domain = domain
        if corpus is None:
            found = prompt_set.load(domain)
            corpus, self.prefix, self.suffix = found.corpus, found.prefix, found.suffix
        else:
            self.prefix = self.suffix = ""
        if not corpus:
            raise ValueError("the corpus to cut prompts from is empty")
        self.corpus = corpus
        self.tolerance = tolerance
        self.max_tries = max_tries
        self._ratio: float | None = None

    def chars_per_token(self) -> float:
        """The current chars-per-token estimate, measured on first use."""
        if self._ratio is None:
            # A token is at least a character of this text (plus the few special tokens
            # a server adds), so half the prompt room in characters always fits.
            chars = SAMPLE_CHARS if self.max_prompt is None else self.max_prompt // 2
            sample = self.corpus[: max(1, min(SAMPLE_CHARS, chars))]
            self._ratio = len(sample) / max(1, self._count(sample))
        return self._ratio

    def _cap(self, chars: int, ratio: float) -> int:
        """``chars`` cut to what the ratio says stays within ``max_prompt`` (with room for
        the slice reading denser than the sample)."""
        if self.max_prompt is None:
            return chars
        return max(1, min(chars, int(0.9 * self.max_prompt * ratio)))

    def _slice(self, offset: int, chars: int) -> str:
        corpus = self.corpus
        start = offset % len(corpus)
        text = corpus[start : start + chars]
        while len(text) < chars:  # wrap around a short corpus
            text += "\n" + corpus[: chars - len(text) - 1]
        return text

    def one(self, target_tokens: int, offset: int) -> Prompt:
        """A prompt of about ``target_tokens`` tokens whose body starts at corpus ``offset``."""
        if target_tokens < 1:
            raise ValueError(f"target_tokens must be >= 1, got {target_tokens!r}")
        limit = self.max_prompt
        if limit is not None and target_tokens > limit:
            raise PromptTooLong(
                f"a {target_tokens}-token prompt is longer than the {limit} tokens the server takes"
            )
        slack = max(1, round(self.tolerance * target_tokens))
        wrapper = len(self.prefix) + len(self.suffix)
        ratio = self.chars_per_token()
        chars = self._cap(max(1, round(target_tokens * ratio) - wrapper), ratio)
        best: Prompt | None = None
        for _ in range(self.max_tries):
            text = f"{self.prefix}{self._slice(offset, chars)}{self.suffix}"
            tokens = self._count(text)
            fits = limit is None or tokens <= limit
            if fits and (
                best is None or abs(tokens - target_tokens) < abs(best.tokens - target_tokens)
            ):
                best = Prompt(text, tokens)
            if fits and abs(tokens - target_tokens) <= slack:
                break
            ratio = len(text) / max(1, tokens)
            self._ratio = 0.5 * (self.chars_per_token() + ratio)
            body_tokens = max(1, tokens - round(wrapper / max(ratio, 1e-9)))
            wanted = target_tokens - (tokens - body_tokens)
            new_chars = self._cap(max(1, round(chars * wanted / body_tokens)), ratio)
            if new_chars == chars:
                break
            chars = new_chars
        if best is None:
            raise PromptTooLong(
                f"no cut of the {self.domain} prompt text near {target_tokens} tokens came "
                f"within the {limit} tokens the server takes"
            )
        return best

    def starts(self, n: int) -> list[int]:
        """``n`` different corpus offsets spread over the whole text.

        Line starts where the text has enough lines (code keeps whole lines),
        else word starts; past that, character offsets.
        """
        corpus = self.corpus
        lines = [0] + [m.end() for m in re.finditer(r"\n+", corpus) if m.end() < len(corpus)]
        words = [0] + [m.end() for m in re.finditer(r"\s+", corpus) if m.end() < len(corpus)]
        for candidates in (lines, words, list(range(len(corpus)))):
            if len(candidates) >= n:
                return [candidates[(j * len(candidates)) // n] for j in range(n)]
        return [j % len(corpus) for j in range(n)]

    def build(self, target_tokens: int, n: int) -> list[Prompt]:
        """``n`` prompts, each starting at a different place of the corpus."""
        return [self.one(target_tokens, start) for start in self.starts(n)]
