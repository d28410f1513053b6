"""Client-limited cases: judged against the null-server calibration, out of the verdict."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.report import client_limit, summary
from pytest_specdecode.report.model import Calibration, Ceiling, Report
from pytest_specdecode.report.outputs import judge
from pytest_specdecode.throughput import calibration

CALIBRATION = {
    "ceilings": [
        {"concurrency": 1, "tok_s": 1000.0, "overhead_ms_p99": 2.0},
        {"concurrency": 8, "tok_s": 4000.0, "overhead_ms_p99": 4.0},
    ]
}


def case(
    load: int, tok_s: float, overhead: float = 1.0, e2e: float = 100.0, cpu: float | None = None
) -> dict[str, Any]:
    return {
        "case": f"ctx60-c{load}-t64-chat",
        "metrics": {
            "context": 60,
            "load": f"c{load}",
            "domain": "chat",
            "concurrency": load,
            "tok_s": tok_s,
            "client_overhead_ms_p99": overhead,
            "e2e_ms_p50": e2e,
            "client_cpu_share": cpu,
        },
    }


@given(
    st.sampled_from([1, 8]),
    st.floats(0, 10_000),
    st.floats(0, 100),
    st.floats(1, 1000),
    st.none() | st.floats(0, 1.5),
)
def test_a_case_is_marked_exactly_when_near_the_ceiling_or_on_a_loaded_machine(
    load: int, tok_s: float, overhead: float, e2e: float, cpu: float | None
) -> None:
    data = Report.from_dict(
        {
            "calibration": CALIBRATION,
            "configs": [{"label": "b8", "throughput": [case(load, tok_s, overhead, e2e, cpu)]}],
        }
    )
    (marked,) = client_limit.client_limited(data)
    ceiling = {1: (1000.0, 2.0), 8: (4000.0, 4.0)}[load]
    near = tok_s > client_limit.CEILING_SHARE * ceiling[0]
    loaded = (
        overhead > calibration.LOADED_SHARE * e2e
        and overhead > calibration.OVERHEAD_FACTOR * ceiling[1]
    )
    busy = cpu is not None and cpu > client_limit.CPU_SHARE
    assert (marked is not None) == (near or loaded or busy)
    if marked is not None:
        assert ("ceiling" in marked.why) == near
        assert ("null server's" in marked.why) == loaded
        assert ("its own CPU was the limit" in marked.why) == busy


@given(st.none() | st.floats(0, 1.5))
def test_without_a_calibration_only_the_clients_own_cpu_marks_a_case(cpu: float | None) -> None:
    data = Report.from_dict(
        {"configs": [{"label": "b8", "throughput": [case(1, 1e9, 99.0, cpu=cpu)]}]}
    )
    busy = cpu is not None and cpu > client_limit.CPU_SHARE
    assert (client_limit.client_limited(data)[0] is not None) == busy
    # A calibration that could not run: its one ceiling has no tok/s (typed, a ceiling of
    # the wrong type cannot be read at all).
    data.calibration = Calibration(ceilings=[Ceiling(concurrency=1, tok_s=0.0)], error="x")
    assert client_limit.ceilings(data.calibration) == {}
    assert (client_limit.client_limited(data)[0] is not None) == busy


def test_a_client_busy_on_its_own_core_is_named_without_a_calibration() -> None:
    cases = [case(1, 39.0, cpu=0.97), case(4, 14.0, cpu=0.1)]
    cases[1]["case"] = "ctx60-c4-t64-chat"
    data = Report.from_dict({"configs": [{"label": "b8", "throughput": cases}]})
    judge(data, 0.5)
    lines = summary.render(data)
    warnings = [line for line in lines if "client-limited" in line]
    assert len(warnings) == 1, lines
    assert "1 of 2 cases are client-limited" in warnings[0]
    assert "ctx60-c1-t64-chat (b8)" in warnings[0]
    assert "load client's own CPU the limit" in warnings[0]


def sweep() -> dict[str, Any]:
    def config(label: str, algorithm: str, tok_s: float) -> dict[str, Any]:
        found = case(1, tok_s)
        tpot = 3000.0 / tok_s  # the speedup ranks by TPOT: here it follows tok/s
        found["metrics"]["intervals"] = {
            "tok_s": {"values": [tok_s * f for f in (0.98, 1.0, 1.02)]},
            "tpot_ms": {"values": [tpot * f for f in (1.02, 1.0, 0.98)]},
        }
        return {"label": label, "config": {"algorithm": algorithm}, "throughput": [found]}

    return {
        "calibration": CALIBRATION,
        "configs": [
            config("NONE", "NONE", 100.0),
            config("DFLASH budget=8", "DFLASH", 300.0),
            config("DFLASH budget=16", "DFLASH", 900.0),  # 90% of the client's ceiling
        ],
    }


def test_a_client_limited_case_is_left_out_of_the_verdict_and_named_once() -> None:
    data = Report.from_dict(sweep())
    judge(data, 0.5)
    assert data.verdict is not None
    (group,) = data.verdict.groups
    assert group.best == "DFLASH budget=8"
    limited = [c.label for c in data.configs if c.throughput[0].client_limited is not None]
    assert limited == ["DFLASH budget=16"]
    lines = summary.render(data)
    warnings = [line for line in lines if "client-limited" in line]
    assert warnings == [
        "WARNING: 1 of 3 cases are client-limited, left out of the verdict (their tok/s near "
        "this machine's null-server ceiling, the machine loaded, or the load client's own "
        "CPU the limit): "
        "ctx60-c1-t64-chat (DFLASH budget=16)"
    ]
    assert not any("client overhead p99 exceeds" in line for line in lines)
