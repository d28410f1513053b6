"""Values are data, never syntax: one renderer per target syntax.

Every path that puts a value into text another program parses goes through
one of these functions, so a value can never end a line, open a quote or
name a specifier in that program's language:

- :func:`systemd_command` / :func:`systemd_word`: ``ExecStart=`` command
  lines (systemd.service(5) "Command lines", systemd.syntax(7));
- :func:`systemd_environment`: ``Environment="NAME=VALUE"`` lines;
- :func:`systemd_path`: a path setting such as ``EnvironmentFile=``;
- :func:`environment_file_line`: one ``NAME="VALUE"`` line of an
  ``EnvironmentFile=`` (systemd's format, which POSIX ``sh`` reads alike);
- :func:`shell_word` / :func:`shell_join`: POSIX ``sh`` words;
- :func:`argv`: an argument vector handed to ``exec`` (no NUL byte).

A control character (C0, DEL, C1, U+2028/U+2029) or a lone surrogate (bytes
that are not UTF-8) in a value is refused where the value enters the plugin
(:func:`refuse_control`, at collection or when options are read), with one
line naming the key; systemd ends a line at ``\\r`` as well as ``\\n``, so
such a character has no safe meaning in a unit file. The systemd renderers
refuse them again (``ValueError``), so nothing that slips past a check
becomes syntax. A shell word renders every character except NUL, which no
``sh`` command line can hold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# C0 controls, DEL, C1 controls, the Unicode line/paragraph separators, lone surrogates.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_NAMES = {"\0": "NUL", "\t": "tab", "\n": "newline", "\r": "carriage return", "\x1b": "escape"}
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Unquoted in a systemd command line and a POSIX shell (after %/$ doubling for systemd).
_SYSTEMD_SAFE = re.compile(r"[A-Za-z0-9_./:=,+@%$-]+")
_SHELL_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
# Text that means itself unquoted in a systemd command line (no %, $, quote, blank).
_PLAIN_PREFIX = re.compile(r"[A-Za-z0-9_./:=,+@-]+")
# What systemd reads as prefixes of the executable (-, @, :, +, !) even when quoted.
_EXEC_PREFIXES = "-@:+!"
# systemd refuses these in the executable name ("contains special characters").
_EXEC_REFUSED = "\\\"'"


def control_character(text: str) -> str | None:
    """The first control character in ``text`` described for a message, or None."""
    found = _CONTROL.search(text)
    if found is None:
        return None
    ch = found.group(0)
    if "\ud800" <= ch <= "\udfff":
        return "a byte that is not UTF-8 text"
    name = _NAMES.get(ch)
    return f"a control character ({name}, {ch!r})" if name else f"a control character ({ch!r})"


def refuse_control(key: str, value: str, fix: str = "") -> str | None:
    """One line saying why ``key=value`` is refused, or None when it has no control character."""
    what = control_character(value)
    if what is None:
        return None
    return (
        f"{key}={value!r} contains {what}: values go into systemd units and shell commands "
        f"as data, and a control character has no safe meaning there; "
        f"{fix or 'remove it'}"
    )


def refuse_option_like(key: str, value: str, *, program: str) -> str | None:
    """One line saying why ``key=value`` is refused when it starts with ``-``, or None.

    An empty ``key``: the line for a message that names the value's source itself.

    For a value that is an operand (a path, a name) of ``program``: a leading
    ``-`` would make it one of the program's options whatever its quoting.
    """
    if not value.startswith("-"):
        return None
    what = f"{key}={value!r} starts" if key else "starts"  # no key: the caller names the source
    return (
        f"{what} with '-': it would be read as an option of {program}, not as the value; "
        f"write ./{value} for a relative path"
    )


def _check(value: str, target: str) -> None:
    what = control_character(value)
    if what is not None:
        raise ValueError(f"{value!r} contains {what}, which cannot go into {target}")


# -- systemd -----------------------------------------------------------------


@dataclass(frozen=True)
class EnvRef:
    """A whole argv word that systemd fills in from the unit's environment at exec
    time (``${NAME}``, exactly one argument): how a secret from an
    ``EnvironmentFile=`` reaches a command line without being written into it."""

    name: str
    # Plain text before the reference in the same word (``--api-key=``).
    prefix: str = ""

    def __post_init__(self) -> None:
        if not _ENV_NAME.fullmatch(self.name):
            raise ValueError(f"invalid environment variable name {self.name!r}")
        if self.prefix and not _PLAIN_PREFIX.fullmatch(self.prefix):
            raise ValueError(f"{self.prefix!r} cannot stand unquoted before ${{{self.name}}}")


Word = str | EnvRef


def _systemd_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_executable(path: str) -> str:
    """The first word of a systemd command line: the program.

    systemd expands ``%`` specifiers there but not ``$`` variables, reads a
    leading ``-@:+!`` as prefixes even inside quotes, and refuses a backslash
    or a quote in the name; those are refused here with ``ValueError``.
    """
    _check(path, "a systemd unit")
    if not path or path[0] in _EXEC_PREFIXES or any(c in path for c in _EXEC_REFUSED):
        raise ValueError(
            f"systemd cannot run the program {path!r}: it must not be empty, start with one "
            f"of {_EXEC_PREFIXES!r} or contain a backslash or a quote"
        )
    text = path.replace("%", "%%")
    return text if _SYSTEMD_SAFE.fullmatch(text) else _systemd_quote(text)


def systemd_word(word: Word) -> str:
    """One argument (not the first) of a systemd command line, read back as exactly ``word``.

    ``%`` becomes ``%%`` (specifiers) and ``$`` becomes ``$$`` (variable
    expansion); a word outside a safe set is double-quoted with ``\\`` and
    ``"`` escaped; a lone ``;`` (the old command separator) is ``\\;``.
    An :class:`EnvRef` renders as ``${NAME}``.
    """
    if isinstance(word, EnvRef):
        return word.prefix + "${" + word.name + "}"
    _check(word, "a systemd unit")
    if word == ";":
        return "\\;"
    text = word.replace("%", "%%").replace("$", "$$")
    return text if _SYSTEMD_SAFE.fullmatch(text) else _systemd_quote(text)


def systemd_command(words: Sequence[Word]) -> str:
    """A whole ``ExecStart=`` value: :func:`systemd_executable` then :func:`systemd_word`."""
    if not words or isinstance(words[0], EnvRef):
        raise ValueError("a systemd command line needs a program as its first word")
    return " ".join([systemd_executable(words[0]), *(systemd_word(w) for w in words[1:])])


def systemd_environment(name: str, value: str) -> str:
    """One ``Environment="NAME=VALUE"`` line (systemd does not expand ``$`` there)."""
    if not _ENV_NAME.fullmatch(name):
        raise ValueError(f"invalid environment variable name {name!r} for a systemd unit")
    _check(value, "a systemd unit")
    return "Environment=" + _systemd_quote(f"{name}={value}".replace("%", "%%"))


def systemd_path(path: str) -> str:
    """An absolute path as a systemd setting's value (``EnvironmentFile=``): ``%`` doubled."""
    _check(path, "a systemd unit")
    if not path.startswith("/") or path != path.strip():
        raise ValueError(f"a systemd path setting needs an absolute path, got {path!r}")
    return path.replace("%", "%%")


def environment_file_line(name: str, value: str) -> str:
    """``NAME="VALUE"`` plus a newline for an ``EnvironmentFile=``.

    Inside double quotes systemd's parser (like ``sh``) takes ``\\``, ``"``,
    `` ` `` and ``$`` literally after a backslash and expands nothing.
    """
    if not _ENV_NAME.fullmatch(name):
        raise ValueError(f"invalid environment variable name {name!r}")
    _check(value, "an environment file")
    escaped = re.sub(r'([\\"`$])', r"\\\1", value)
    return f'{name}="{escaped}"\n'


# -- POSIX shell and exec -----------------------------------------------------


def shell_word(value: str, *, always_quote: bool = False) -> str:
    """``value`` as one POSIX ``sh`` word that the shell reads back byte for byte.

    Left bare when it is made of safe characters only (unless ``always_quote``:
    for a value glued to other text of its word), else single-quoted with each
    ``'`` written as ``'"'"'``. NUL cannot be in a shell command: ``ValueError``.
    """
    if "\0" in value:
        raise ValueError(f"{value!r} contains a NUL byte, which no shell command can hold")
    if value and not always_quote and _SHELL_SAFE.fullmatch(value):
        return value
    return "'" + value.replace("'", "'\"'\"'") + "'"


def shell_join(words: Iterable[str]) -> str:
    """Words as one ``sh`` command line (:func:`shell_word` each)."""
    return " ".join(shell_word(w) for w in words)


def argv(words: Iterable[str]) -> tuple[str, ...]:
    """An argument vector for ``exec``: every word kept as is; NUL refused (``ValueError``)."""
    out = tuple(words)
    for word in out:
        if "\0" in word:
            raise ValueError(f"argument {word!r} contains a NUL byte, which exec cannot pass")
    return out
