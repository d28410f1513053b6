"""The simulator's parser against the snapshot of SGLang 0.5.23, option by option.

``pytest_specdecode/facts/sglang-0.5.23.json`` was read from the wheel; this
checks it against the shared snapshot (``shared/sglang/server-args-0.5.23.json``,
when present) and that the simulator's parser accepts every option in every
spelling with a valid value, and refuses what SGLang lacks. The comparison
with SGLang's own parser, built from the wheel, is ``tests_real/``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode import facts
from pytest_specdecode.sim import options

from .corpus import good_argv

TABLE = facts.load()


def snapshot_path() -> Path | None:
    here = Path(__file__).resolve().parents[2]
    for candidate in (
        os.environ.get("SPECDECODE_SGLANG_SNAPSHOT", ""),
        here.parent / "shared/sglang/server-args-0.5.23.json",
        here.parent.parent / "shared/sglang/server-args-0.5.23.json",
    ):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def sim_parse(argv: list[str]) -> tuple[int, str, Any]:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parsed = options.parse(argv)
    except SystemExit as exc:
        line = next((x for x in err.getvalue().splitlines() if "error:" in x), "")
        return int(exc.code or 0), line, None
    return 0, "", parsed


def test_the_table_is_the_snapshot_option_by_option() -> None:
    path = snapshot_path()
    if path is None:
        pytest.skip("shared/sglang/server-args-0.5.23.json is not beside the checkout")
    snap = json.loads(path.read_text())
    assert len(TABLE.options) == len(snap["options"]) == 531
    for mine, theirs in zip(TABLE.options, snap["options"], strict=True):
        assert list(mine.flags) == theirs["flags"]
        assert (mine.dest, mine.action, mine.nargs, mine.type, mine.default) == (
            theirs["dest"], theirs["action"], theirs["nargs"], theirs["type"], theirs["default"]
        ), mine.flags  # fmt: skip
        # --sampling-backend's choices are a set in SGLang: same members, any order.
        assert sorted(mine.choices or ()) == sorted(theirs["choices"] or ()), mine.flags
        assert mine.takes_value == theirs["takes_value"], mine.flags
    assert list(TABLE.fields) == snap["server_args_fields"]


def test_every_spelling_with_a_valid_value_is_accepted() -> None:
    for option, flag in ((o, f) for o in TABLE.options for f in o.flags):
        status, error, parsed = sim_parse(good_argv(option, flag))
        assert (status, error) == (0, ""), flag
        unset = option.default is None or option.default is False
        if not flag.startswith("--no-") and unset:
            assert option.dest in parsed.given, flag


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--speculative-ddtree-budget", "12"],
         "unrecognized arguments: --speculative-ddtree-budget 12"),
        (["--speculative-dflash-draft-window-size", "1"], "unrecognized arguments"),
        (["--cuda-graph-max-bs", "32"], "ambiguous option: --cuda-graph-max-bs could match "
         "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"),
        (["--page-size", "x"], "argument --page-size: invalid int value: 'x'"),
        (["--tokenizer-mode", "fast"], "argument --tokenizer-mode: invalid choice: 'fast'"),
        (["--sim-see", "1"], "unrecognized arguments: --sim-see 1"),
    ],
)  # fmt: skip
def test_what_sglang_lacks_is_refused_with_its_line(argv: list[str], error: str) -> None:
    status, line, _ = sim_parse(argv)
    assert status == 2
    assert line.startswith("sglang serve: error: ")
    assert error in line


def test_sim_options_do_not_change_sglang_prefix_matching() -> None:
    # --sim-* are taken out by exact spelling; a real abbreviation still works.
    status, _, parsed = sim_parse(["--sim-seed", "3", "--tp", "2", "--mem-frac", "0.7"])
    assert status == 0
    assert (parsed.sim.sim_seed, parsed.value("tp_size"), parsed.value("mem_fraction_static")) == (
        3, 2, 0.7
    )  # fmt: skip
