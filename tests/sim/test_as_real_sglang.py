"""Where the simulator was corrected to what the real SGLang 0.5.23 does (seen on the CPU,
tests_real_server/): the context length of the model, the refusals' wording, a 404's body.
docs/simulator.md lists each difference."""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import requests
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.processes.children import free_port
from pytest_specdecode.sim import cli

from ..conftest import SIM
from .conftest import DFLASH, FAST, Sim


def tiny_model(path: Path, context: int) -> Path:
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"max_position_embeddings": context}))
    return path


def test_the_context_is_the_models_and_server_info_keeps_the_field_as_given(
    sim_factory: Callable[..., Sim], tmp_path: Path
) -> None:
    sim = sim_factory("--model-path", str(tiny_model(tmp_path / "m", 2048)))
    info = requests.get(sim.url + "/server_info", timeout=10).json()
    # SGLang: context_length null (not given), the scheduler's own limits beside it.
    assert info["context_length"] is None
    assert info["max_req_input_len"] == 2042
    models = requests.get(sim.url + "/v1/models", timeout=10).json()
    assert models["data"][0]["max_model_len"] == 2048
    long = requests.post(
        sim.url + "/generate",
        json={"text": "word " * 2100, "sampling_params": {"max_new_tokens": 8}},
        timeout=30,
    )
    assert long.status_code == 400
    message = long.json()["error"]["message"]
    assert message.startswith("The input (")
    assert message.endswith("tokens) is longer than the model's context length (2048 tokens).")
    chat = requests.post(
        sim.url + "/v1/chat/completions",
        json={
            "model": "m",
            "messages": [{"role": "user", "content": "hi " * 1000}],
            "max_tokens": 1500,
        },
        timeout=30,
    )
    assert chat.status_code == 400
    assert "exceeds the model's maximum context length of 2048 tokens" in chat.text


def test_a_given_context_length_wins_and_is_shown(
    sim_factory: Callable[..., Sim], tmp_path: Path
) -> None:
    model = tiny_model(tmp_path / "m", 2048)
    sim = sim_factory("--model-path", str(model), "--context-length", "1024")
    info = requests.get(sim.url + "/server_info", timeout=10).json()
    assert (info["context_length"], info["max_req_input_len"]) == (1024, 1018)


def test_refusals_are_sglangs_words(sim_factory: Callable[..., Sim]) -> None:
    sim = sim_factory()
    for bad in (-1, float("inf")):
        reply = requests.post(
            sim.url + "/generate",
            data=json.dumps({"text": "hi", "sampling_params": {"temperature": bad}}),
            headers={"content-type": "application/json"},
            timeout=10,
        )
        assert reply.status_code == 400
        message = reply.json()["error"]["message"]
        assert message.startswith("temperature must be a non-negative finite number, got ")
    missing = requests.get(sim.url + "/no-such-endpoint", timeout=10)
    assert (missing.status_code, missing.json()) == (404, {"detail": "Not Found"})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    st.one_of(
        st.binary(max_size=64),
        json_values.map(lambda v: json.dumps(v).encode()),
        json_values.map(lambda v: json.dumps({"max_position_embeddings": v}).encode()),
    )
)
def test_a_model_config_gives_its_positive_context_or_none(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as model:
        (Path(model) / "config.json").write_bytes(content)
        got = cli.model_context(model)
    try:
        value = json.loads(content)["max_position_embeddings"]
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        value = None
    fits = isinstance(value, int) and not isinstance(value, bool) and value > 0
    assert got == (value if fits else None)


def test_no_model_directory_is_no_context(tmp_path: Path) -> None:
    assert cli.model_context(str(tmp_path / "absent")) is None


def test_dflash_on_the_cpu_stops_the_start_with_sglangs_line(tmp_path: Path) -> None:
    argv = [*SIM, *FAST, "--port", str(free_port()), *DFLASH, "--device", "cpu"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr.rstrip().splitlines()[-1] == (
        "ValueError: DFLASH speculative decoding is not supported by CpuSRTPlatform on "
        "device 'cpu'."
    )
