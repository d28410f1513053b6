"""Dialects: how one server build spells a config, and how to check it runs it.

A :class:`Dialect` renders a :class:`~pytest_specdecode.config.spec.SpecConfig`
into flags appended to the base launch command plus environment variables,
and verifies a running server's ``/server_info`` against the config: by its
flat fields where the dialect knows them, otherwise by finding the rendered
flags in ``launch_command``. Whatever can be checked neither way is listed
as unverified, never assumed.

Built-ins: ``sglang`` (0.5.23 spellings), ``sglang-legacy`` (older builds,
``--speculative-dflash-draft-window-size``), ``ddtree`` (DDTree PR builds:
``--speculative-ddtree-budget``, topk through ``SGLANG_DDTREE_MAX_TOPK``) and
``template`` (the user's ini ``dflash_args`` / ``dflash_env``).

Each built-in knows the option table of the SGLang it targets
(:mod:`pytest_specdecode.facts`, chosen by ``--dflash-sglang-version``):
rendered flags that SGLang would refuse are a config problem, reported at
collection (:mod:`pytest_specdecode.config.flagcheck`). ``sglang-legacy`` and
``ddtree`` target builds without a published wheel: they check the release
table plus their known differences. Templates are not checked.
"""

from __future__ import annotations

import re
import shlex
import string
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from pytest_specdecode import facts
from pytest_specdecode.config import render, script_template
from pytest_specdecode.config.flagcheck import field_value, flag_problems
from pytest_specdecode.config.live import read_live_config
from pytest_specdecode.config.spec import ConfigError, SpecConfig

PLACEHOLDERS = ("budget", "topk", "window", "algorithm", "draft_model", "steps")
SCRIPT_PLACEHOLDERS = (*PLACEHOLDERS, "extra")
DDTREE_TOPK_ENV = "SGLANG_DDTREE_MAX_TOPK"
# What systemd's Environment= and a POSIX shell accept as a variable name.
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Rendered:
    """Flags to append to the base launch command, and environment to set."""

    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Verification:
    """The outcome of checking a live server against a config.

    ``mismatches``: one line each, naming the field, actual and expected
    value; any mismatch means the server does not run the config.
    ``unverified``: what could not be checked, with why. ``checked``: what
    matched, for progress output and reports.
    """

    mismatches: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing contradicts the config (unverified items allowed)."""
        return not self.mismatches


class Dialect(ABC):
    """Flag spelling and verification rules of one server build."""

    name: str

    @abstractmethod
    def render(self, config: SpecConfig) -> Rendered:
        """Flags and environment that make the server run ``config``."""

    @abstractmethod
    def verify(self, config: SpecConfig, server_info: Mapping[str, Any]) -> Verification:
        """Check a server's ``/server_info`` answer against ``config``."""

    def problems(self, config: SpecConfig) -> list[str]:
        """Reasons this dialect cannot run ``config`` (one line each, with the fix)."""
        return []

    def live_config(self, server_info: Mapping[str, Any]) -> SpecConfig | None:
        """The config a server answering ``server_info`` runs (one :meth:`verify` passes
        for that answer), or None when this dialect cannot read it back."""
        return None

    def __repr__(self) -> str:
        return f"<dialect {self.name}>"


# -- checking -----------------------------------------------------------------


@dataclass(frozen=True)
class _Expect:
    """One thing a config asks of the server, and the evidence for it.

    ``fields`` are /server_info keys reporting it (first present wins) that
    must equal one of ``accept``; ``flag``/``value`` is its command-line form
    (``value`` None: the flag must be absent; ``""``: a bare switch);
    ``env`` names the variable carrying ``value`` instead of a flag.
    """

    key: str
    fields: tuple[str, ...] = ()
    accept: tuple[object, ...] = ()
    flag: str | None = None
    value: str | None = None
    env: str | None = None


def _is_flag(token: str) -> bool:
    return len(token) > 1 and token[0] == "-" and not token[1].isdigit() and token[1] != "."


def _launch_tokens(launch_command: object) -> list[str] | None:
    if isinstance(launch_command, (list, tuple)):
        return [str(t) for t in launch_command]
    if not isinstance(launch_command, str) or not launch_command.strip():
        return None
    try:
        return shlex.split(launch_command)
    except ValueError:
        # SGLang joins argv with spaces, unquoted: a stray quote must not hide the rest.
        return launch_command.split()


def _last_flag(tokens: Sequence[str], flag: str) -> str | None:
    """Value of the last occurrence of ``flag`` (argparse: last wins); ``""`` if bare."""
    found: str | None = None
    for i, token in enumerate(tokens):
        if token == flag:
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            found = nxt if nxt is not None and not _is_flag(nxt) else ""
        elif token.startswith(flag + "="):
            found = token[len(flag) + 1 :]
    return found


def _same(actual: object, expected: object) -> bool | None:
    """Loose equality of a /server_info value and an expected one; None if incomparable."""
    if expected is None or actual is None:
        return actual is None and expected is None
    if isinstance(actual, (list, dict)):
        return None
    if isinstance(expected, bool):
        return actual is expected
    if isinstance(actual, bool):
        return str(expected).lower() == str(actual).lower()
    if isinstance(expected, int) or isinstance(actual, (int, float)):
        # 0.8 reported for "0.8" given, 8 for "8": compare as numbers.
        try:
            return float(str(actual)) == float(str(expected))
        except ValueError:
            return False
    return str(actual) == str(expected)


def _describe(value: object, key: str) -> str:
    if value is None and key == "window":
        return "None (full attention)"
    return repr(value)


def _check(expects: Sequence[_Expect], server_info: Mapping[str, Any]) -> Verification:
    result = Verification()
    tokens = _launch_tokens(server_info.get("launch_command"))
    for e in expects:
        name = next((f for f in e.fields if f in server_info), None)
        if name is not None and e.accept:
            actual = server_info[name]
            verdicts = [_same(actual, a) for a in e.accept]
            if any(verdicts):
                result.checked.append(f"{name}={actual!r}")
                continue
            if None not in verdicts:
                result.mismatches.append(
                    f"{name} is {actual!r}, expected {_describe(e.accept[0], e.key)}"
                )
                continue
        if e.env is not None:
            result.unverified.append(
                f"{e.key} (passed via {e.env}={e.value}) is not reported by /server_info"
            )
        elif e.flag is not None and tokens is not None:
            _check_flag(e, tokens, result)
        elif e.flag is not None:
            wanted = "absent" if e.value is None else f"{e.flag} {e.value}".strip()
            result.unverified.append(
                f"{e.key} ({wanted}): /server_info has neither "
                f"{' nor '.join(e.fields) or 'a field for it'} nor launch_command"
            )
    return result


def _check_flag(e: _Expect, tokens: Sequence[str], result: Verification) -> None:
    assert e.flag is not None
    actual = _last_flag(tokens, e.flag)
    if e.value is None:
        if actual is None:
            result.checked.append(f"launch_command has no {e.flag}")
        else:
            shown = f"{e.flag} {actual}".rstrip()
            result.mismatches.append(
                f"launch_command has {shown}, expected no {e.flag} "
                f"since {e.key} is {_describe(None, e.key)}"
            )
    elif actual is None:
        result.mismatches.append(f"launch_command lacks {e.flag} {e.value}".rstrip())
    elif e.value == "" or actual == e.value:
        result.checked.append(f"launch_command has {e.flag} {e.value}".rstrip())
    else:
        result.mismatches.append(f"launch_command has {e.flag} {actual!r}, expected {e.value!r}")


def _emit(expects: Sequence[_Expect]) -> Rendered:
    argv: list[str] = []
    env: dict[str, str] = {}
    for e in expects:
        if e.value is None:
            continue
        if e.env is not None:
            env[e.env] = e.value
        elif e.flag is not None:
            argv.append(e.flag)
            if e.value != "":
                argv.append(e.value)
    return Rendered(tuple(argv), env)


def _extra_expects(config: SpecConfig, table: facts.OptionTable | None) -> list[_Expect]:
    out = []
    for name, value in config.extra:
        accept: tuple[object, ...] = (True,) if value == "" else (value,)
        dest: tuple[str, ...] = (name.replace("-", "_"),)
        stored = field_value(table, _words(name, value)) if table is not None else None
        if stored is not None and table is not None:
            # The field SGLang stores it in (aliases, --no- forms, 32k -> 32000).
            field_name, parsed = stored
            dest = (field_name,) if field_name in table.fields else ()
            accept = (parsed,)
        out.append(_Expect(name, dest, accept, flag=f"--{name}", value=value))
    return out


def _words(name: str, value: str) -> list[str]:
    return [f"--{name}", value] if value else [f"--{name}"]


def _extra_words(config: SpecConfig) -> list[str]:
    return [w for n, v in config.extra for w in _words(n, v)]


# -- SGLang family ------------------------------------------------------------


def _flag(key: str, field: str, value: object) -> _Expect:
    """A value passed as ``--field-name value`` and reported as ``/server_info[field]``."""
    return _Expect(key, (field,), (value,), "--" + field.replace("_", "-"), str(value))


@dataclass(eq=False, repr=False)
class SGLangDialect(Dialect):
    """SGLang's own flags; ``/server_info`` reports them as flat fields."""

    name: str
    _: KW_ONLY
    window_flag: str = "--speculative-draft-window-size"
    window_fields: tuple[str, ...] = ("speculative_draft_window_size",)
    ddtree: bool = False
    table: facts.OptionTable | None = None
    simulator: bool = False

    def problems(self, config: SpecConfig) -> list[str]:
        if config.algorithm == "DDTREE" and not self.ddtree:
            return [
                f"algorithm=DDTREE is not in released SGLang (dialect {self.name!r}); "
                "use --dflash-dialect ddtree for a DDTree build, or a template"
            ]
        if config.algorithm in ("DFLASH", "DDTREE") and not config.draft_model:
            return [
                f"algorithm={config.algorithm} needs a draft model and none is set: SGLang "
                "refuses to start without --speculative-draft-model-path; set draft_model=... "
                "in the marker or --dflash-draft-model / ini dflash_draft_model "
                f"(dialect {self.name!r})"
            ]
        if self.table is None:
            return []
        argv = self.render(config).argv
        if self.simulator:  # the bundled simulator also takes its own --sim-* flags
            argv = _without_sim_flags(argv)
        return flag_problems(self.table, argv, dialect=self.name)

    def _eagle(self, config: SpecConfig) -> list[_Expect]:
        """EAGLE's knobs, with the steps SGLang's rules need.

        SGLang asserts when topk or draft tokens come without
        ``--speculative-num-steps``, fails on steps without topk, and sets the
        draft tokens to steps + 1 when topk is 1: so steps default to
        budget - 1 (3, SGLang's own choice, without a budget) and topk to 1.
        """
        steps, topk, budget = config.steps, config.topk, config.budget
        if steps is None and (budget is not None or topk is not None):
            steps = budget - 1 if budget is not None and budget > 1 else 3
        if steps is not None and topk is None:
            topk = 1
        out = []
        if steps is not None:
            out.append(_flag("steps", "speculative_num_steps", steps))
        if topk is not None:
            out.append(_flag("topk", "speculative_eagle_topk", topk))
        if budget is not None:
            out.append(_flag("budget", "speculative_num_draft_tokens", budget))
        return out

    def _expects(self, config: SpecConfig) -> list[_Expect]:
        algo = config.algorithm
        extras = _extra_expects(config, self.table)
        if algo == "NONE":
            # No speculative flags at all; the server reports null.
            return [_Expect("algorithm", ("speculative_algorithm",), (None, "NONE")), *extras]
        out = [_flag("algorithm", "speculative_algorithm", algo)]
        if config.draft_model is not None:
            out.append(_flag("draft_model", "speculative_draft_model_path", config.draft_model))
        if algo == "EAGLE":
            out.extend(self._eagle(config))
        elif algo == "DDTREE":
            if config.budget is not None:
                out.append(_flag("budget", "speculative_ddtree_budget", config.budget))
            if config.topk is not None:
                out.append(_Expect("topk", value=str(config.topk), env=DDTREE_TOPK_ENV))
        else:
            if config.budget is not None:
                out.append(_flag("budget", "speculative_num_draft_tokens", config.budget))
            if config.topk is not None:
                out.append(_flag("topk", "speculative_eagle_topk", config.topk))
            elif algo == "DFLASH":
                # DFLASH forces topk=1 whatever was asked: no flag, but the server must say 1.
                out.append(_Expect("topk", ("speculative_eagle_topk",), (1,)))
        if algo in ("DFLASH", "DDTREE"):
            window = None if config.window is None else str(config.window)
            out.append(
                _Expect("window", self.window_fields, (config.window,), self.window_flag, window)
            )
        return [*out, *extras]

    def render(self, config: SpecConfig) -> Rendered:
        return _emit(self._expects(config))

    def verify(self, config: SpecConfig, server_info: Mapping[str, Any]) -> Verification:
        return _check(self._expects(config), server_info)

    def live_config(self, server_info: Mapping[str, Any]) -> SpecConfig | None:
        found = read_live_config(server_info, window_fields=self.window_fields, ddtree=self.ddtree)
        # What the rules fill in (EAGLE's steps from its budget) may contradict the
        # answer: only a config this answer passes is one the server runs.
        return found if found is not None and self.verify(found, server_info).ok else None


def _without_sim_flags(argv: Sequence[str]) -> tuple[str, ...]:
    out: list[str] = []
    skip_value = False
    for word in argv:
        if skip_value and not _is_flag(word):
            skip_value = False
            continue
        skip_value = word.startswith("--sim-") and "=" not in word
        if not word.startswith("--sim-"):
            out.append(word)
    return tuple(out)


# -- user template ------------------------------------------------------------


def _placeholders(text: str, allowed: Sequence[str], where: str) -> list[str]:
    """The placeholders of ``text``, in order; refuses unknown or formatted ones."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise ConfigError(f"{where} {text!r}: {exc}; write '{{{{' for a literal brace") from None
    out = []
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if name not in allowed or spec or conversion:
            raise ConfigError(
                f"{where} {text!r}: unknown placeholder {{{name}}}; "
                f"use {', '.join('{' + a + '}' for a in allowed)}"
            )
        out.append(name)
    return out


def _values(config: SpecConfig) -> dict[str, str | None]:
    return {
        key: None if getattr(config, key) is None else str(getattr(config, key))
        for key in PLACEHOLDERS
    }


class TemplateDialect(Dialect):
    """A custom build's flags from ini templates; verified via ``launch_command`` only.

    ``args_template`` is shell-split first and placeholders are filled per
    token, so a value with spaces stays one argument. A token whose
    placeholder is ``None`` (e.g. ``window`` = full attention) is dropped,
    together with the bare ``--flag`` token right before it; an env pair with
    a ``None`` placeholder is not set. Extra flags are appended as
    ``--name value``.
    """

    name = "template"

    def __init__(self, args_template: str, env_template: str | None = None) -> None:
        try:
            tokens = shlex.split(args_template)
            pairs = shlex.split(env_template or "")
        except ValueError as exc:
            raise ConfigError(f"dflash_args/dflash_env cannot be split: {exc}") from None
        # Each token, and each variable with its value's template, with its placeholders.
        self.tokens = [(t, _placeholders(t, PLACEHOLDERS, "dflash_args")) for t in tokens]
        self.env_pairs: list[tuple[str, str, list[str]]] = []
        for pair in pairs:
            var, sep, value = pair.partition("=")
            if not sep or not _ENV_NAME.fullmatch(var):
                raise ConfigError(
                    f"dflash_env item {pair!r} is not NAME=VALUE; "
                    "separate pairs by spaces or newlines, e.g. 'MY_TOPK={topk}'"
                )
            self.env_pairs.append((var, value, _placeholders(value, PLACEHOLDERS, "dflash_env")))
        for word in [*tokens, *pairs]:
            refused = render.refuse_control("dflash_args/dflash_env word", word)
            if refused is not None:
                raise ConfigError(refused)
        self.used = {n for _, names in self.tokens for n in names}
        self.used.update(n for *_, names in self.env_pairs for n in names)

    def problems(self, config: SpecConfig) -> list[str]:
        values = _values(config)
        return [
            f"{key}={values[key]} is set but the dflash_args/dflash_env templates have no "
            f"{{{key}}}; add it to the template or drop {key}"
            for key in ("budget", "topk", "window", "draft_model")
            if values[key] is not None and key not in self.used
        ]

    def _render(self, config: SpecConfig) -> tuple[Rendered, list[tuple[str, str]]]:
        """The rendering, and (flag, key) pairs dropped because the key's value is None."""
        values = _values(config)
        argv: list[str] = []
        dropped: list[tuple[str, str]] = []
        templated_prev = True
        for token, names in self.tokens:
            unset = next((n for n in names if values[n] is None), None)
            if unset is not None:
                if argv and not templated_prev and _is_flag(argv[-1]):
                    dropped.append((argv.pop(), unset))
                elif "=" in token and _is_flag(token):
                    dropped.append((token.partition("=")[0], unset))
                templated_prev = True
                continue
            argv.append(token.format(**values) if names else token)
            templated_prev = bool(names)
        argv.extend(_extra_words(config))
        env = {
            var: value.format(**values)
            for var, value, names in self.env_pairs
            if not any(values[n] is None for n in names)
        }
        return Rendered(tuple(argv), env), dropped

    def render(self, config: SpecConfig) -> Rendered:
        return self._render(config)[0]

    def verify(self, config: SpecConfig, server_info: Mapping[str, Any]) -> Verification:
        rendered, dropped = self._render(config)
        expects = [*_argv_expects(rendered.argv)]
        expects.extend(_Expect(key, flag=flag) for flag, key in dropped)
        for var, _, names in self.env_pairs:
            if var in rendered.env:
                key = ",".join(names) or var
                expects.append(_Expect(key, value=rendered.env[var], env=var))
        result = _check(expects, server_info)
        if "algorithm" not in self.used:
            result.unverified.append(
                f"algorithm={config.algorithm} is not in the dflash_args template; not checked"
            )
        return result


def _argv_expects(argv: Sequence[str]) -> list[_Expect]:
    """Checks that each flag (with its value) or positional token is in launch_command."""
    out = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if _is_flag(token) and token.startswith("--") and "=" in token:
            flag, _, value = token.partition("=")
            out.append(_Expect(flag.lstrip("-"), flag=flag, value=value))
        elif _is_flag(token) and i + 1 < len(argv) and not _is_flag(argv[i + 1]):
            out.append(_Expect(token.lstrip("-"), flag=token, value=argv[i + 1]))
            i += 1
        else:
            # A switch or a positional token: its presence is the evidence.
            out.append(_Expect(token.lstrip("-"), flag=token, value=""))
        i += 1
    return out


# -- lookup and commands ------------------------------------------------------

_BUILTIN: dict[str, Callable[[str, bool], SGLangDialect]] = {
    "sglang": lambda v, sim: SGLangDialect("sglang", table=facts.load(v), simulator=sim),
    "sglang-legacy": lambda v, sim: SGLangDialect(
        "sglang-legacy",
        window_flag="--speculative-dflash-draft-window-size",
        window_fields=("speculative_dflash_draft_window_size", "speculative_draft_window_size"),
        table=facts.load(v, "legacy"),
        simulator=sim,
    ),
    "ddtree": lambda v, sim: SGLangDialect(
        "ddtree", ddtree=True, table=facts.load(v, "ddtree"), simulator=sim
    ),
}
# What the bundled simulator must play for each dialect (its --sim-build).
SIMULATOR_BUILDS = {"sglang-legacy": "legacy", "ddtree": "ddtree"}


def simulator_flags(dialect: Dialect) -> list[str]:
    """Flags that make the bundled simulator play the build ``dialect`` targets."""
    build = SIMULATOR_BUILDS.get(dialect.name)
    return ["--sim-build", build] if build else []


def dialect_names() -> tuple[str, ...]:
    """Names accepted by :func:`get_dialect`, for option choices and help."""
    return (*_BUILTIN, "template")


def get_dialect(
    name: str,
    *,
    args_template: str | None = None,
    env_template: str | None = None,
    sglang_version: str | None = None,
    simulator: bool = False,
) -> Dialect:
    """The dialect called ``name``; ``template`` needs ``args_template`` (ini dflash_args).

    Templates given with a built-in dialect are refused rather than ignored.
    ``sglang_version`` picks the option table built-ins check flags against
    (default: the newest known); ``simulator`` lets ``--sim-*`` extra flags through
    (the bundled simulator is the target).
    """
    if name == "template":
        if not args_template:
            raise ConfigError(
                "dialect 'template' needs the ini option dflash_args, "
                "e.g. 'dflash_args = --my-budget {budget} --my-window {window}'"
            )
        return TemplateDialect(args_template, env_template)
    if name not in _BUILTIN:
        raise ConfigError(f"unknown dialect {name!r}; choose one of {', '.join(dialect_names())}")
    if args_template or env_template:
        raise ConfigError(
            f"dflash_args/dflash_env are set but dialect {name!r} ignores them; "
            "use --dflash-dialect template or remove them"
        )
    version = sglang_version or facts.NEWEST
    if version not in facts.VERSIONS:
        raise ConfigError(
            f"no option table for SGLang {version!r}; known: {', '.join(facts.VERSIONS)} "
            "(add one with python -m pytest_specdecode.facts.regenerate VERSION)"
        )
    return _BUILTIN[name](version, simulator)


def check_script_template(template: str) -> list[script_template.Slot]:
    """Refuse a reconfigure-script template with an unknown or unsafe placeholder.

    Run when the settings are resolved, before anything runs: see
    :mod:`pytest_specdecode.config.script_template` for where a placeholder
    may sit so that no value is ever read as shell code.
    """
    _placeholders(template, SCRIPT_PLACEHOLDERS, "--dflash-restart-cmd")
    return script_template.slots(template)


def script_args(template: str, config: SpecConfig) -> str:
    """Fill a reconfigure-script template with shell-quoted values.

    ``/opt/reconfig_ddtree.sh {budget} {topk} {window}`` -> ``... 8 4 ''``.
    Each value is one quoted word; ``None`` (unset, or full attention for
    ``window``) is an empty argument ``''``, so positions stay put and the
    script can use ``${3:-default}`` / ``${3:+--window $3}``. ``{extra}``
    expands to the extra flags, each word quoted. A placeholder inside quotes
    (``"m={draft_model}"``) or any other position where the shell would
    read a value as code is refused (:func:`check_script_template`).
    """
    values = _values(config)
    slots = iter(check_script_template(template))
    out = []
    for literal, field_name, _, _ in string.Formatter().parse(template):
        out.append(literal)
        if field_name is None:
            continue
        slot = next(slots)
        if field_name == "extra":
            out.append(render.shell_join(_extra_words(config)))
        else:
            out.append(script_template.quote(values[field_name] or "", glued=slot.glued))
    return "".join(out)


def script_problems(template: str, config: SpecConfig) -> list[str]:
    """Set config keys that ``template`` has no placeholder for (one line each)."""
    used = set(_placeholders(template, SCRIPT_PLACEHOLDERS, "--dflash-restart-cmd"))
    values = _values(config)
    found = [
        f"{key}={values[key]} is set but --dflash-restart-cmd has no {{{key}}}; "
        f"add it or drop {key}"
        for key in ("budget", "topk", "window")
        if values[key] is not None and key not in used
    ]
    if config.extra and "extra" not in used:
        found.append(
            f"extra flags {config.extra!r} are set but --dflash-restart-cmd has no {{extra}}; "
            "add it or drop them"
        )
    return found
