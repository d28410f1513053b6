"""The drafter's own start-up line: parsed, judged against the config, read per process."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.service import drafter
from pytest_specdecode.service.base import LaunchSpec, ProcessIdentity
from pytest_specdecode.service.local import LocalController
from pytest_specdecode.service.systemd import SystemdController

GOOD = (
    "[2026-11-29 23:05:17 TP0] Initialized DFLASH draft runner. attention_backend=fa3, "
    "model=DFlashDraftModel, block_size=8, draft_window_size=2048, compact_cache=True"
)
INCIDENT = (
    "[2026-11-29 23:05:17 TP0] Initialized DFLASH draft runner. attention_backend=fa3, "
    "model=DFlashDraftModel, block_size=8, draft_window_size=None, compact_cache=False"
)
TREE = "[x TP0] Initialized DDTree worker. block_size=16, tree_budget=12, max_tree_nodes=13"
CONFIG = SpecConfig(budget=8, window=2048, draft_model="d")
PID = ProcessIdentity("local", pid=4242)


class Logs:
    """A controller stand-in whose current process logged ``text``."""

    kind = "local"

    def __init__(self, text: str | None) -> None:
        self.text = text

    def process_log(self) -> str | None:
        return self.text


def prove(config: SpecConfig, text: str | None, **kw: Any) -> drafter.DrafterProof:
    return drafter.check(config, Logs(text), PID, Settings(), url="http://127.0.0.1:1", **kw)  # type: ignore[arg-type]


def test_matching_line_gives_the_verbose_summary() -> None:
    proof = prove(CONFIG, f"noise\n{GOOD}\nThe server is fired up and ready to roll!\n")
    assert proof.summary == (
        "drafter: block_size=8 draft_window_size=2048 compact_cache=True (pid 4242)"
    )
    assert proof.unverified == []


def test_the_incident_fails_quoting_the_line() -> None:
    with pytest.raises(drafter.DrafterMismatch) as exc:
        prove(CONFIG, INCIDENT)
    message = str(exc.value)
    assert "draft_window_size=None, compact_cache=False but the config asks window=2048" in message
    assert repr(INCIDENT) in message
    assert "(pid 4242)" in message
    assert exc.value.reason == "drafter"


def test_the_last_line_is_the_current_one() -> None:
    # A log holding an older start before the current one: only the last counts.
    assert prove(CONFIG, f"{INCIDENT}\n{GOOD}\n").summary is not None
    with pytest.raises(drafter.DrafterMismatch):
        prove(CONFIG, f"{GOOD}\n{INCIDENT}\n")


@pytest.mark.parametrize(
    ("config", "line", "reason"),
    [
        (SpecConfig(budget=16, window=2048, draft_model="d"), GOOD, "block_size=8 but"),
        (SpecConfig(budget=8, draft_model="d"), GOOD, "asks full attention"),
        (
            SpecConfig("DDTREE", budget=16, window=2048, draft_model="d"),
            f"{GOOD}\n{TREE}",
            "tree_budget=12",
        ),
    ],
)
def test_other_contradictions(config: SpecConfig, line: str, reason: str) -> None:
    with pytest.raises(drafter.DrafterMismatch, match=reason):
        prove(config, line)


def test_nothing_to_read_says_not_checked() -> None:
    assert prove(CONFIG, None).unverified == ["drafter line not checked: the log of local control"]
    assert "no 'Initialized DFLASH draft runner' line" in prove(CONFIG, "hello").unverified[0]
    # EAGLE and NONE have no such line to check.
    assert prove(SpecConfig("EAGLE", draft_model="d"), None).unverified == []


def test_external_uses_the_log_command_locally(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(GOOD + "\n")
    settings = Settings(control="external", logs_cmd=f"cat {log}")
    proof = drafter.check(CONFIG, None, None, settings, url="u")
    assert proof.summary is not None
    assert proof.summary.endswith("(the output of --dflash-log-cmd)")
    none = drafter.check(CONFIG, None, None, Settings(control="external"), url="u")
    assert none.unverified == [
        "drafter line not checked: no log of the current process (give --dflash-log-cmd)"
    ]


def test_local_controller_reads_its_current_process_log(tmp_path: Path) -> None:
    controller = LocalController(tmp_path)
    assert controller.process_log() is None
    code = f"import sys; print({GOOD!r}, flush=True); sys.stdin and None"
    try:
        identity = controller.apply(LaunchSpec(argv=(sys.executable, "-c", code)))
        assert controller._proc is not None
        controller._proc.wait(10)
        assert GOOD in (controller.process_log() or "")
        assert drafter.check(CONFIG, controller, identity, Settings(), url="u").summary
    finally:
        controller.stop()


def test_systemd_reads_only_the_current_main_pid(monkeypatch: pytest.MonkeyPatch) -> None:
    commands: list[str] = []

    def run(conn: object, command: str, *, timeout: float, where: str, **_: object) -> Any:
        commands.append(command)
        return SimpleNamespace(exited=0, stdout=GOOD + "\n", stderr="")

    monkeypatch.setattr("pytest_specdecode.service.ssh.run", run)
    controller = SystemdController(lambda: object(), "sglang.service")
    assert controller.process_log() is None  # no MainPID known: nothing read
    controller._identity = ProcessIdentity("systemd", pid=777)
    controller._since = "1764450000"
    assert controller.process_log() == GOOD + "\n"
    assert (
        "--since=@1764450000 --no-pager -o cat -- _SYSTEMD_UNIT=sglang.service _PID=777"
        in (commands[-1])
    )
    assert "journalctl --unit" not in commands[-1]
