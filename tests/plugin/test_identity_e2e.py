"""Identity continuity through the plugin: a server replaced behind an external run.

The hostile server (the throughput tests' scripted one) plays an external
SGLang server (``--dflash-restart=never``) or a live one auto mode keeps;
halfway through, a test tells it to become another server (``POST /_swap``:
another ``launch_command``, counters back to zero). The throughput test after
it fails with the one line, files no figures under the config, and the
config's remaining test fails at once.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest

from pytest_specdecode.config.settings import SIMULATOR_DRAFT_MODEL

from ..throughput.conftest import Script, serve

TESTS = """
import pytest
import requests

THROUGHPUT = pytest.mark.throughput(contexts=[60], concurrency=[1], output_tokens=16)

@THROUGHPUT
@pytest.mark.dflash(budget=8)
def test_a_before(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)

@pytest.mark.dflash(budget=8)
def test_b_swap(dflash_service):
    requests.post(dflash_service.base_url + "/_swap", timeout=5).raise_for_status()

@THROUGHPUT
@pytest.mark.dflash(budget=8)
def test_c_after(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)

@THROUGHPUT
@pytest.mark.dflash(budget=8)
def test_d_later(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
"""


@pytest.mark.slow
@pytest.mark.parametrize("restart", ["never", "auto"])  # external; a kept live server
def test_a_server_replaced_after_the_gate_fails_the_tests_and_files_no_figures(
    pytester: pytest.Pytester, restart: str
) -> None:
    # Auto mode launches the simulator by default: its drafter is the config's.
    good = {
        "speculative_algorithm": "DFLASH",
        "speculative_num_draft_tokens": 8,
        "speculative_draft_model_path": SIMULATOR_DRAFT_MODEL,
    }
    script = Script(
        info={**good, "launch_command": "sglang --speculative-num-draft-tokens 8"},
        swapped_info={**good, "launch_command": "sglang --speculative-num-draft-tokens 16"},
    )
    pytester.makeini("[pytest]\ndflash_report = report.json\n")
    pytester.makepyfile(test_x=TESTS)
    with serve(script) as (url, _):
        port = str(urlsplit(url).port)
        result = pytester.runpytest_subprocess(
            "-v", "-p", "no:cacheprovider", "-p", "no:randomly",
            "--dflash-restart", restart, "--dflash-port", port, "--dflash-rounds", "1",
            "--benchmark-json", "bench.json",
        )  # fmt: skip
    result.assert_outcomes(passed=2, failed=1, errors=1)
    line = (
        f"the server at {url} changed between the gate and this test: launch_command "
        "'sglang --speculative-num-draft-tokens 8' -> 'sglang --speculative-num-draft-tokens 16'"
        "; its figures are not filed under DFLASH budget=8"
    )
    result.stdout.fnmatch_lines(["*::test_c_after* FAILED*", f"*{line}*"])
    result.stdout.fnmatch_lines(["*ERROR at setup of test_d_later*", f"*{line}*"])
    assert "Traceback" not in result.stdout.str()
    report = json.loads((pytester.path / "report.json").read_text())
    (config,) = report["configs"]
    # Only the test before the swap filed figures under the config.
    assert [t["nodeid"] for t in config["throughput"]] == [
        "test_x.py::test_a_before[ctx60-c1-t16-chat]"
    ]
    # pytest-benchmark saves no figure of the replaced server either.
    saved = json.loads((pytester.path / "bench.json").read_text())
    assert [b["name"] for b in saved["benchmarks"]] == ["test_a_before[ctx60-c1-t16-chat]"]
