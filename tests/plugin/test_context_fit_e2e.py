"""Prompts sized by the server's own token counts, within its context length.

The scripted server plays SGLang with a small context (2048 tokens, refused at
the limit with SGLang's 400) and a tokenizer of about 3 characters a token: an
8000-character sample of the prompt text is 2666 of its tokens, more than the
context holds. A case that fits is measured with prompts of the case's length
in the server's tokens; one that cannot fit fails with one line saying what to
change, without a request past the context.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest

from pytest_specdecode.config.settings import SIMULATOR_DRAFT_MODEL

from ..throughput.conftest import Script, serve

TESTS = """
import pytest

@pytest.mark.throughput(contexts=[1024, 4096], concurrency=[1], output_tokens=16)
@pytest.mark.dflash(budget=8)
def test_tp(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
"""


def test_prompts_fit_a_small_context_counted_by_the_servers_tokenizer(
    pytester: pytest.Pytester,
) -> None:
    info = {
        "speculative_algorithm": "DFLASH",
        "speculative_num_draft_tokens": 8,
        "speculative_draft_model_path": SIMULATOR_DRAFT_MODEL,
        "launch_command": "sglang --speculative-num-draft-tokens 8",
        # SGLang leaves context_length null unless given; its scheduler reports this.
        "context_length": None,
        "max_req_input_len": 2047,
    }
    script = Script(info=info, chars_per_token=3, context_length=2048)
    script.chunk_tokens = [4, 4, 4, 4]
    pytester.makeini("[pytest]\ndflash_report = report.json\n")
    pytester.makepyfile(test_x=TESTS)
    with serve(script) as (url, _):
        result = pytester.runpytest_subprocess(
            "-v", "-p", "no:cacheprovider", "-p", "no:randomly",
            "--dflash-restart", "never", "--dflash-port", str(urlsplit(url).port),
            "--dflash-rounds", "1",
        )  # fmt: skip
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ctx4096-c1-t16-chat: a prompt of 4096 tokens and 16 output tokens do not fit the "
            "server's context length of 2048 tokens (its /server_info); give "
            "--dflash-contexts at most 2030 or fewer output tokens*"
        ]
    )
    assert "Traceback" not in result.stdout.str()
    refused = [
        body
        for method, path, body in script.requests
        if path == "/generate" and len(body["text"]) // 3 >= 2048 - 1 - 16
    ]
    assert refused == [], "a prompt past the server's context was sent"
    report = json.loads((pytester.path / "report.json").read_text())
    (case,) = report["configs"][0]["throughput"]
    assert case["case"] == "ctx1024-c1-t16-chat"
    assert abs(case["metrics"]["prompt_tokens_mean"] - 1024) <= 0.02 * 1024
