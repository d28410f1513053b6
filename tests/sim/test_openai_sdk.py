"""The OpenAI Python SDK against the simulator on loopback, as a user's own client would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
import requests

from .conftest import DFLASH, Sim, run_sim

KEY = "sk-sim-test"


@pytest.fixture(scope="module")
def keyed_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    """A DFLASH simulator with --api-key and metrics."""
    with run_sim(
        tmp_path_factory.mktemp("sdk"), *DFLASH, "--enable-metrics", "--api-key", KEY
    ) as sim:
        sim.wait_healthy()
        yield sim


@pytest.fixture
def client(keyed_sim: Sim) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=keyed_sim.url + "/v1", api_key=KEY, timeout=30, max_retries=0) as c:
        yield c


def test_n_gives_n_choices(client: openai.OpenAI) -> None:
    reply = client.completions.create(model="sim/model", prompt="def fib(n):", max_tokens=16, n=2)
    assert [c.index for c in reply.choices] == [0, 1]
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 32
    chat = client.chat.completions.create(
        model="sim/model", messages=[{"role": "user", "content": "hi"}], max_tokens=8, n=3
    )
    assert len(chat.choices) == 3


def test_a_list_prompt_gives_one_choice_per_prompt(client: openai.OpenAI) -> None:
    reply = client.completions.create(
        model="sim/model", prompt=["def gcd(a, b):", "Once upon a time"], max_tokens=8
    )
    assert [c.index for c in reply.choices] == [0, 1]
    assert all(c.text for c in reply.choices)


def test_streaming_usage_and_sglext_in_their_own_chunks(client: openai.OpenAI) -> None:
    chunks = list(
        client.completions.create(
            model="sim/model",
            prompt="def fib(n):",
            max_tokens=24,
            stream=True,
            stream_options={"include_usage": True},
            # continuous_usage_stats is SGLang's, not in the SDK's types: sent as extra body.
            extra_body={
                "return_spec_tokens_details": True,
                "ignore_eos": True,
                "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            },
        )
    )
    content = [c for c in chunks if c.choices]
    # continuous_usage_stats: the running count on every content chunk.
    counts = [c.usage.completion_tokens for c in content if c.usage is not None]
    assert len(counts) == len(content)
    assert counts == sorted(counts)
    assert counts[-1] == 24
    sglext = chunks[-2]
    assert sglext.choices == []
    details = (sglext.model_extra or {})["sglext"]["spec_tokens_details"]
    assert set(details) == {
        "spec_accept_rate", "spec_accept_length", "spec_cap_length",
        "spec_block_accept_length", "spec_num_correct_drafts", "spec_num_proposed_drafts",
        "spec_verify_ct", "spec_correct_drafts_histogram", "spec_cap_lens_histogram",
    }  # fmt: skip
    assert sum(details["spec_correct_drafts_histogram"]) == details["spec_verify_ct"]
    assert details["spec_num_proposed_drafts"] == details["spec_verify_ct"] * 7  # block 8 - 1
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 24


def test_health_ready_metrics_are_open_generate_needs_the_key(keyed_sim: Sim) -> None:
    for path in ("/health", "/health_generate", "/ready", "/metrics"):
        assert requests.get(keyed_sim.url + path, timeout=10).status_code == 200, path
    body = {"text": "hi", "sampling_params": {"max_new_tokens": 2}}
    refused = requests.post(keyed_sim.url + "/generate", json=body, timeout=10)
    assert (refused.status_code, refused.json()) == (401, {"error": "Unauthorized"})
    for scheme in ("Bearer", "bearer", "BEARER"):
        ok = requests.post(
            keyed_sim.url + "/generate", json=body, timeout=10,
            headers={"Authorization": f"{scheme} {KEY}"},
        )  # fmt: skip
        assert ok.status_code == 200, scheme
    wrong = requests.post(
        keyed_sim.url + "/generate", json=body, timeout=10, headers={"Authorization": "Bearer no"}
    )
    assert wrong.status_code == 401


def test_errors_have_sglangs_type_names(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as exc:
        client.completions.create(model="sim/model", prompt="x", max_tokens=10**6)
    assert exc.value.body is not None
    assert exc.value.status_code == 400
    assert "maximum context length" in str(exc.value)
    raw = requests.post(
        client.base_url.join("completions").__str__(),
        json={"prompt": 7},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=10,
    ).json()
    assert (raw["object"], raw["type"], raw["code"]) == ("error", "Bad Request", 400)
    refused = requests.post(
        client.base_url.join("completions").__str__(),
        json={"prompt": "x", "max_tokens": 10**6},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=10,
    ).json()
    assert refused["type"] == "BadRequestError"


def test_no_key_in_server_info_or_launch_command(keyed_sim: Sim, tmp_path: Path) -> None:
    info = requests.get(
        keyed_sim.url + "/server_info", headers={"Authorization": f"Bearer {KEY}"}, timeout=10
    ).json()
    assert KEY not in str(info)
    assert "--api-key <redacted>" in info["launch_command"]
    assert KEY not in keyed_sim.stderr()
