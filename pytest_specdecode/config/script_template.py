"""Where each placeholder of a reconfigure-script template sits, as ``sh`` reads it.

The template (``--dflash-restart-cmd``) runs under ``sh -c`` on the remote
host with the config's values filled in. A value must reach the script as
data, never as shell code, in any position. Quoting (``render.shell_word``) guarantees that
only where the value is part of a plain, unquoted word: inside ``"..."`` the
shell still runs ``$(...)`` and backticks, a ``'...'`` string would be closed
by the quoting itself, and after a backslash, in a comment or a here-document
the quotes mean something else again.

So a template is read once, like the shell reads it, when the settings are
resolved (before anything runs), and refused with one line saying why if a
placeholder sits anywhere but in a plain word:

- inside single or double quotes, after a backslash or right after ``$``;
- in a ``#`` comment;
- after ``$(``, a backtick, ``${``, ``((``, ``[[``, ``<<`` (here-document),
  ``eval`` or ``let``: the plugin does not parse these constructs (which
  re-read or evaluate text), so it refuses every placeholder from there on.

``{extra}`` (several words) must be a word of its own. A value glued to other
text in its word (``m={draft_model}``) is always single-quoted, so nothing in
the rest of the word (``~``, braces, globs) can combine with it.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from pytest_specdecode.config import render
from pytest_specdecode.config.spec import ConfigError

WHERE = "--dflash-restart-cmd"
_BLANKS = " \t"
# Characters that end a word and start a new command or redirection.
_OPERATORS = ";&|()<>\n"
_REREADS = {"eval": "eval", "let": "let", "[[": "[[ ... ]]"}
_PARAM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-]")


@dataclass
class Slot:
    """One placeholder: its name and whether its word has other text (glued)."""

    name: str
    glued: bool = False


class _Reader:
    """A small model of how ``sh`` splits the template, one character at a time."""

    def __init__(self, template: str) -> None:
        self.template = template
        self.quote = ""  # "'" or '"' while inside quotes
        self.escaped = False
        self.comment = False
        self.param: str | None = None  # text of a ${...} being read
        self.word = ""  # the current word as the shell sees it after quote removal
        self.in_word = False
        self.prev = ""
        self.unparsed: str | None = None  # the construct after which nothing is trusted
        self.slots: list[Slot] = []
        self._open: Slot | None = None  # the last slot, until its word ends

    def refuse(self, name: str, why: str, fix: str = "") -> ConfigError:
        fix = fix or (
            f"write it as a plain word or part of one (e.g. m={{{name}}}): the plugin quotes "
            "every value as exactly one word, which is safe only there"
        )
        return ConfigError(f"{WHERE} {self.template!r}: {{{name}}} {why}; {fix}")

    # -- characters ------------------------------------------------------------

    def feed(self, text: str) -> None:
        for ch in text:
            if self.unparsed is not None:
                return
            self._char(ch)
            self.prev = ch

    def _char(self, ch: str) -> None:
        if self.comment:
            self.comment = ch != "\n"
        elif self.escaped:
            self.escaped = False
            self.word += ch
            self._glue()
        elif self.quote == "'":
            if ch == "'":
                self.quote = ""
            else:
                self.word += ch
        elif self.param is not None:
            self._param_char(ch)
        elif self.quote == '"':
            self._double_char(ch)
        else:
            self._plain_char(ch)

    def _param_char(self, ch: str) -> None:
        assert self.param is not None
        if ch != "}":
            self.param += ch
        elif _PARAM.fullmatch(self.param):
            self.param = None
        else:
            self.unparsed = "${...} with an operator"

    def _double_char(self, ch: str) -> None:
        if ch == "\\":
            self.escaped = True
        elif ch == '"':
            self.quote = ""
        elif not self._dollar_or_backtick(ch):
            self.word += ch

    def _dollar_or_backtick(self, ch: str) -> bool:
        if ch == "`":
            self.unparsed = "a `...` command substitution"
        elif ch == "(" and self.prev == "$":
            self.unparsed = "a $(...) command substitution"
        elif ch == "{" and self.prev == "$":
            self.param = ""
        else:
            return False
        return True

    def _plain_char(self, ch: str) -> None:
        if ch in _BLANKS:
            self._end_word()
        elif self._dollar_or_backtick(ch):
            self._glue()
        elif ch in _OPERATORS:
            self._end_word()
            if ch == "(" and self.prev == "(":
                self.unparsed = "(( ... )) arithmetic"
            elif ch == "<" and self.prev == "<":
                self.unparsed = "a << here-document"
        elif ch == "#" and not self.in_word:
            self.comment = True
        else:
            if ch in "'\"":
                self.quote = ch
            elif ch == "\\":
                self.escaped = True
            else:
                self.word += ch
            self._glue()

    def _glue(self) -> None:
        self.in_word = True
        if self._open is not None:
            self._open.glued = True

    def _end_word(self) -> None:
        if self.word in _REREADS:
            self.unparsed = _REREADS[self.word]
        self.word = ""
        self.in_word = False
        self._open = None

    # -- placeholders ------------------------------------------------------------

    def placeholder(self, name: str) -> None:
        if self.unparsed is not None:
            raise self.refuse(name, f"comes after {self.unparsed}, which the plugin does not parse")
        reasons = (
            (self.comment, "sits in a # comment (a newline in a value would end it)"),
            (self.quote == "'", "sits inside '...' quotes"),
            (self.param is not None, "sits inside ${...}"),
            (
                self.quote == '"',
                'sits inside "..." quotes, where the shell still runs $(...) and backticks '
                "in a value",
            ),
            (self.escaped, "follows a backslash"),
            (self.prev == "$", "follows $"),
        )
        why = next((why for hit, why in reasons if hit), None)
        if why:
            raise self.refuse(name, why)
        slot = Slot(name, glued=self.in_word)
        self._glue()
        self.slots.append(slot)
        self.word += "\0"  # a value is never "eval" or "[["
        self._open = slot
        self.prev = "\0"

    def finish(self) -> list[Slot]:
        self._end_word()
        if self.unparsed is None and (self.quote or self.param is not None):
            raise ConfigError(
                f"{WHERE} {self.template!r}: unterminated {self.quote or '${'}; "
                "close it (the shell would refuse the command)"
            )
        for slot in self.slots:
            if slot.name == "extra" and slot.glued:
                raise self.refuse(
                    "extra",
                    "is glued to other text, but it expands to several words",
                    "write {extra} as a word of its own",
                )
        return self.slots


def slots(template: str) -> list[Slot]:
    """The placeholders of ``template`` in order; :class:`ConfigError` if one is unsafe.

    Placeholder names are not checked here (the caller knows which it allows).
    """
    reader = _Reader(template)
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ConfigError(
            f"{WHERE} {template!r}: {exc}; write '{{{{' for a literal brace"
        ) from None
    for literal, name, _, _ in parsed:
        reader.feed(literal)
        if name is not None:
            reader.placeholder(name)
    return reader.finish()


def quote(value: str, *, glued: bool) -> str:
    """``value`` as shell text for a plain word (always quoted when glued to other text)."""
    return render.shell_word(value, always_quote=glued and bool(value))
