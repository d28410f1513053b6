"""The server restarted for a marker's config really runs it, and answers."""

from __future__ import annotations

import pytest


@pytest.mark.dflash(budget=8, window=2048)
def test_server_runs_the_marker_config(dflash_service):
    info = dflash_service.server_info
    assert info["speculative_algorithm"] == "DFLASH"
    assert info["speculative_num_draft_tokens"] == 8
    assert info["speculative_draft_window_size"] == 2048


@pytest.mark.dflash(budget=8, window=2048)
def test_generate_answers(dflash_client):
    result = dflash_client.generate("def fibonacci(n):", max_new_tokens=64, ignore_eos=True)
    assert result.completion_tokens == 64
