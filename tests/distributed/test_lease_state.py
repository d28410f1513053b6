"""The lease file as a typed value: its JSON as before, any file read without a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.distributed.lease import HostLease
from pytest_specdecode.distributed.lease_state import LeaseState, Switching

names = st.text(min_size=1, max_size=8)
pids = st.integers(1, 2**22)
states = st.builds(
    LeaseState,
    live=st.none() | names,
    server=st.none() | st.dictionaries(names, st.none() | names | pids, max_size=3),
    users=st.dictionaries(names, pids, max_size=4),
    switching=st.none() | st.builds(Switching, names, pids, names),
    failed=st.dictionaries(names, st.text(max_size=20), max_size=3),
    history=st.lists(st.tuples(names, names), max_size=4),
    down=st.none() | names,
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@given(states)
def test_the_state_goes_through_its_file_unchanged(state: LeaseState) -> None:
    assert LeaseState.from_json(json.loads(json.dumps(state.to_json()))) == state


@given(
    st.dictionaries(
        st.sampled_from(["live", "server", "users", "switching", "failed", "history", "down"]),
        json_values,
    )
    | json_values
)
def test_any_json_reads_as_a_state_of_the_right_shapes(data: Any) -> None:
    state = LeaseState.from_json(data)
    assert state.live is None or isinstance(state.live, str)
    assert all(isinstance(w, str) and type(p) is int for w, p in state.users.items())
    assert all(isinstance(m, str) for m in state.failed.values())
    assert all(isinstance(k, str) and isinstance(w, str) for k, w in state.history)
    assert LeaseState.from_json(state.to_json()) == state


def test_a_file_of_an_earlier_worker_reads_the_same(tmp_path: Path) -> None:
    # As the dict-based lease wrote it (indent 1, every key present).
    earlier = {
        "live": "A",
        "server": {"base_url": "http://127.0.0.1:30000", "pgid": 4321, "log": "a.log"},
        "users": {"gw0": 100, "gw1": 999},
        "switching": None,
        "failed": {"C": "C did not come up"},
        "history": [["A", "gw0"]],
        "down": None,
    }
    (tmp_path / "host.json").write_text(json.dumps(earlier, indent=1))
    lease = HostLease(tmp_path, "host", "gw0", pid=100, alive={100}.__contains__)
    with lease._lock:
        state = lease.read()
    assert state == LeaseState(
        live="A",
        server=earlier["server"],  # type: ignore[arg-type]
        users={"gw0": 100},  # gw1 is gone
        failed={"C": "C did not come up"},
        history=[("A", "gw0")],
    )
    lease.leave()
    assert json.loads((tmp_path / "host.json").read_text()) == {**earlier, "users": {}}


def test_a_switcher_that_died_leaves_no_live_config() -> None:
    state = LeaseState(live="A", switching=Switching("gw1", 7, "B"), users={"gw0": 5})
    assert state.without_the_dead({5}.__contains__) == LeaseState(users={"gw0": 5})
