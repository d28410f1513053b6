"""Restarts with SGLang's weight cache: a 6-config sweep's start time, off and on.

The same six configs (budgets 4, 8, 16 by windows 1024, 2048) run on the
simulator with a GPU-like start: loading 3 s, KV cache 0.3 s, CUDA graphs
0.5 s, warm-up 0.3 s, and once more with ``--dflash-weight-cache on``, where
each config loads through the daemon in ``--sim-cached-load-fraction`` (5%) of
the loading time. Figures are each config's start as the report records it
(``start_phases``: the plugin's clock from the launch to the passed gate, and
the server's own phase lines). Requirement: every config of the second run
loads as a client, and the sweep's total start time drops by at least 90% of
the modelled saving (six loads times 95%). Prints both totals, the modelled
and the measured drop, each config's phases, and exits 1 below the
requirement. Figures come from the simulator, not a GPU.

    .venv/bin/python benchmarks/weight_cache_starts.py
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

LOAD, KV, GRAPHS, WARMUP, CACHED = 3.0, 0.3, 0.5, 0.3, 0.05
SIM = (
    f"{sys.executable} -m pytest_specdecode.sim --sim-load-seconds {LOAD:g} "
    f"--sim-kv-seconds {KV:g} --sim-graph-seconds {GRAPHS:g} --sim-warmup-seconds {WARMUP:g} "
    f"--sim-cached-load-fraction {CACHED:g} --sim-time-scale 0"
)
CONFIGS = [(budget, window) for budget in (4, 8, 16) for window in (1024, 2048)]
TESTS = "import pytest\n\n" + "\n".join(
    f"@pytest.mark.dflash(budget={b}, window={w})\ndef test_b{b}_w{w}(dflash_service):\n    pass\n"
    for b, w in CONFIGS
)
SHARE = 0.9  # of the modelled saving, at least


def sweep(project: Path, *args: str) -> list[dict[str, Any]]:
    """The start phases of each config of one run (exits when the run fails)."""
    report = project / "report.json"
    report.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         "--dflash-html", "none", *args],
        cwd=project, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        tail = "\n".join(done.stdout.splitlines()[-15:])
        sys.exit(f"pytest {' '.join(args)} exited {done.returncode}:\n{tail}")
    return [c["start_phases"] for c in json.loads(report.read_text())["configs"]]


def show(name: str, phases: list[dict[str, Any]]) -> float:
    total = sum(float(p["total_seconds"]) for p in phases)
    print(f"{name}: total start {total:.2f} s over {len(phases)} configs")
    for p in phases:
        print(
            f"  start {p['total_seconds']:.2f} s: load {p['load_seconds']:.2f}, KV cache "
            f"{p['kv_cache_seconds']:.2f}, CUDA graphs {p['graph_capture_seconds']:.2f}, warm-up "
            f"{p['warmup_seconds']:.2f}, other {p['other_seconds']:.2f} "
            f"(weight cache: {p['weight_cache']})"
        )
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dflash-wc-bench-") as tmp:
        project = Path(tmp)
        (project / "pytest.ini").write_text(
            f"[pytest]\ndflash_launch = {SIM}\ndflash_ready_timeout = 120\n"
            "dflash_report = report.json\ndflash_client_calibration = off\n"
        )
        (project / "test_sweep.py").write_text(TESTS)
        off = show("weight cache off", sweep(project))
        cached = sweep(project, "--dflash-weight-cache", "on")
        on = show("weight cache on", cached)
    modelled = len(CONFIGS) * LOAD * (1 - CACHED)
    drop = off - on
    print(
        f"modelled saving {modelled:.2f} s ({modelled / off:.0%} of the start time off); "
        f"measured drop {drop:.2f} s ({drop / off:.0%}); requirement: at least "
        f"{SHARE * modelled:.2f} s, every config a client"
    )
    clients = all(p["weight_cache"] == "client" for p in cached)
    if drop < SHARE * modelled or not clients:
        print("FAILED: " + ("a config did not load as a client" if not clients else "too small"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
