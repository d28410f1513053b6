"""The runnable snippets of the Markdown docs, and how the docs check runs each.

A fenced block is a snippet by its language:

- ``sh`` / ``bash``: shell commands, one per logical line (``\\`` continues a
  line; ``#`` lines are comments), run in order in one shell;
- ``python``: a file when it is named (``# conftest.py`` as its first line, or
  a ``<!-- docs-check: file NAME -->`` comment before it), else a script;
- ``ini`` / ``toml`` / ``json``: files when named; an unnamed ``ini`` block is
  a fragment of a ``pytest.ini``, checked by loading it;
- ``text`` (or no language): output shown to the reader, never run.

A comment right before a block (blank lines between are allowed) changes how
it runs: ``<!-- docs-check: skip (why) -->`` skips it (the check prints it),
``<!-- docs-check: exit N -->`` expects exit status N from its last command,
``<!-- docs-check: file NAME -->`` names the file it shows.

Commands are run as written except for the substitutions of :func:`substitute`
(the documentation's example hosts become the local simulator); they are listed
in the check's output.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

RUN_LANGS = {"sh", "bash", "python", "ini", "toml", "json"}
SHOWN_LANGS = {"text", "console", "", "markdown"}
_FENCE = re.compile(r"^(```+|~~~+)\s*([A-Za-z0-9_+-]*)\s*$")
_DIRECTIVE = re.compile(r"^<!--\s*docs-check:\s*(.*?)\s*-->\s*$")
_FIRST_LINE_NAME = re.compile(r"^[#;]\s*([\w./-]+\.(?:py|ini|toml|json|cfg))\s*$")
_COMMAND_WORDS = ("pytest", "python", "python3", "make", "bash", "pip", "pytest-specdecode")

# Hosts the docs use as examples; never contacted (the check also runs every
# snippet in a network namespace of its own, where only loopback exists).
EXAMPLE_HOSTS = re.compile(r"^(10\.1\.2\.200|gpu\d+)(:\d+)?$")


class DocsError(ValueError):
    """A Markdown file breaks the snippet rules; the message names file and line."""


@dataclass
class Block:
    """One fenced block: where it is, what it holds and how to run it."""

    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    skip: str | None = None
    exit_status: int = 0
    name: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


@dataclass
class Command:
    """One logical shell command of a block and the line it starts on."""

    line: int
    text: str
    substitutions: list[str] = field(default_factory=list)


def parse(path: Path) -> list[Block]:
    """Every fenced block of ``path`` with its directives; DocsError on a rule broken."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    pending: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        directive = _DIRECTIVE.match(line.strip())
        fence = _FENCE.match(line.strip()) if line.startswith(("```", "~~~")) else None
        if directive:
            pending.append((i + 1, directive.group(1)))
        elif fence:
            end = _closing(lines, i, fence.group(1), path)
            block = Block(path, i + 1, fence.group(2).lower(), "\n".join(lines[i + 1 : end]) + "\n")
            for at, text in pending:
                _apply(block, text, f"{path.name}:{at}")
            pending = []
            _check_lang(block)
            if block.name is None and block.lang in ("python", "ini", "toml", "json"):
                first = block.text.splitlines()[0] if block.text.strip() else ""
                found = _FIRST_LINE_NAME.match(first.strip())
                block.name = found.group(1) if found else None
            blocks.append(block)
            i = end
        elif line.strip() and pending:
            at = pending[0][0]
            raise DocsError(
                f"{path.name}:{at}: a docs-check comment must come right before a block"
            )
        elif _unfenced_command(lines, i):
            raise DocsError(
                f"{path.name}:{i + 1}: an indented code block that looks like a command "
                f"({line.strip()[:40]!r}); fence it as ```sh (run) or ```text (not run)"
            )
        i += 1
    return blocks


def _closing(lines: list[str], start: int, fence: str, path: Path) -> int:
    for j in range(start + 1, len(lines)):
        if lines[j].strip() == fence:
            return j
    raise DocsError(f"{path.name}:{start + 1}: a code fence that is never closed")


def _apply(block: Block, text: str, where: str) -> None:
    word, _, rest = text.partition(" ")
    if word == "skip":
        reason = rest.strip().strip("()")
        if not reason:
            raise DocsError(f"{where}: say why a block is skipped: docs-check: skip (reason)")
        block.skip = reason
    elif word == "exit" and rest.strip().isdigit():
        block.exit_status = int(rest)
    elif word == "file" and rest.strip():
        block.name = rest.strip()
    else:
        raise DocsError(f"{where}: unknown docs-check comment {text!r}; use skip, exit or file")


def _check_lang(block: Block) -> None:
    if block.lang in RUN_LANGS:
        return
    if block.lang in SHOWN_LANGS:
        first = block.text.lstrip().splitlines()[0] if block.text.strip() else ""
        if block.lang == "" and first.split()[:1] and first.split()[0] in _COMMAND_WORDS:
            raise DocsError(
                f"{block.where}: a block without a language that looks like a command; "
                "fence it as ```sh (run) or ```text (not run)"
            )
        return
    raise DocsError(f"{block.where}: language {block.lang!r} is neither run nor shown")


def _unfenced_command(lines: list[str], i: int) -> bool:
    line = lines[i]
    if not line.startswith("    ") or (i > 0 and lines[i - 1].strip()):
        return False  # only the first line of an indented block (after a blank line)
    if i > 0 and lines[i - 1].strip() == "" and i > 1 and lines[i - 2].startswith("    "):
        return False
    return line.split()[0] in ("pytest", "python", "python3", "make", "bash", "pytest-specdecode")


def commands(block: Block) -> list[Command]:
    """The logical commands of a shell block (continuations joined, comments dropped)."""
    out: list[Command] = []
    current: list[str] = []
    start = 0
    for offset, raw in enumerate(block.text.splitlines()):
        line = raw.rstrip()
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not current:
            start = block.line + 1 + offset
        current.append(line[:-1] if line.endswith("\\") else line)
        if not line.endswith("\\"):
            out.append(Command(start, " ".join(part.strip() for part in current)))
            current = []
    if current:
        raise DocsError(f"{block.where}: the block ends inside a continued line")
    return out


_SGLANG = re.compile(r"[\w/.-]*python[\w.]* -m sglang\.launch_server")
# Options that only mean something for a remote host; dropped with the host.
_REMOTE_VALUED = {"--dflash-host", "--dflash-unit", "--dflash-ssh-user", "--dflash-ssh-port"}
_REMOTE_SWITCHES = {"--dflash-sudo", "--dflash-restore", "--dflash-ssh-accept-new-host-key"}


def substitute(command: Command) -> Command:
    """The command as the check runs it: example hosts become the local simulator.

    - ``python -m sglang.launch_server`` -> ``python -m pytest_specdecode.sim``
      (the simulator takes SGLang's own option set, so the rest of the launch
      line is parsed as SGLang would);
    - a pytest command naming an example host (``10.1.2.200``, ``gpuN``) and not
      ``--dflash-dry-run`` loses ``--dflash-host H``, ``--dflash-unit U`` and the
      other remote-only options: the config runs locally, under local control.
      A dry run keeps its hosts (it contacts none).

    A command still naming an example host (a reconfigure script, an external
    server) cannot run here: DocsError, mark its block ``skip``.
    """
    text = command.text
    notes: list[str] = []
    if _SGLANG.search(text):
        text = _SGLANG.sub("python -m pytest_specdecode.sim", text)
        notes.append("sglang.launch_server -> the simulator")
    try:
        words = shlex.split(text, comments=True)
    except ValueError as exc:
        raise DocsError(f"line {command.line}: cannot split {text!r}: {exc}") from None
    hosts = [w for w in words if EXAMPLE_HOSTS.match(w.split("=", 1)[-1])]
    if hosts and words and words[0] in ("pytest", "python") and "--dflash-dry-run" not in words:
        kept: list[str] = []
        skip_next = False
        for word in words:
            if skip_next:
                skip_next = False
                continue
            name = word.split("=", 1)[0]
            if name in _REMOTE_VALUED:
                skip_next = "=" not in word
                continue
            if name in _REMOTE_SWITCHES:
                continue
            kept.append(word)
        words = kept
        text = shlex.join(words)
        notes.append(f"host {hosts[0]} -> local control of the simulator")
    left = [w for w in words if EXAMPLE_HOSTS.match(w.split("=", 1)[-1].split("@")[-1])]
    if left and "--dflash-dry-run" not in words:
        raise DocsError(
            f"line {command.line}: {command.text[:60]!r} still names host {left[0]!r} after the "
            "substitutions; mark its block <!-- docs-check: skip (why) --> or make it a dry run"
        )
    return Command(command.line, text, notes)
