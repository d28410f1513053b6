"""SpecConfig: one speculative-decoding configuration of a server.

A frozen, hashable value. Parsing (markers, ``--dflash-config``,
``--dflash-sweep``), precedence, sweeps and validation live here; rendering a
config into a command line is the job of :mod:`pytest_specdecode.config.dialects`.

Keys are ``algorithm``, ``budget``, ``topk``, ``window``, ``draft_model`` and
``steps`` (EAGLE's draft steps; defaulted by the dialect so SGLang's rules hold).
Any other key is an *extra flag* passed to the server: ``foo_bar=1`` (marker)
or ``foo-bar=1`` / ``--foo-bar=1`` (option text) becomes ``--foo-bar 1``.
Extra values are stringified; ``True`` (or an empty value in option text)
renders a bare switch ``--foo-bar``; ``None``/``False`` removes a flag set by
a lower-precedence source. Names that look like a typo of a key
(``budgte``, ``top_k``) or that spell a flag the plugin manages
(``speculative_eagle_topk``) are refused as unknown keys, so a typo never
silently becomes a server flag.
"""

from __future__ import annotations

import difflib
import itertools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_specdecode.config import render
from pytest_specdecode.errors import SpecDecodeError

if TYPE_CHECKING:
    from pytest_specdecode.config.dialects import Dialect

ALGORITHMS = ("DFLASH", "DDTREE", "EAGLE", "NONE")
KEYS = ("algorithm", "budget", "topk", "window", "draft_model", "steps")
FULL_ATTENTION = ("none", "full")

# SGLang spellings of what the plugin renders itself: passing them as extra
# flags would contradict the rendered ones.
_MANAGED = {
    "speculative_algorithm": "algorithm",
    "speculative_draft_model_path": "draft_model",
    "speculative_num_draft_tokens": "budget",
    "speculative_dflash_block_size": "budget",
    "speculative_ddtree_budget": "budget",
    "speculative_eagle_topk": "topk",
    "speculative_num_steps": "steps",
    "speculative_draft_window_size": "window",
    "speculative_dflash_draft_window_size": "window",
}
# Plausible wrong names for keys, refused with a hint rather than passed on.
_ALIASES = {
    "top_k": "topk",
    "k": "topk",
    "block_size": "budget",
    "num_draft_tokens": "budget",
    "tree_budget": "budget",
    "window_size": "window",
    "draft_window_size": "window",
    "draft_window": "window",
    "algo": "algorithm",
    "num_steps": "steps",
    "draft": "draft_model",
    "draft_model_path": "draft_model",
    "drafter": "draft_model",
}
_KEY_RE = re.compile(r"-{0,2}[A-Za-z][A-Za-z0-9_-]*")
_INT_RE = re.compile(r"[+-]?\d+")
# The knobs' names in a test id.
_SHORT_NAMES = {"budget": "b", "topk": "k", "window": "w", "steps": "s", "draft_model": "d"}


class ConfigError(SpecDecodeError, ValueError):
    """A config value is invalid; the message is one line meant for users."""


@dataclass(frozen=True)
class SpecConfig:
    """What the server must run: the drafter algorithm and its knobs.

    ``budget`` is the number of draft tokens (DFLASH block size) or the
    DDTree tree budget; ``window`` is the drafter's sliding window (``None``
    means full attention); ``extra`` holds further ``--flag value`` pairs,
    sorted, so equal configs compare and hash equal.

    ``show_draft`` is how the config is *named*, not what it is (it takes no
    part in equality): the collection sets it when the draft model differs
    from the run's default or a sweep varies it, so the label and test id of
    two configs that differ only in their drafter differ too.
    """

    algorithm: str = "DFLASH"
    budget: int | None = None
    topk: int | None = None
    window: int | None = None
    draft_model: str | None = None
    extra: tuple[tuple[str, str], ...] = ()
    steps: int | None = None
    show_draft: bool = field(default=False, compare=False, repr=False)

    def key(self) -> str:
        """The canonical key: equal for equal configs, different otherwise.

        Results, xdist groups and comparisons are keyed by it; labels are for
        people and may leave out what does not vary in a run.
        """
        return json.dumps(config_to_dict(self), sort_keys=True, separators=(",", ":"))

    def label(self) -> str:
        """Human-readable, e.g. ``DFLASH budget=8 window=2048`` (plus
        ``draft_model=...`` when :attr:`show_draft`)."""
        return " ".join(self._parts({}, "="))

    def test_id(self) -> str:
        """Compact id for test ids under a sweep, e.g. ``DFLASH-b8-w2048``
        (``DFLASH-b8-d/models/a`` when :attr:`show_draft`)."""
        return "-".join(self._parts(_SHORT_NAMES, ""))

    def _parts(self, names: Mapping[str, str], sep: str) -> list[str]:
        """The algorithm, then each knob set (the draft model when shown) and each extra
        flag as name, ``sep``, value; ``names`` shortens the knobs' names."""
        knobs = [(key, getattr(self, key)) for key in ("budget", "topk", "window", "steps")]
        if self.show_draft:
            knobs.append(("draft_model", self.draft_model))
        shown = [(names.get(k, k), v) for k, v in knobs if v is not None]
        return [self.algorithm, *(f"{k}{sep}{v}" for k, v in [*shown, *self.extra])]


class ResolvedConfig(NamedTuple):
    """A config a test runs under, and whether it belongs in the test id."""

    config: SpecConfig
    in_id: bool


# -- keys and values -------------------------------------------------------


def normalize_key(key: str) -> str:
    """Canonical name: a key from :data:`KEYS`, or an extra flag's name.

    Extra flag names are returned without leading dashes and with hyphens
    (``foo_bar`` and ``--foo-bar`` both give ``foo-bar``). Raises
    :class:`ConfigError` for malformed names, managed SGLang flags and
    near-misses of a key.
    """
    text = key.strip()
    if not _KEY_RE.fullmatch(text):
        raise ConfigError(
            f"bad key {key!r}: expected a name like 'budget' or 'mem_fraction_static'"
        )
    bare = text.lstrip("-")
    low = bare.replace("-", "_").lower()
    if low in KEYS:
        return low
    if low in _MANAGED:
        raise ConfigError(
            f"key {key!r} is the flag the plugin renders from {_MANAGED[low]!r}; "
            f"use {_MANAGED[low]}=... instead"
        )
    hint = _ALIASES.get(low) or next(
        iter(difflib.get_close_matches(low, KEYS, n=1, cutoff=0.75)), None
    )
    if hint is not None:
        raise ConfigError(
            f"unknown key {key!r} (did you mean {hint!r}?); keys: {', '.join(KEYS)}; "
            "other names pass through as server flags"
        )
    return bare.replace("_", "-")


def coerce(key: str, value: object) -> object:
    """Check and convert one value for a normalized ``key``.

    Accepts native values (markers) and text (options, ini): ``budget`` and
    ``topk`` become ``int >= 1`` or ``None`` (server default); ``window``
    becomes ``int >= 1`` or ``None`` for full attention (text ``none`` or
    ``full``); ``algorithm`` is upper-cased and checked; extra flag values
    become ``str`` (``True`` -> ``""``, a bare switch) or ``None`` (drop).
    """
    if isinstance(value, (list, tuple, set, dict)):
        raise ConfigError(f"{key}={value!r}: expected a single value here, not a collection")
    if key in ("budget", "topk", "window", "steps"):
        return _coerce_int(key, value)
    if key == "algorithm":
        text = value.strip().upper() if isinstance(value, str) else None
        if text not in ALGORITHMS:
            raise ConfigError(f"algorithm={value!r} is not one of {', '.join(ALGORITHMS)}")
        return text
    if key == "draft_model":
        if value is None:
            return None
        if not isinstance(value, str):
            raise ConfigError(f"draft_model={value!r}: expected a path or model id (a string)")
        return draft_path(key, _data(key, value.strip())) or None
    if value is None or value is False:
        return None
    if value is True:
        return ""
    if isinstance(value, (str, int, float)):
        return _data(key, str(value).strip())
    raise ConfigError(f"{key}={value!r}: extra flag values must be str, int, float or bool")


def draft_path(key: str, text: str) -> str:
    """``text``, a drafter path or model id, unless it starts with ``-``.

    It is an operand wherever it goes (after its flag on the launch line, among
    a reconfigure script's arguments), and there a leading ``-`` is an option.
    """
    refused = render.refuse_option_like(
        key, text, program="the server's launch line or your reconfigure script"
    )
    if refused is not None:
        raise ConfigError(refused)
    return text


def _data(key: str, text: str) -> str:
    """``text`` if it holds no control character (see :mod:`~pytest_specdecode.config.render`)."""
    refused = render.refuse_control(key, text)
    if refused is not None:
        raise ConfigError(refused)
    return text


def _coerce_int(key: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "none" or (key == "window" and text in FULL_ATTENTION):
            return None
        if _INT_RE.fullmatch(text):
            value = int(text)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        extra = " or none (full attention)" if key == "window" else ""
        raise ConfigError(f"{key}={value!r}: expected an integer >= 1{extra}")
    return value


def normalize(overrides: Mapping[str, object]) -> dict[str, object]:
    """Normalize keys and coerce values of one override mapping (no lists)."""
    out: dict[str, object] = {}
    for raw_key, value in overrides.items():
        key = normalize_key(raw_key)
        if key in out:
            raise ConfigError(f"key {key!r} given twice (as {raw_key!r}); give it once")
        out[key] = coerce(key, value)
    return out


def apply_overrides(base: SpecConfig, overrides: Mapping[str, object]) -> SpecConfig:
    """``base`` with the keys present in ``overrides`` replaced.

    A key that is absent keeps the base value; a key present with ``None``
    sets ``None`` (for ``window``: full attention, explicitly). Extra flags
    merge by name; ``None`` removes one.
    """
    values = normalize(overrides)
    fields: dict[str, Any] = {k: v for k, v in values.items() if k in KEYS}
    extra = dict(base.extra)
    for name, value in values.items():
        if name in KEYS:
            continue
        if value is None:
            extra.pop(name, None)
        else:
            extra[name] = str(value)
    return canonical(replace(base, **fields, extra=tuple(sorted(extra.items()))))


def canonical(config: SpecConfig) -> SpecConfig:
    """Drop knobs that mean nothing for the algorithm, so equal runs compare equal.

    ``NONE`` (no speculative decoding) keeps only extra flags: a baseline run
    under an ini default of ``budget=8`` is the same server as without it.
    """
    if config.algorithm == "NONE":
        return replace(config, budget=None, topk=None, window=None, draft_model=None, steps=None)
    return config


def base_config(
    text: str | None = None, *, draft_model: str | None = None, start: SpecConfig | None = None
) -> SpecConfig:
    """The ini-level default: built-in defaults (or ``start``, the config a live
    server runs), then ``draft_model``, then ini ``text``.

    ``text`` uses the ``--dflash-config`` syntax (ini ``dflash_config``).
    """
    base = start or SpecConfig()
    if draft_model:
        base = canonical(replace(base, draft_model=draft_model))
    if not text:
        return base
    return apply_overrides(base, parse_config_option(text, source="ini dflash_config"))


# -- option text -----------------------------------------------------------


def _parts(
    text: str, sep: str, source: str, read: Callable[[str, str], Any], twice: str
) -> dict[str, Any]:
    """Each ``KEY=VALUE`` part of ``text`` (parts split at ``sep``): ``read(key, value)`` by
    normalized key. A bad part raises :class:`ConfigError` naming ``source`` and the part;
    ``twice`` is the fix for a key given twice."""
    out: dict[str, Any] = {}
    for part in text.split(sep):
        if not part.strip():
            continue
        raw_key, eq, raw_value = part.partition("=")
        if not eq or not raw_key.strip():
            raise ConfigError(f"{source}: bad part {part.strip()!r}: expected KEY=VALUE")
        try:
            key = normalize_key(raw_key)
            if key in out:
                raise ConfigError(f"key {key!r} given twice; {twice}")
            out[key] = read(key, raw_value)
        except ConfigError as exc:
            raise ConfigError(f"{source}: bad part {part.strip()!r}: {exc}") from None
    return out


def parse_config_option(text: str, *, source: str = "--dflash-config") -> dict[str, object]:
    """Parse ``budget=8,topk=4,window=2048`` into normalized, coerced overrides.

    Integers are parsed, ``window=none`` / ``window=full`` give ``None``,
    ``algorithm`` is upper-cased; other keys are extra flags (string values,
    empty value = bare switch). Values cannot contain commas. Raises
    :class:`ConfigError` naming ``source`` and the bad part.
    """
    return _parts(text, ",", source, coerce, "give it once")


def parse_sweep_option(text: str, *, source: str = "--dflash-sweep") -> list[dict[str, object]]:
    """Parse ``budget=4,8,16;window=1024,2048`` into the cartesian product.

    Keys vary in the order written, the last fastest; values in the order
    written. Duplicate points are dropped, keeping the first.
    """
    axes = _parts(text, ";", source, _sweep_values, "list all its values once")
    if not axes:
        raise ConfigError(f"{source}: {text!r} names no key; write e.g. 'budget=4,8;window=1024'")
    return _product(axes)


def _sweep_values(key: str, text: str) -> list[object]:
    items = [v for v in text.split(",") if v.strip()]
    if not items:
        raise ConfigError("no values; write e.g. 'budget=4,8,16'")
    return list(dict.fromkeys(coerce(key, v.strip()) for v in items))


def _product(axes: Mapping[str, Sequence[object]]) -> list[dict[str, object]]:
    return [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*axes.values())]


# -- markers and precedence ------------------------------------------------


def expand_marker(kwargs: Mapping[str, object]) -> tuple[list[dict[str, object]], bool]:
    """Marker kwargs -> override points (cartesian over list/tuple values), has-lists flag.

    Keys vary in the order given, the last fastest.
    """
    axes: dict[str, list[object]] = {}
    has_lists = False
    for raw_key, value in kwargs.items():
        key = normalize_key(raw_key)
        if key in axes:
            raise ConfigError(f"key {key!r} given twice (as {raw_key!r}); give it once")
        if isinstance(value, (list, tuple)):
            if not value:
                raise ConfigError(f"{raw_key}=[]: an empty list runs nothing; give values")
            has_lists = True
            axes[key] = list(dict.fromkeys(coerce(key, v) for v in value))
        else:
            axes[key] = [coerce(key, value)]
    return _product(axes), has_lists


def merge(
    base: SpecConfig,
    *,
    marker: Mapping[str, object] | None = None,
    cli: Mapping[str, object] | None = None,
    sweep: Sequence[Mapping[str, object]] = (),
) -> list[ResolvedConfig]:
    """The configs one test runs under, in a stable order, without duplicates.

    Layers, lowest first: ``base`` (ini ``dflash_config`` + draft model over
    built-in defaults), one ``sweep`` point (``--dflash-sweep``), one marker
    combination, then ``cli`` (``--dflash-config``). So a marker beats the
    sweep and the ini, and ``--dflash-config`` beats everything *for the keys
    it names*, markers included: it is the user's explicit choice for this
    run (``--dflash-config budget=16`` re-runs marked tests at 16 without
    editing them). Keys it does not name keep the marker's values.

    ``in_id`` is true when a sweep is active or the marker has a list value:
    only then does the config belong in the test id, so the same test keeps
    the same id across runs with different ``--dflash-config`` values.
    ``cli`` and ``sweep`` naming the same key is an error (contradictory).
    All inputs are normalized here, so raw marker kwargs can be passed.
    """
    cli_values = normalize(cli or {})
    sweep_points = [normalize(p) for p in sweep]
    clash = sorted({k for p in sweep_points for k in p} & set(cli_values))
    if clash:
        raise ConfigError(
            f"--dflash-config and --dflash-sweep both set {', '.join(clash)}; drop it from one"
        )
    marker_points, has_lists = expand_marker(marker or {})
    configs = []
    for point in sweep_points or [{}]:
        for marker_point in marker_points:
            configs.append(apply_overrides(base, {**point, **marker_point, **cli_values}))
    in_id = bool(sweep_points) or has_lists
    return [ResolvedConfig(c, in_id) for c in dict.fromkeys(configs)]


# -- validation ------------------------------------------------------------


def problems(config: SpecConfig) -> list[str]:
    """Reasons ``config`` cannot run on any SGLang dialect, each one line with the fix."""
    found: list[str] = []
    if config.algorithm not in ALGORITHMS:
        found.append(f"algorithm={config.algorithm!r} is not one of {', '.join(ALGORITHMS)}")
    for key in ("budget", "topk", "window", "steps"):
        value = getattr(config, key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            found.append(f"{key}={value!r}: expected an integer >= 1")
    for name, _ in config.extra:
        try:
            normalize_key(name)
        except ConfigError as exc:
            found.append(str(exc))
    texts = [("draft_model", config.draft_model or ""), *config.extra]
    found.extend(filter(None, (render.refuse_control(k, v) for k, v in texts)))
    if found:
        return found
    algo = config.algorithm
    if algo == "DFLASH" and config.topk is not None and config.topk > 1:
        found.append(
            f"topk={config.topk!r} with DFLASH: SGLang runs DFLASH with topk=1 and only warns; "
            "use algorithm=DDTREE or drop topk"
        )
    if (
        algo == "DFLASH"
        and config.window is not None
        and config.budget is not None
        and config.window < config.budget
    ):
        found.append(
            f"window={config.window!r} < budget={config.budget!r} with DFLASH: SGLang requires "
            "the draft window >= the draft tokens; raise window or lower budget"
        )
    found.extend(_steps_problems(config))
    if algo == "EAGLE" and config.window is not None:
        found.append(
            f"window={config.window!r} with EAGLE: SGLang ignores the draft window there "
            "(only DFLASH and EAGLE3 use it); drop window"
        )
    return found


def _steps_problems(config: SpecConfig) -> list[str]:
    """SGLang's EAGLE rules: draft tokens are steps + 1 with topk 1; a tree needs a budget."""
    algo, steps, topk, budget = config.algorithm, config.steps, config.topk, config.budget
    if algo != "EAGLE":
        if steps is not None and steps != 1:
            return [
                f"steps={steps!r} with {algo}: SGLang runs {algo} with one draft step "
                "(it overrides speculative_num_steps to 1); steps is an EAGLE knob, drop it"
            ]
        return []
    if topk is not None and topk > 1 and budget is None:
        return [
            f"topk={topk!r} with EAGLE needs a budget (draft tokens): SGLang cannot pick one "
            "for a tree; add budget=..."
        ]
    if (topk or 1) == 1 and budget is not None:
        if budget < 2:
            return [
                f"budget={budget!r} with EAGLE: SGLang uses steps + 1 >= 2 draft tokens with "
                "topk 1; raise budget"
            ]
        if steps is not None and budget != steps + 1:
            return [
                f"budget={budget!r} with steps={steps!r} and topk 1: SGLang sets the draft "
                f"tokens to steps + 1 = {steps + 1} and only warns; drop one of them"
            ]
    return []


def validate(config: SpecConfig, dialect: Dialect) -> None:
    """Raise :class:`ConfigError` (first reason, one line) if ``config`` cannot run.

    Checks value ranges, algorithm combinations (see :func:`problems`), then
    what the dialect can render (:meth:`Dialect.problems`), e.g. a draft model
    that SGLang requires, DDTREE on a dialect without it, or a template
    lacking a placeholder for a set key.
    """
    found = problems(config) or dialect.problems(config)
    if found:
        raise ConfigError(found[0])


# -- JSON ------------------------------------------------------------------


def config_to_dict(config: SpecConfig) -> dict[str, object]:
    """A JSON-ready dict (for reports and xdist); inverse of :func:`config_from_dict`."""
    data: dict[str, object] = {
        "algorithm": config.algorithm,
        "budget": config.budget,
        "topk": config.topk,
        "window": config.window,
        "draft_model": config.draft_model,
        "extra": [[k, v] for k, v in config.extra],
    }
    if config.steps is not None:
        data["steps"] = config.steps
    return data


def config_from_dict(data: Mapping[str, object]) -> SpecConfig:
    """Rebuild a config from :func:`config_to_dict` output; bad data raises ConfigError."""
    unknown = sorted(set(data) - {*KEYS, "extra"})
    if unknown:
        raise ConfigError(f"config dict has unknown keys {unknown!r}")
    extra = data.get("extra", [])
    if not isinstance(extra, (list, tuple)) or not all(
        isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(s, str) for s in p)
        for p in extra
    ):
        raise ConfigError(f"config dict: extra={extra!r} is not a list of [name, value] pairs")
    fields: dict[str, Any] = {k: coerce(k, data[k]) for k in KEYS if k in data}
    return SpecConfig(**fields, extra=tuple(sorted((str(k), str(v)) for k, v in extra)))
