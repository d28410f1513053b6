"""Secrets out of everything the plugin writes or shows.

A :class:`Redactor` masks, in any text:

- the secrets it was given (the configured API key) and those it learned
  from launch lines, wherever they appear, and also fragments of them of
  :data:`FRAGMENT` characters or more, because pytest shortens long values in
  the middle (``'Bearer sk-PLAN...'``);
- the value of every option whose kind is a secret: SGLang's secret options,
  which the facts name by a rule (:mod:`pytest_specdecode.facts.secrets`:
  ``--api-key``, ``--admin-api-key``, ``--ssl-keyfile-password``), their
  abbreviations, and any ``--*-api-key``; as ``--api-key X``, ``--api-key=X`` or
  ``'--api-key', 'X'``;
- ``api_key=...`` / ``ssl_keyfile_password: '...'`` (SGLang's ``server_args=``
  log line, reprs, JSON, environment variables);
- ``Authorization`` headers and ``Bearer`` / ``Basic`` credentials.

Unquoted values that read as a short lower-case word ("--dflash-api-key or
DFLASH_API_KEY", "Bearer token") are prose, not a credential, and stay.

The plugin applies it at the sinks, so nothing new can bypass it: test
reports (terminal, JUnit XML, xdist), the JSON report and what is made from
it (Markdown, plots, terminal summary), pytest-benchmark's JSON, the
progress line, the readiness gate's log tail, header and summary lines.
"""

from __future__ import annotations

import os
import re
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, TypeVar

import pytest

from pytest_specdecode import facts

T = TypeVar("T")

MASK = "***"
# Secrets shorter than this are masked only where their context shows them
# (a flag, api_key=, a header): masking "abc" everywhere would garble the output.
MIN_SECRET = 4
# A shortened repr may keep any part of a key: mask every run this long.
FRAGMENT = 8

_QUOTED = r"'[^'\n]*'|\"[^\"\n]*\""
_BARE = r"[^\s'\",;)\]}]+"
_PROSE = re.compile(r"[a-z]{1,5}")
_NOT_SECRET = {"None", "null", "none", "True", "False", "''", '""', MASK}

# Any ``--*-api-key`` (the plugin's own --dflash-api-key, a wrapper's): secret by its name.
_API_KEY = r"(?:[A-Za-z0-9]+[_-])*api[_-]?key"
_OPTION = r"--[A-Za-z0-9][A-Za-z0-9_-]*"


@cache
def _secret_options() -> tuple[facts.Option, ...]:
    """Every option of every known SGLang table whose value is a secret (by the facts'
    rule, :mod:`pytest_specdecode.facts.secrets`)."""
    found: dict[tuple[str, ...], facts.Option] = {}
    for version in facts.VERSIONS:
        for build in facts.BUILDS:
            for option in facts.load(version, build).secret_options():
                found.setdefault(option.flags, option)
    return tuple(found.values())


def secret_flags() -> frozenset[str]:
    """The spellings of SGLang's secret options (``--api-key``, ``--ssl-keyfile-password``)."""
    return frozenset(f for o in _secret_options() for f in o.flags)


@cache
def _name() -> str:
    """A regex of every secret's name as it appears in a text: the dests and flags of the
    secret options (``ssl_keyfile_password``, ``ssl-keyfile-password``) and any *api-key."""
    names = {o.dest for o in _secret_options()} | {f.lstrip("-") for f in secret_flags()}
    spelled = {r"[_-]".join(map(re.escape, re.split(r"[_-]", n))) for n in names}
    return "(?:" + "|".join([*sorted(spelled, key=len, reverse=True), _API_KEY]) + ")"


@dataclass(frozen=True)
class _Patterns:
    flag: re.Pattern[str]
    flag_list: re.Pattern[str]
    assign_quoted: re.Pattern[str]
    assign_bare: re.Pattern[str]


@cache
def _patterns() -> _Patterns:
    name = _name()
    return _Patterns(
        # Any option: whether it is a secret's (abbreviations included) is is_secret_flag's call.
        # A word after a space that starts with -- is the next option, not this one's value.
        flag=re.compile(
            rf"(?P<pre>(?P<flag>{_OPTION})(?:=|[ \t]+(?!--)))(?P<val>{_QUOTED}|{_BARE})"
        ),
        flag_list=re.compile(
            rf"(?P<pre>(?P<q>['\"])(?P<flag>{_OPTION})(?P=q),\s*)(?P<val>{_QUOTED})"
        ),
        assign_quoted=re.compile(
            rf"(?P<pre>\b{name}['\"]?\s*[=:]\s*)(?P<val>{_QUOTED})", re.IGNORECASE
        ),
        assign_bare=re.compile(rf"(?P<pre>\b{name}=)(?P<val>{_BARE})", re.IGNORECASE),
    )


_AUTH = re.compile(
    rf"(?P<pre>\b(?:proxy-)?authorization['\"]?\s*[:=]\s*)(?P<val>{_QUOTED}|[^\n\r,;}}'\"]+)",
    re.IGNORECASE,
)
_SCHEME = re.compile(rf"(?P<pre>\b(?:bearer|basic|token)[ \t]+)(?P<val>{_BARE})", re.IGNORECASE)
# Every contextual pattern needs one of these words: texts without any skip them
# ("pass" and "cred" also catch an abbreviated --ssl-keyfile-pass).
_TRIGGERS = ("api", "authorization", "bearer", "basic", "token", "pass", "secret", "cred")
_SCHEME_PREFIX = re.compile(r"(?:bearer|basic|token|digest)[ \t]+", re.IGNORECASE)
_API_KEY_FLAG = re.compile(rf"--{_API_KEY}", re.IGNORECASE)


@lru_cache(maxsize=4096)
def is_secret_flag(word: str) -> bool:
    """Whether ``word`` is a flag whose value is a secret: one of SGLang's secret options
    (the facts say which: ``--api-key``, ``--admin-api-key``, ``--ssl-keyfile-password``),
    an abbreviation argparse would take for one (``--ssl-keyfile-pass``), or any
    ``--*-api-key``."""
    if _API_KEY_FLAG.fullmatch(word) is not None or word in secret_flags():
        return True
    if not word.startswith("--") or len(word) < 3:
        return False
    # argparse's prefix matching: an abbreviation of secret options only is one of them.
    table = facts.load()
    matches = table.prefix_matches(word)
    return bool(matches) and all(o is not None and o.secret for o in map(table.option, matches))


# A reference to a variable (``${SPECDECODE_API_KEY}`` in a systemd drop-in), not its value.
_ENV_REF = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")


def _is_value(value: str) -> bool:
    """Whether an unquoted match is a credential rather than a word of prose."""
    return (
        value not in _NOT_SECRET and not _PROSE.fullmatch(value) and not _ENV_REF.fullmatch(value)
    )


def _mask_value(value: str) -> str:
    """``'x'`` -> ``'***'``, ``"Bearer x"`` -> ``"Bearer ***"``, ``x`` -> ``***``."""
    quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[:1] else ""
    inner = value[1:-1] if quote else value
    scheme = _SCHEME_PREFIX.match(inner)
    prefix = scheme.group(0) if scheme else ""
    return f"{quote}{prefix}{MASK}{quote}"


def _names_a_secret(match: re.Match[str]) -> bool:
    """Whether a match's option (if its pattern has one) is a secret's."""
    return "flag" not in match.re.groupindex or is_secret_flag(match["flag"])


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] in ("'", '"') and value[-1] == value[0]:
        return value[1:-1]
    return value


class Redactor:
    """Masks secrets in text and in JSON-like values; see the module docstring."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets: set[str] = set()
        self._pieces: list[str] = []
        self._literals: re.Pattern[str] | None = None
        self.add(*secrets)

    @property
    def secrets(self) -> frozenset[str]:
        """The literal secrets masked wherever they appear."""
        return frozenset(self._secrets)

    def add(self, *secrets: str | None) -> None:
        """Mask these values from now on (None, masks and too-short values are ignored)."""
        new = {s for s in secrets if s and len(s) >= MIN_SECRET and s != MASK} - self._secrets
        if not new:
            return
        self._secrets |= new
        pieces: set[str] = set()
        for secret in self._secrets:
            for form in {secret, repr(secret)[1:-1]}:
                if len(form) <= FRAGMENT:
                    pieces.add(form)
                else:
                    pieces.update(form[i : i + FRAGMENT] for i in range(len(form) - FRAGMENT + 1))
        self._pieces = sorted(pieces, key=len, reverse=True)
        alternatives = "|".join(re.escape(p) for p in self._pieces)
        # A lookahead finds overlapping fragments; their spans are merged below.
        self._literals = re.compile(f"(?=({alternatives}))")

    def learn(self, text: str | None) -> None:
        """Add the values of secret options (:func:`is_secret_flag`) and of ``api_key=``,
        ``ssl_keyfile_password: '...'`` found in ``text`` (a launch line, a log line, JSON)."""
        if not text:
            return
        p = _patterns()
        for pattern in (p.flag, p.flag_list, p.assign_quoted, p.assign_bare):
            for match in pattern.finditer(text):
                # A launch line is a command, not prose: every value counts.
                value = _unquote(match.group("val"))
                if _names_a_secret(match) and value not in _NOT_SECRET:
                    self.add(value)

    def text(self, text: str) -> str:
        """``text`` with every secret masked."""
        if not text:
            return text
        text = self._mask_literals(text)
        lowered = text.lower()
        if any(word in lowered for word in _TRIGGERS):
            p = _patterns()
            for pattern in (p.flag_list, p.flag, p.assign_quoted, p.assign_bare, _AUTH, _SCHEME):
                text = pattern.sub(self._replace, text)
        return text

    __call__ = text

    def lines(self, lines: Iterable[str]) -> list[str]:
        """Each line masked."""
        return [self.text(line) for line in lines]

    def value(self, value: T) -> T:
        """A copy of a JSON-like value (dicts, lists, tuples, strings) with strings masked."""
        return self._value(value)  # type: ignore[no-any-return]

    def value_in_place(self, data: dict[str, Any]) -> None:
        """Mask the strings of ``data`` where it is (for hooks handed a dict to update)."""
        for key, item in list(data.items()):
            clean_key = self.text(key) if isinstance(key, str) else key
            clean = self._value(item)
            if clean_key != key:
                del data[key]
            data[clean_key] = clean

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self._value(k): self._value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._value(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self._value(v) for v in value)
        return value

    def _replace(self, match: re.Match[str]) -> str:
        value = match.group("val")
        if not _names_a_secret(match):
            return match.group(0)
        if value.startswith(("'", '"')) or _is_value(value):
            return match.group("pre") + _mask_value(value)
        return match.group(0)

    def _mask_literals(self, text: str) -> str:
        # Every secret in one pass (one alternation, longest first, overlapping spans
        # merged), so two secrets sharing a piece are both masked whole. Again while a
        # pass changed something: a mask next to what is left can spell a piece anew
        # (a secret with '*' in it); each pass shortens the text, so this ends.
        while True:
            masked = self._mask_once(text)
            if masked == text:
                return text
            text = masked

    def _mask_once(self, text: str) -> str:
        # Plain substring tests are much faster than the regex; most texts have none.
        if self._literals is None or not any(p in text for p in self._pieces):
            return text
        spans: list[list[int]] = []
        for match in self._literals.finditer(text):
            start, end = match.start(), match.start() + len(match.group(1))
            if spans and start <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], end)
            else:
                spans.append([start, end])
        if not spans:
            return text
        out, last = [], 0
        for start, end in spans:
            out += [text[last:start], MASK]
            last = end
        out.append(text[last:])
        return "".join(out)


_SETTINGS_TEXTS = (
    "launch",
    "restart_cmd",
    "logs_cmd",
    "args_template",
    "env_template",
    "config_override",
    "base_config",
    "sweep",
)


def for_settings(settings: object, environ: Mapping[str, str] | None = None) -> Redactor:
    """The run's redactor: the configured API key (``--dflash-api-key`` and
    ``DFLASH_API_KEY``) and every API key on the launch lines and templates."""
    environ = os.environ if environ is None else environ
    redactor = Redactor([getattr(settings, "api_key", None), environ.get("DFLASH_API_KEY")])
    for name in _SETTINGS_TEXTS:
        text = getattr(settings, name, None)
        if isinstance(text, str):
            redactor.learn(text)
    return redactor


_OPTION_TEXTS = (
    "dflash_launch",
    "dflash_restart_cmd",
    "dflash_logs_cmd",
    "dflash_args",
    "dflash_env",
    "dflash_config",
    "dflash_sweep",
)


def for_options(config: Any, environ: Mapping[str, str] | None = None) -> Redactor:
    """A redactor for a usage error, before the settings exist: the key and the
    launch lines as given on the command line and in the ini file."""
    environ = os.environ if environ is None else environ

    def read(getter: Any, name: str) -> str | None:
        try:
            value = getter(name)
        except (ValueError, KeyError, AttributeError):
            return None
        return value if isinstance(value, str) else None

    redactor = Redactor([read(config.getoption, "dflash_api_key"), environ.get("DFLASH_API_KEY")])
    for name in _OPTION_TEXTS:
        redactor.learn(read(config.getoption, name))
        redactor.learn(read(config.getini, name))
    return redactor


# -- pytest reports -------------------------------------------------------------


def scrub_report(report: Any, redactor: Redactor) -> None:
    """Mask secrets in a test or collection report: longrepr, sections, user properties.

    A traceback keeps its structure (colours, the crash line in the short
    summary) where masking its text in place suffices; otherwise, or if its
    rendering still shows a secret, it is replaced by its masked text.
    """
    report.longrepr = _scrub_longrepr(report.longrepr, redactor)
    sections = getattr(report, "sections", None)
    if sections:
        report.sections = [(redactor(title), redactor(body)) for title, body in sections]
    properties = getattr(report, "user_properties", None)
    if properties:
        report.user_properties = [redactor.value(tuple(p)) for p in properties]


class ReportScrubber:
    """The plugin that masks every test and collection report with one redactor:
    the session's, or before it starts the secrets a dormant run knows
    (``DFLASH_API_KEY`` in the environment), used or not.

    Masked where the report is made, as the outermost wrapper (after every other
    plugin changed it): the terminal, JUnit XML, xdist and every other plugin only
    ever see the masked report.
    """

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        scrub_report(report, self.redactor)
        return report

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_make_collect_report(
        self,
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        report = yield
        scrub_report(report, self.redactor)
        return report


def _scrub_longrepr(longrepr: Any, redactor: Redactor) -> Any:
    if longrepr is None:
        return None
    if isinstance(longrepr, str):
        return redactor(longrepr)
    if isinstance(longrepr, tuple):
        return redactor.value(longrepr)
    text = str(longrepr)
    clean = redactor(text)
    if clean == text:
        return longrepr
    try:
        _scrub_member(longrepr, redactor, set())
        if redactor(str(longrepr)) == str(longrepr):
            return longrepr
    except Exception:  # an unexpected shape: the masked text is always right
        pass
    return clean


def _scrub_member(value: Any, redactor: Redactor, seen: set[int]) -> Any:
    """``value`` masked: a new string or tuple, lists, dicts and objects in place."""
    if isinstance(value, str):
        clean = redactor(value)
        return value if clean == value else clean
    if isinstance(value, list):
        value[:] = [_scrub_member(v, redactor, seen) for v in value]
        return value
    if isinstance(value, tuple):
        items = tuple(_scrub_member(v, redactor, seen) for v in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        for key, item in list(value.items()):
            value[key] = _scrub_member(item, redactor, seen)
        return value
    if hasattr(value, "__dict__") and not isinstance(value, type) and id(value) not in seen:
        seen.add(id(value))
        for name, member in list(vars(value).items()):
            clean = _scrub_member(member, redactor, seen)
            if clean is not member:
                setattr(value, name, clean)
    return value
