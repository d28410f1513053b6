"""Reading a start's phases from SGLang's log lines (service/start_phases.py)."""

from __future__ import annotations

import math
import re
from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.service.start_phases import LOG_GREP, PHASES, StartPhases, read_phases

# A real SGLang 0.5.23 start of a target and its drafter, seconds-resolution stamps
# (no SGLANG_LOG_MS), the scheduler's " TP0" inside the bracket.
SGLANG = """\
[2026-12-01 10:00:00] server_args=ServerArgs(model_path='m', ...)
[2026-12-01 10:00:05 TP0] Load weight begin. avail mem=78.52 GB
[2026-12-01 10:05:12 TP0] Load weight end. elapsed=306.84 s, type=Qwen3MoeForCausalLM, \
avail mem=20.10 GB, mem usage=58.42 GB.
[2026-12-01 10:05:20 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 400000, \
K size: 6.00 GB, V size: 6.00 GB
[2026-12-01 10:05:21 TP0] Memory pool end. avail mem=7.90 GB
[2026-12-01 10:05:22 TP0] Capture target verify CUDA graph begin. backend=full, \
num_tokens_per_req=8, avail mem=7.80 GB
[2026-12-01 10:05:52 TP0] Capture target verify CUDA graph end. bs=[1, 2, 4], \
elapsed=29.61 s, mem usage=1.20 GB, avail mem=6.60 GB.
[2026-12-01 10:05:53 TP0] Load weight begin. avail mem=6.60 GB
[2026-12-01 10:06:03 TP0] Load weight end. elapsed=9.50 s, type=DFlashDraftModel, \
avail mem=5.60 GB, mem usage=1.00 GB.
[2026-12-01 10:06:05 TP0] Memory pool end. avail mem=5.00 GB
[2026-12-01 10:06:05 TP0] Capture draft decode CUDA graph begin. backend=full, avail mem=5.00 GB
[2026-12-01 10:06:15 TP0] Capture draft decode CUDA graph end. bs=[1, 2, 4], elapsed=10.20 s, \
mem usage=0.40 GB, avail mem=4.60 GB.
INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2026-12-01 10:06:40] The server is fired up and ready to roll!
"""


def test_sglangs_own_lines_give_each_phase_summed_over_target_and_drafter() -> None:
    found = read_phases(SGLANG)
    assert found is not None
    # Loading and graph capture: SGLang's own elapsed= figures, target plus drafter.
    assert found.load == pytest.approx(306.84 + 9.50)
    assert found.graph_capture == pytest.approx(29.61 + 10.20)
    # The KV pool: from the weights' end to the pool's end (8 + 1 s, then 2 s).
    assert found.kv_cache == pytest.approx(9 + 2)
    # Warm-up: from the last engine step to the "fired up" line.
    assert found.warmup == pytest.approx(25)
    assert found.resolution == 1.0
    assert not found.cache_fell_back


def test_without_elapsed_figures_the_stamps_give_the_phase() -> None:
    log = (
        "[2026-12-01 10:00:00.250] Load weight begin. avail mem=78.52 GB\n"
        "[2026-12-01 10:00:01.000] Load weight end. type=X, avail mem=62.12 GB\n"
        "[2026-12-01 10:00:01.500] The server is fired up and ready to roll!\n"
    )
    found = read_phases(log)
    assert found is not None
    assert (found.load, found.warmup, found.resolution) == (0.75, 0.5, 0.001)
    assert found.kv_cache is None
    assert found.graph_capture is None


def test_a_log_of_several_starts_is_read_from_the_last_one() -> None:
    second = SGLANG.replace("elapsed=306.84 s", "elapsed=12.00 s").replace(
        "elapsed=9.50 s", "elapsed=1.00 s"
    )
    found = read_phases(SGLANG + second)
    assert found is not None
    assert found.load == pytest.approx(13.0)


def test_the_client_that_fell_back_to_disk_says_so() -> None:
    log = SGLANG.replace(
        "[2026-12-01 10:05:12 TP0] Load weight end.",
        "[2026-12-01 10:00:06 TP0] [IpcModelLoader] Weight cache not available or config "
        "mismatch, falling back to disk load\n[2026-12-01 10:05:12 TP0] Load weight end.",
    )
    phases = StartPhases.of(
        read_phases(log), total=400.0, first_generate=399.0, weight_cache="client", source="x"
    )
    assert phases.weight_cache == "fell back"
    assert phases.to_json()["load_seconds"] == pytest.approx(316.34)


def test_no_phase_line_means_no_phases() -> None:
    assert read_phases("Traceback (most recent call last):\n[garbage] Load weight\n") is None
    phases = StartPhases.of(None, total=3.0, first_generate=2.0, weight_cache="off", source="s")
    assert phases.other is None
    assert phases.describe() == "phases unknown"


MARKERS = [
    "Load weight begin. avail mem=1 GB",
    "Load weight end. elapsed=1.5 s, type=X",
    "Load weight end. type=X",
    "KV Cache is allocated. dtype: x",
    "Memory pool end. avail mem=1 GB",
    "Capture target verify CUDA graph begin. backend=full",
    "Capture target verify CUDA graph end. elapsed=99999999999.5 s",
    "Capture draft decode CUDA graph end. bs=[1]",
    "The server is fired up and ready to roll!",
    "something else",
]


@given(
    st.lists(
        st.tuples(
            st.datetimes(),
            st.booleans(),
            st.one_of(st.sampled_from(MARKERS), st.text(max_size=40)),
        ),
        max_size=30,
    )
)
def test_any_log_gives_finite_non_negative_phases_or_none(
    lines: list[tuple[datetime, bool, str]],
) -> None:
    # Hostile text: stamps out of order, lines cut, figures absurd; never a raise.
    text = "\n".join(
        f"[{when:%Y-%m-%d %H:%M:%S}{'.123' if ms else ''}] {message}" for when, ms, message in lines
    )
    found = read_phases(text)
    if found is None:
        return
    for name in PHASES:
        value = getattr(found, name)
        assert value is None or (math.isfinite(value) and value >= 0)
    phases = StartPhases.of(found, total=1.0, first_generate=1.0, weight_cache="off", source="")
    assert phases.other is None or phases.other >= 0


def test_the_journal_filter_keeps_every_line_the_phases_are_read_from() -> None:
    # systemd control reads only the lines LOG_GREP matches off the journal (grep -E).
    kept = "\n".join(line for line in SGLANG.splitlines() if re.search(LOG_GREP, line))
    assert read_phases(kept) == read_phases(SGLANG)
    assert "server_args" not in kept
