"""Issue 10, done-when: a planted API key appears in nothing the run writes or shows.

One run against the simulator started with ``--api-key KEY --admin-api-key
ADMIN --ssl-keyfile-password=PASSWORD`` on its launch line (the password shares
an 8-character piece with the key: masking one secret at a time left the rest
of the other showing) covers every failure path at once: a server that crashes on start
(its log tail shows ``server_args=... api_key='KEY'``), one that dies during
the lossless check and one that dies during throughput (request tracebacks
with ``'Authorization': 'Bearer KEY'`` in their locals, under ``-l
--tb=long``), a user test that fails with the header in a local and one
that records it in its benchmark's ``extra_info``. Then every file it
produced (terminal, JUnit XML, report.json, report.html, both benchmark JSONs,
the step summary, the plots) and everything it printed is searched for both keys and
for any 8-character piece of them. The simulator shows the password as SGLang
does: in ``/server_info``'s ``launch_command`` and its ``ssl_keyfile_password``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import FAST_SIM

try:
    # Imported at collection, before pytester snapshots sys.modules: the in-process
    # run would otherwise drop numpy afterwards, which cannot load twice.
    import matplotlib.backends.backend_agg
    import matplotlib.figure  # noqa: F401
except ImportError:
    PLOTS = False
else:
    PLOTS = True

KEY = "sk-PLANTED-4d1f0c9e7b2a"
ADMIN_KEY = "adm-PLANTED-93e5b70a1c"  # --admin-api-key, on the launch line too
# --ssl-keyfile-password: a secret by the kind of its option; "4d1f0c9e" is also in KEY.
PASSWORD = "pw-4d1f0c9e-LOCKED-58ac"

TESTS = """
import pytest


@pytest.mark.dflash(budget=4, sim_fault="crash-on-start")
def test_server_crashes_on_start(dflash_service):
    pass


@pytest.mark.lossless
@pytest.mark.dflash(algorithm="NONE")
def test_lossless_baseline(dflash_lossless):
    dflash_lossless.check()


@pytest.mark.dflash(algorithm="NONE")
def test_user_code_fails_with_the_header_in_a_local(dflash_client):
    headers = {"Authorization": f"Bearer {dflash_client.api_key}"}
    assert headers == {}


@pytest.mark.dflash(algorithm="NONE")
def test_user_benchmark_records_the_header(dflash_client, benchmark):
    benchmark.extra_info["headers"] = {"Authorization": f"Bearer {dflash_client.api_key}"}
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


@pytest.mark.lossless
@pytest.mark.dflash(budget=8, sim_fault="die-after:1")
def test_lossless(dflash_lossless):
    dflash_lossless.check()


# The first case needs about 10 requests, the second about 26: it dies midway.
@pytest.mark.throughput(concurrency=[1, 8])
@pytest.mark.dflash(budget=16, sim_fault="die-after:16")
def test_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
"""


def pieces(secret: str, size: int = 8) -> set[str]:
    return {secret[i : i + size] for i in range(len(secret) - size + 1)}


def files_under(root: Path, inputs: set[str]) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        # The server's own stdout (as SGLang's journal would be): written by the
        # server process, not by the plugin.
        if path.is_file() and path.name not in inputs and "dflash-logs" not in path.parts:
            yield path


@pytest.mark.slow
def test_a_planted_key_is_in_no_output_of_any_failure_path(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    ini = pytester.makeini(
        f"[pytest]\ndflash_launch = {FAST_SIM} --api-key {KEY} --admin-api-key {ADMIN_KEY} "
        f"--ssl-keyfile-password={PASSWORD} "
        "--sim-load-seconds 0.05 "
        "--sim-warmup-seconds 0.05\ndflash_ready_timeout = 60\ndflash_report = report.json\n"
    )
    tests = pytester.makepyfile(test_secrets=TESTS)
    summary = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("DFLASH_API_KEY", KEY)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-v", "-l", "--tb=long", "-rA",
        "--dflash-contexts=60", "--dflash-output-tokens=8", "--dflash-rounds=1",
        "--junitxml=junit.xml", "--dflash-html=report.html",
        "--benchmark-json=bench.json", "--benchmark-save=run",
        *(["--dflash-plot=plots"] if PLOTS else []),
    )  # fmt: skip
    # The progress line goes to the real stderr, past pytest's capture: read it too.
    progress = capfd.readouterr()
    output = "\n".join([result.stdout.str(), result.stderr.str(), progress.out, progress.err])

    # Every path was taken: the start crash, both deaths, one measured case.
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", 0) >= 1, output[-3000:]
    assert outcomes.get("passed", 0) >= 3, output[-3000:]  # baseline, benchmark, first case
    assert outcomes.get("failed", 0) >= 3, output[-3000:]
    # The crashed server's log tail was shown: its ~16 kB ServerArgs line (keys and all)
    # cut to its start, the rest of the tail masked like every output.
    assert "server_args=ServerArgs(" in output
    assert " more characters)" in output
    assert "'Authorization': 'Bearer ***'" in output  # the failing user test's locals
    # The launch command, masked: -v header, -v ready lines, the report.
    result.stdout.fnmatch_lines(["dflash: launch *.sim * --api-key *** --admin-api-key *** *"])
    result.stdout.fnmatch_lines(["*NONE: ready in *; launched: *.sim * --api-key *** *"])
    report = json.loads((pytester.path / "report.json").read_text())
    assert "--api-key *** --admin-api-key *** --ssl-keyfile-password=***" in report["launch"]
    bench = json.loads((pytester.path / "bench.json").read_text())["benchmarks"]
    assert len(bench) == 2  # the user's benchmark and the first throughput case
    headers = [b["extra_info"].get("headers") for b in bench]
    assert {"Authorization": "Bearer ***"} in headers
    produced = list(files_under(pytester.path, {ini.name, tests.name}))
    names = {p.name for p in produced}
    assert {"junit.xml", "report.json", "report.html", "bench.json", "step-summary.md"} <= names
    assert any(p.suffix == ".png" for p in produced) or not PLOTS, names
    assert any(p.name.endswith("_run.json") for p in produced), names

    found = pieces(KEY) | pieces(ADMIN_KEY) | pieces(PASSWORD)
    leaks = [f"{p}: {sorted(f for f in found if f.encode() in p.read_bytes())}" for p in produced]
    leaks = [line for line in leaks if not line.endswith("[]")]
    printed = sorted(f for f in found if f in output)
    assert not leaks, leaks
    assert not printed, [m.group(0) for m in re.finditer(r".{60}" + printed[0], output)]
