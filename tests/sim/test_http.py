"""Endpoint shapes over real HTTP against one simulator subprocess."""

from __future__ import annotations

import gzip
import itertools
import re
from collections.abc import Callable
from typing import Any

import requests

from pytest_specdecode import facts

from .conftest import DFLASH, Sim, stream_events

GEN_512 = {
    "text": "Tell me about speculative decoding.",
    "sampling_params": {"max_new_tokens": 512, "ignore_eos": True, "temperature": 0},
}


def get(sim: Sim, path: str, **kw: Any) -> requests.Response:
    return requests.get(sim.url + path, timeout=10, **kw)


def post(sim: Sim, path: str, body: dict[str, Any], **kw: Any) -> requests.Response:
    return requests.post(sim.url + path, json=body, timeout=30, **kw)


def test_info_endpoints(dflash_sim: Sim) -> None:
    assert get(dflash_sim, "/health_generate").status_code == 200  # one verify step
    for path in ("/server_info", "/get_server_info"):
        info = get(dflash_sim, path).json()
        assert info["speculative_algorithm"] == "DFLASH"
        assert info["speculative_num_draft_tokens"] == 8
        assert info["speculative_draft_window_size"] == 2048
        assert info["speculative_eagle_topk"] == 1
        assert info["speculative_draft_model_path"] == "d"
        assert info["port"] == dflash_sim.port
        assert info["simulator"] is True
        assert info["version"] == "0.5.23"
        # SGLang's format: the argv after the launcher, joined by spaces.
        assert info["launch_command"].startswith(f"--port {dflash_sim.port} --sim-time-scale 0")
        assert " ".join(DFLASH) in info["launch_command"]
        assert isinstance(info["internal_states"][0]["avg_spec_accept_length"], float)
    for path in ("/model_info", "/get_model_info"):
        assert get(dflash_sim, path).json()["model_path"] == "sim/model"
    models = get(dflash_sim, "/v1/models").json()
    assert models["data"][0]["id"] == "sim/model"
    for path in ("/health", "/health_generate", "/ready"):
        assert get(dflash_sim, path).status_code == 200
    assert post(dflash_sim, "/flush_cache", {}).status_code == 200
    assert get(dflash_sim, "/flush_cache").status_code == 200


def test_streamed_generate_512_tokens_in_fewer_chunks(dflash_sim: Sim) -> None:
    events = stream_events(dflash_sim.url + "/generate", GEN_512)
    counts = [e["meta_info"]["completion_tokens"] for e in events]  # type: ignore[index]
    assert counts == sorted(counts)
    assert len(set(counts)) == len(counts)
    last = events[-1]["meta_info"]
    assert isinstance(last, dict)
    assert last["completion_tokens"] == 512
    assert len(events) < 512
    assert last["spec_verify_ct"] == len(events)
    assert last["spec_accept_length"] == 512 / last["spec_verify_ct"]
    assert last["finish_reason"] == {"type": "length", "length": 512}
    assert len(events[-1]["output_ids"]) == 512  # type: ignore[arg-type]
    # The text is cumulative, like SGLang's default.
    texts = [str(e["text"]) for e in events]
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))


def test_non_streamed_generate_matches_streamed_and_is_deterministic(dflash_sim: Sim) -> None:
    body = post(dflash_sim, "/generate", GEN_512).json()
    again = post(dflash_sim, "/generate", GEN_512).json()
    streamed = stream_events(dflash_sim.url + "/generate", GEN_512)
    assert body["text"] == again["text"] == streamed[-1]["text"]
    assert body["meta_info"]["completion_tokens"] == 512
    by_ids = post(dflash_sim, "/generate", {"input_ids": [1, 2, 3], "sampling_params": {}}).json()
    assert by_ids["meta_info"]["prompt_tokens"] == 3
    assert by_ids["meta_info"]["completion_tokens"] <= 128
    assert post(dflash_sim, "/generate", {"sampling_params": {}}).status_code == 400


def test_chat_completions(dflash_sim: Sim) -> None:
    body = {
        "model": "sim/model",
        "messages": [{"role": "user", "content": "Write a Python function gcd(a, b)."}],
        "temperature": 0,
        "return_spec_tokens_details": True,
    }
    reply = post(dflash_sim, "/v1/chat/completions", body).json()
    content = reply["choices"][0]["message"]["content"]
    assert re.search(r"```python\ndef gcd\(", content)
    usage = reply["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    details = reply["sglext"]["spec_tokens_details"]
    assert details["spec_accept_length"] * details["spec_verify_ct"] == usage["completion_tokens"]
    streamed = stream_events(
        dflash_sim.url + "/v1/chat/completions",
        {**body, "stream_options": {"include_usage": True}},
    )
    deltas = [c["choices"][0]["delta"]["content"] for c in streamed if c["choices"]]  # type: ignore[index]
    assert "".join(deltas) == content
    assert streamed[-1]["choices"] == []
    assert streamed[-1]["usage"] == {k: v for k, v in usage.items() if v is not None}
    # sglext comes in a chunk of its own, after the last content chunk.
    assert streamed[-2]["choices"] == []
    assert streamed[-2]["sglext"]["spec_tokens_details"] == details  # type: ignore[index]
    assert streamed[-3]["choices"][0]["finish_reason"] == "stop"  # type: ignore[index]


def test_completions_with_max_tokens_and_stop(dflash_sim: Sim) -> None:
    body = {"prompt": "Once upon a time", "max_tokens": 40, "ignore_eos": True, "temperature": 0}
    reply = post(dflash_sim, "/v1/completions", body).json()
    assert reply["usage"]["completion_tokens"] == 40
    assert reply["choices"][0]["finish_reason"] == "length"
    events = stream_events(dflash_sim.url + "/v1/completions", body)
    assert "".join(e["choices"][0]["text"] for e in events) == reply["choices"][0]["text"]  # type: ignore[index]
    word = reply["choices"][0]["text"].split()[3]
    cut = post(dflash_sim, "/v1/completions", {**body, "stop": [word]}).json()
    assert word not in cut["choices"][0]["text"]
    assert cut["choices"][0]["finish_reason"] == "stop"
    bad = post(dflash_sim, "/v1/completions", {"prompt": 5})
    assert bad.status_code == 400


def metric(sim: Sim, name: str) -> float:
    text = get(sim, "/metrics").text
    match = re.search(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.M)
    assert match, text
    return float(match.group(1))


def test_metrics_count_streamed_tokens(dflash_sim: Sim) -> None:
    before = metric(dflash_sim, "sglang:generation_tokens_total")
    prompt_before = metric(dflash_sim, "sglang:prompt_tokens_total")
    events = stream_events(dflash_sim.url + "/generate", GEN_512)
    assert metric(dflash_sim, "sglang:generation_tokens_total") - before == 512
    assert (
        metric(dflash_sim, "sglang:prompt_tokens_total") - prompt_before
        == (
            events[-1]["meta_info"]["prompt_tokens"]  # type: ignore[index]
        )
    )


def test_metrics_are_gzipped_when_the_request_accepts_gzip_as_prometheus_client_does(
    dflash_sim: Sim,
) -> None:
    asked = {
        "gzip": "gzip",
        "deflate, GZIP;q=0.5": "gzip",
        "identity": None,
        "deflate": None,
        "": None,
    }
    for accept, coding in asked.items():
        raw = requests.get(
            dflash_sim.url + "/metrics",
            headers={"Accept-Encoding": accept},
            timeout=10,
            stream=True,
        )
        body = raw.raw.read(decode_content=False)
        assert raw.headers.get("Content-Encoding") == coding, accept
        text = gzip.decompress(body) if coding else body
        assert b"sglang:generation_tokens_total{" in text, accept


def test_acceptance_over_http_moves_with_budget(sim_factory: Any) -> None:
    lengths = []
    for k in ("4", "16"):
        sim = sim_factory(*DFLASH, "--speculative-num-draft-tokens", k)
        meta = post(sim, "/generate", GEN_512).json()["meta_info"]
        lengths.append(meta["spec_accept_length"])
        assert get(sim, "/server_info").json()["internal_states"][0]["avg_spec_accept_length"] > 1
    assert lengths[0] < lengths[1]


def test_api_key(sim_factory: Any) -> None:
    sim = sim_factory("--api-key", "sekrit")
    assert get(sim, "/server_info").status_code == 401
    assert post(sim, "/generate", {"text": "hi"}).json() == {"error": "Unauthorized"}
    ok = get(sim, "/server_info", headers={"Authorization": "Bearer sekrit"})
    assert ok.status_code == 200
    assert get(sim, "/health").status_code == 200
    assert get(sim, "/metrics").status_code == 404  # open, but metrics are off


def test_no_speculation_has_no_spec_fields(sim_factory: Any) -> None:
    sim = sim_factory()
    meta = post(sim, "/generate", GEN_512).json()["meta_info"]
    assert meta["completion_tokens"] == 512
    assert "spec_verify_ct" not in meta
    assert get(sim, "/server_info").json()["speculative_algorithm"] is None


# Issue 12, done-when: a GPU box's launch line, copied as it is.
GPU_LAUNCH = (
    "--model-path", "/m", "--tp-size", "8", "--page-size", "16",
    "--kv-cache-dtype", "fp8_e4m3", "--speculative-algorithm", "DFLASH",
    "--speculative-draft-model-path", "d", "--speculative-num-draft-tokens", "8",
    "--speculative-draft-window-size", "2048", "--speculative-draft-sink-size", "4",
)  # fmt: skip


def test_a_gpu_launch_line_serves_every_server_args_field(
    sim_factory: Callable[..., Sim],
) -> None:
    sim = sim_factory(*GPU_LAUNCH)
    info = get(sim, "/server_info").json()
    fields = list(facts.load().fields)
    assert len(fields) == 546
    assert [f for f in fields if f not in info] == []
    expected = {
        "model_path": "/m",
        "tp_size": 8,
        "page_size": 16,
        "kv_cache_dtype": "fp8_e4m3",
        "speculative_algorithm": "DFLASH",
        "speculative_num_draft_tokens": 8,
        "speculative_draft_window_size": 2048,
        "speculative_draft_sink_size": 4,
    }
    assert {k: info[k] for k in expected} == expected
    # What the real server adds to the fields.
    assert info["version"] == "0.5.23"
    assert info["launch_command"].endswith(" ".join(GPU_LAUNCH))
    (state,) = info["internal_states"]  # one per DP rank
    assert state["page_size"] == 16
    assert state["world_size"] == 8
    memory = state["memory_usage"]
    assert {"weight", "kvcache", "token_capacity", "graph"} <= set(memory)
    assert memory["graph"]["target_verify"] > 0  # speculative: a verify graph
    # Options the simulator accepts without modelling them are reported back.
    assert {"kv_cache_dtype", "speculative_draft_sink_size"} <= set(info["sim_unmodelled"])


def test_an_ambiguous_prefix_exits_2_like_sglang(sim_factory: Callable[..., Sim]) -> None:
    sim = sim_factory("--model-path", "/m", "--cuda-graph-max-bs", "32", wait=False)
    assert sim.proc.wait(timeout=30) == 2
    assert sim.stderr().strip().splitlines()[-1] == (
        "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match "
        "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    )
