"""Proof from the drafter itself: its start-up line in the current process's log.

``/server_info`` says what the server was told; the drafter says what it runs.
SGLang's DFlash worker logs, from tp rank 0 of the process that serves::

    Initialized DFLASH draft runner. attention_backend=..., model=...,
    block_size=8, draft_window_size=2048, compact_cache=True

and DDTree builds add ``Initialized DDTree worker. block_size=..., tree_budget=...``.
After the readiness gate passes, :func:`check` finds the last such line in the
log of the *current* process (local: its log file; systemd: ``journalctl`` for
the unit's current ``MainPID`` only; script and external: the user's
``--dflash-log-cmd``) and compares block size, window and tree budget with the
config. ``draft_window_size=None, compact_cache=False`` for a config that asks
for a window fails the gate, quoting the line: the drafter attends to the full
context whatever the flags say (the incident this product was made after).
Where no log can be read, the report says "drafter line not checked".
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.service.base import ProcessIdentity, ServiceController, ServiceError

DFLASH_LINE = re.compile(
    r"Initialized DFLASH draft runner\..*?block_size=(?P<block>[^,\s]+),\s*"
    r"draft_window_size=(?P<window>[^,\s]+),\s*compact_cache=(?P<compact>\w+)"
)
DDTREE_LINE = re.compile(
    r"Initialized DDTree worker\..*?block_size=(?P<block>[^,\s]+),\s*"
    r"tree_budget=(?P<budget>[^,\s]+)"
)
NOT_CHECKED = "drafter line not checked"


class DrafterMismatch(ServiceError):
    """The drafter's own start-up line contradicts the config."""


@dataclass(frozen=True)
class DrafterLine:
    """What one start-up line of the drafter says."""

    text: str
    block_size: int | None
    window: int | None
    compact_cache: bool | None


@dataclass
class DrafterProof:
    """The outcome: a summary line for ``-v``, or why nothing was checked."""

    summary: str | None = None
    unverified: list[str] = field(default_factory=list)


def _int(text: str) -> int | None:
    return int(text) if text.lstrip("-").isdigit() else None


def last_lines(text: str) -> tuple[DrafterLine | None, tuple[str, int | None] | None]:
    """The last DFLASH runner line and the last DDTree worker line (text, tree budget)."""
    runner: DrafterLine | None = None
    tree: tuple[str, int | None] | None = None
    for line in text.splitlines():
        m = DFLASH_LINE.search(line)
        if m:
            compact = m["compact"]
            runner = DrafterLine(
                line.strip(),
                _int(m["block"]),
                _int(m["window"]),
                {"True": True, "False": False}.get(compact),
            )
        t = DDTREE_LINE.search(line)
        if t:
            tree = (line.strip(), _int(t["budget"]))
    return runner, tree


def judge(
    config: SpecConfig, runner: DrafterLine, tree: tuple[str, int | None] | None
) -> list[str]:
    """What the drafter's lines contradict (one phrase each)."""
    found: list[str] = []
    budget = config.budget
    if config.algorithm == "DFLASH" and budget is not None and runner.block_size != budget:
        found.append(f"block_size={runner.block_size} but the config asks budget={budget}")
    if config.window is not None:
        if runner.window != config.window or runner.compact_cache is not True:
            attends = "the full context" if runner.window is None else f"{runner.window} tokens"
            found.append(
                f"draft_window_size={runner.window}, compact_cache={runner.compact_cache} but "
                f"the config asks window={config.window} (the drafter attends to {attends})"
            )
    elif runner.window is not None:
        found.append(
            f"draft_window_size={runner.window} but the config asks full attention (window none)"
        )
    if (
        config.algorithm == "DDTREE"
        and budget is not None
        and tree is not None
        and tree[1] != budget
    ):
        found.append(f"tree_budget={tree[1]} but the config asks budget={budget}")
    return found


def current_log(
    controller: ServiceController | None,
    settings: Settings,
    *,
    run: Callable[..., Any] = subprocess.run,
) -> tuple[str | None, str]:
    """The log of the process serving now, and where it came from (for messages)."""
    read = getattr(controller, "process_log", None)
    if callable(read):
        text = read()
        where = f"the log of {controller.kind} control"  # type: ignore[union-attr]
        return (None if text is None else str(text)), where
    if controller is None and settings.logs_cmd:
        # External control: the user's command, run here (it may ssh itself).
        try:
            done = run(
                settings.logs_cmd,
                shell=True,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"--dflash-log-cmd failed: {exc}"
        return (done.stdout or "") + (done.stderr or ""), "the output of --dflash-log-cmd"
    return None, "no log of the current process (give --dflash-log-cmd)"


def read_log(controller: ServiceController | None, settings: Settings) -> tuple[str | None, str]:
    """:func:`current_log`, with a log that could not be read said as such (no raise)."""
    try:
        return current_log(controller, settings)
    except ServiceError as exc:
        return None, f"the log could not be read ({exc.summary})"


def check(
    config: SpecConfig,
    controller: ServiceController | None,
    identity: ProcessIdentity | None,
    settings: Settings,
    *,
    url: str,
    log: tuple[str | None, str] | None = None,
) -> DrafterProof:
    """Prove the drafter runs ``config`` from its own line; raise :class:`DrafterMismatch`.

    ``log``: the process's log and where it came from, when the caller has read it
    (:func:`read_log`); else it is read here.
    """
    if config.algorithm not in ("DFLASH", "DDTREE"):
        return DrafterProof()
    text, where = log if log is not None else read_log(controller, settings)
    if text is None:
        return DrafterProof(unverified=[f"{NOT_CHECKED}: {where}"])
    runner, tree = last_lines(text)
    pid = identity.pid if identity is not None else None
    of = f"pid {pid}" if pid else where
    if runner is None:
        return DrafterProof(
            unverified=[f"{NOT_CHECKED}: no 'Initialized DFLASH draft runner' line in {where}"]
        )
    wrong = judge(config, runner, tree)
    if wrong:
        raise DrafterMismatch(
            f"drafter of config {config.label()!r} at {url} ({of}) does not run it: "
            f"{'; '.join(wrong)} — its start-up line: {runner.text!r}; the flags reached the "
            "server but the drafter ignores them: check the build's DFlash worker",
            reason="drafter",
            config=config.label(),
        )
    summary = (
        f"drafter: block_size={runner.block_size} draft_window_size={runner.window} "
        f"compact_cache={runner.compact_cache} ({of})"
    )
    if tree is not None:
        summary += f"; DDTree tree_budget={tree[1]}"
    return DrafterProof(summary=summary)
