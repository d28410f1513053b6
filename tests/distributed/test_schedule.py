"""The config scheduler: each host serves one config at a time, each config once.

The scheduler runs against fake xdist workers that behave as real ones do: a
worker runs a test only when it holds the next one too (or was told to shut
down), and a test of a config waits (in the lease) until its host's active
config is that one. Random timings over many seeds, the interleaved
two-config case of the defect, several hosts, and a crashed worker.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode.distributed.placement import read_placement, write_down
from pytest_specdecode.distributed.schedule import ConfigPlan
from pytest_specdecode.distributed.scheduling import ConfigScheduling
from pytest_specdecode.distributed.shared_files import GROUPS


@dataclass
class Gateway:
    id: str


@dataclass(eq=False)
class FakeNode:
    """A worker: holds what it was sent, runs a test once it holds two or is shutting down."""

    gateway: Gateway
    held: list[int] = field(default_factory=list)
    shutting_down: bool = False
    # Called on every send: a real worker may start a test the moment it arrives.
    on_send: Callable[[FakeNode], None] | None = None

    def send_runtest_some(self, indices: list[int]) -> None:
        assert not self.shutting_down, "sent tests after shutdown"
        self.held.extend(indices)
        if self.on_send is not None:
            self.on_send(self)

    def shutdown(self) -> None:
        self.shutting_down = True

    def can_run(self) -> bool:
        return len(self.held) >= 2 or (self.shutting_down and bool(self.held))


class FakeConfig:
    """Just what ``parse_tx_spec_config`` reads: ``-n N``."""

    def __init__(self, workers: int) -> None:
        self.option = type("Opt", (), {"tx": [f"{workers}*popen"], "dist": "load"})()

    def getvalue(self, name: str) -> Any:
        return getattr(self.option, name, None)

    def getoption(self, name: str) -> Any:
        return getattr(self.option, name, None)


def interleaved(n: int = 12) -> tuple[list[str], dict[str, str]]:
    """The defect's case after the plugin sorted it: budget 4 tests, then budget 8 tests."""
    ids = [f"test_m.py::test_{i:02d}" for i in range(n)]
    groups = {nodeid: ("b4" if i % 2 == 0 else "b8") for i, nodeid in enumerate(ids)}
    ordered = sorted(ids, key=lambda nodeid: groups[nodeid])
    return ordered, groups


def simulate(
    tmp_path: Path,
    collection: list[str],
    groups: dict[str, str],
    *,
    workers: int,
    host_of: Callable[[str], str],
    seed: int,
    crash: int | None = None,
    hosts: list[str] | None = None,
    lose: tuple[int, str] | None = None,
    chooser: FakeChooser | None = None,
) -> dict[str, list[str]]:
    """Run the schedule to the end; return each host's sequence of live configs.

    ``lose=(n, host)``: after the n-th test ran, a worker reports ``host`` down."""
    (tmp_path / GROUPS).write_text(json.dumps(groups))
    shutil.rmtree(tmp_path / "down", ignore_errors=True)
    published: dict[str, str | None] = {}

    def publish(host: str, key: str | None, holders: list[str]) -> None:
        published[host] = key

    sched = ConfigScheduling(
        FakeConfig(workers),  # type: ignore[arg-type]
        None,
        tmp_path,
        host_of,
        publish=publish,
        hosts=hosts or [],
        watch=0,
        chooser=chooser,
    )
    if chooser is not None:
        chooser.sched = sched

    def arrived(node: FakeNode) -> None:
        # The worker's lease reads the host's active config as the test arrives: it
        # must be published by then (else the lease takes the host as unscheduled).
        assert sched.plan is not None
        host = sched.host(node.gateway.id)
        assert published.get(host) == sched.plan.active(host), "sent before published"

    nodes = [FakeNode(Gateway(f"gw{i}"), on_send=arrived) for i in range(workers)]
    for node in nodes:
        sched.add_node(node)
    for node in nodes:
        sched.add_node_collection(node, collection)
    assert sched.collection_is_completed
    sched.schedule()
    rng = random.Random(seed)
    live: dict[str, list[str]] = {}
    ran = 0
    while sched.has_pending:
        assert sched.plan is not None
        runnable = []
        for node in nodes:
            if not node.can_run():
                continue
            key = sched.plan.key_of(node.held[0])
            host = sched.host(node.gateway.id)
            assert published.get(host) == sched.plan.active(host)
            if key is None or published.get(host) == key:
                runnable.append(node)
        assert runnable, f"deadlock: {[(n.gateway.id, n.held) for n in nodes]}"
        node = rng.choice(runnable)
        index = node.held[0]
        key = sched.plan.key_of(index)
        host = sched.host(node.gateway.id)
        if key is not None and (not live.get(host) or live[host][-1] != key):
            live.setdefault(host, []).append(key)
        ran += 1
        if chooser is not None:
            chooser.ran.append(collection[index])
        if lose is not None and ran == lose[0]:
            write_down(tmp_path, lose[1], "SSH connection refused", node.gateway.id, "?")
        if crash is not None and ran == crash:
            node.held.clear()
            nodes.remove(node)
            crashed = sched.remove_node(node)
            assert crashed == collection[index]
            replacement = FakeNode(Gateway(f"gw{workers + len(nodes)}"), on_send=arrived)
            nodes.append(replacement)
            sched.add_node(replacement)
            sched.add_node_collection(replacement, collection)
            sched.schedule()
            continue
        node.held.pop(0)
        sched.mark_test_complete(node, index)
        for done in [n for n in nodes if n.shutting_down and not n.held]:
            nodes.remove(done)  # the worker ends: xdist removes it
            assert sched.remove_node(done) is None
    assert not nodes, "every worker was told to shut down"
    assert sched.tests_finished
    return live


@pytest.mark.parametrize("workers", [2, 4])
def test_interleaved_configs_start_once_each_whatever_the_timing(
    tmp_path: Path, workers: int
) -> None:
    collection, groups = interleaved()
    for seed in range(200):
        live = simulate(
            tmp_path, collection, groups, workers=workers, host_of=lambda w: "h", seed=seed
        )
        assert live == {"h": ["b4", "b8"]}, seed


def test_each_config_runs_on_one_host_and_hosts_work_in_parallel(tmp_path: Path) -> None:
    ids = [f"t::c{c}_{n}" for c in range(8) for n in range(3)] + ["t::plain"]
    groups = {nodeid: nodeid.split("::")[1].split("_")[0] for nodeid in ids if "_" in nodeid}
    hosts = {"gw0": "h1", "gw1": "h2", "gw2": "h1", "gw3": "h2"}
    for seed in range(50):
        live = simulate(tmp_path, ids, groups, workers=4, host_of=hosts.__getitem__, seed=seed)
        applied = [key for keys in live.values() for key in keys]
        assert sorted(applied) == sorted(set(groups.values())), (seed, live)
        assert len(live) == 2


def test_a_crashed_worker_does_not_bring_a_config_back(tmp_path: Path) -> None:
    collection, groups = interleaved()
    for seed in range(50):
        for crash in (1, 3, 6, 9):
            live = simulate(
                tmp_path,
                collection,
                groups,
                workers=2,
                host_of=lambda w: "h",
                seed=seed,
                crash=crash,
            )
            assert live == {"h": ["b4", "b8"]}, (seed, crash)


class FakeChooser:
    """A search over every config key but ``head``: picks at random, at most ``budget``."""

    def __init__(self, groups: dict[str, str], budget: int, seed: int, head: str = "") -> None:
        self.groups = groups
        self.budget = budget
        self.rng = random.Random(seed)
        self.head = head
        self.open = True
        self.asked: list[tuple[str, str]] = []  # (host, key)
        self.told: list[str] = []
        self.unvisited: list[str] | None = None
        self.ran: list[str] = []  # test ids in the order they ran
        self.sched: ConfigScheduling | None = None
        self.crowded = 0  # asks while the host had two configs left to finish

    def keys(self) -> list[str]:
        return sorted({k for k in self.groups.values() if k != self.head})

    def ask(self, host: str) -> str | None:
        assert self.sched is not None
        assert self.sched.plan is not None
        # Asked only while the host has at most one config left to finish, or a worker
        # would be stuck (after a lost host's config joined this host's).
        self.crowded += self.sched.plan.ahead(host) > 1
        free = [k for k in self.keys() if k not in {key for _, key in self.asked}]
        if len(self.asked) >= self.budget or not free:
            self.open = False
            return None
        key = self.rng.choice(free)
        assert host not in self.sched.plan.down, "asked for a lost host"
        self.asked.append((host, key))
        return key

    def completed(self, key: str) -> None:
        tests = [t for t, k in self.groups.items() if k == key]
        assert set(tests) <= set(self.ran), f"{key} told before its tests ran"
        assert key not in self.told
        self.told.append(key)

    def closed(self, unvisited: Sequence[str]) -> None:
        assert self.unvisited is None
        assert not {t for t in self.ran if self.groups.get(t) in unvisited}
        self.unvisited = list(unvisited)


@pytest.mark.parametrize("tests_per_config", [1, 3])
def test_a_search_asks_each_host_for_one_config_at_a_time(
    tmp_path: Path, tests_per_config: int
) -> None:
    ids = [f"t::base_{n}" for n in range(2)]
    ids += [f"t::c{c}_{n}" for c in range(6) for n in range(tests_per_config)]
    groups = {nodeid: nodeid.split("::")[1].split("_")[0] for nodeid in ids}
    both = 0
    for seed in range(40):
        chooser = FakeChooser(groups, budget=3, seed=seed, head="base")
        live = simulate(
            tmp_path, ids, groups, workers=2, host_of={"gw0": "h1", "gw1": "h2"}.__getitem__,
            seed=seed, hosts=["h1", "h2"], chooser=chooser,
        )  # fmt: skip
        asked = [key for _, key in chooser.asked]
        assert len(asked) == 3, (seed, chooser.asked)
        assert chooser.crowded == 0, (seed, chooser.asked)
        both += {host for host, _ in chooser.asked} == {"h1", "h2"}
        # What ran under a config is the baseline and the asked ones, each once on one host.
        applied = [key for keys in live.values() for key in keys]
        assert sorted(applied) == sorted(["base", *asked]), (seed, live)
        assert sorted(chooser.told) == sorted(["base", *asked])
        assert chooser.unvisited is not None
        assert sorted(chooser.unvisited) == sorted(set(chooser.keys()) - set(asked))
        # Every test was handed out and run: the unvisited ones too (they skip).
        assert sorted(chooser.ran) == sorted(ids), seed
    # The hosts work in parallel (a fast host may also take every config of a run).
    assert both > 10


@pytest.mark.parametrize("lost_after", [1, 3])
def test_a_search_finishes_a_lost_hosts_config_on_the_other_host(
    tmp_path: Path, lost_after: int
) -> None:
    ids = [f"t::c{c}_{n}" for c in range(6) for n in range(2)]
    groups = {nodeid: nodeid.split("::")[1].split("_")[0] for nodeid in ids}
    for seed in range(20):
        chooser = FakeChooser(groups, budget=4, seed=seed)
        live = simulate(
            tmp_path, ids, groups, workers=2, host_of={"gw0": "h1", "gw1": "h2"}.__getitem__,
            seed=seed, hosts=["h1", "h2"], chooser=chooser, lose=(lost_after, "h2"),
        )  # fmt: skip
        asked = {key for _, key in chooser.asked}
        assert len(asked) == 4, (seed, chooser.asked)
        # Every config asked ran to the end and was told once; h2 took none once lost.
        assert sorted(chooser.told) == sorted(asked), (seed, chooser.told)
        assert {key for keys in live.values() for key in keys} == asked, (seed, live)
        assert chooser.sched is not None
        assert chooser.sched.plan is not None
        assert chooser.sched.plan.down == {"h2"}
        placement = read_placement(tmp_path)
        assert placement is not None
        assert "h2" not in placement["where"].values(), (seed, placement)


def nine_configs() -> tuple[list[str], dict[str, str]]:
    ids = [f"t::c{c}_{n}" for c in range(9) for n in range(2)]
    return ids, {nodeid: nodeid.split("::")[1].split("_")[0] for nodeid in ids}


THREE = {"gw0": "h1", "gw1": "h2", "gw2": "h3", "gw3": "h1", "gw4": "h2", "gw5": "h3"}


@pytest.mark.parametrize("lost_after", [2, 6, 11])
def test_a_lost_hosts_configs_finish_on_the_next_host_whatever_the_timing(
    tmp_path: Path, lost_after: int
) -> None:
    ids, groups = nine_configs()
    for seed in range(15):
        live = simulate(
            tmp_path, ids, groups, workers=6, host_of=THREE.__getitem__, seed=seed,
            hosts=["h1", "h2", "h3"], lose=(lost_after, "h3"),
        )  # fmt: skip
        # Every config ran (the simulation checked every test completed), none twice on
        # one host; h3 took no new config once lost (a config it had started may rerun).
        for keys in live.values():
            assert len(keys) == len(set(keys)), (seed, live)
        applied = {key for keys in live.values() for key in keys}
        assert applied == set(groups.values()), (seed, live)
        placement = read_placement(tmp_path)
        assert placement is not None
        where = placement["where"]
        assert "h3" not in where.values(), (seed, where)
        for key, moves in placement["moves"].items():
            assert [(m["from"], m["to"]) for m in moves] == [("h3", "h1")], (seed, key)
            assert moves[0]["reason"] == "SSH connection refused"
            assert where[key] == "h1"


def test_the_watcher_moves_a_lost_hosts_config_when_no_event_would_come(tmp_path: Path) -> None:
    # Every other worker is done: only the lost host's worker holds tests, and it
    # waits. No xdist event will come, so the scheduler's thread must move the config.
    ids = ["t::a_0", "t::a_1", "t::b_0", "t::b_1"]
    (tmp_path / GROUPS).write_text(json.dumps({i: i[3] for i in ids}))
    sched = ConfigScheduling(
        FakeConfig(2), None, tmp_path, {"gw0": "h1", "gw1": "h2"}.__getitem__,  # type: ignore[arg-type]
        publish=lambda *a: None, hosts=["h1", "h2"], watch=0.01,
    )  # fmt: skip
    nodes = [FakeNode(Gateway("gw0")), FakeNode(Gateway("gw1"))]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, ids)
    sched.schedule()
    try:
        assert sched.plan is not None
        assert read_placement(tmp_path) == {"where": {"a": "h1", "b": "h2"}, "moves": {}}
        write_down(tmp_path, "h2", "no answer over SSH", "gw1", "b")
        deadline = time.monotonic() + 10
        while (read_placement(tmp_path) or {}).get("where", {}).get("b") != "h1":
            assert time.monotonic() < deadline, read_placement(tmp_path)
            time.sleep(0.01)
        assert sched.host("gw1") == "h1"
        assert sched.plan.active("h1") == "a"  # b comes after h1's own config
    finally:
        sched.stop()


def test_with_every_host_lost_configs_are_published_as_nowhere(tmp_path: Path) -> None:
    plan = ConfigPlan(["a1", "b1"], {"a1": "A", "b1": "B"})
    assert plan.next_for("h1") == 0
    assert plan.next_for("h2") == 1
    assert plan.lose_host("h2", "h1") == [1]
    assert plan.where() == {"A": "h1", "B": "h1"}
    assert plan.lose_host("h1", None) == []
    assert plan.where() == {"A": "", "B": ""}


def test_the_plan_hands_out_free_tests_first_and_configs_in_order() -> None:
    plan = ConfigPlan(["a1", "free", "a2", "b1"], {"a1": "A", "a2": "A", "b1": "B"})
    assert plan.next_for("h") == 1  # no config: no server needed
    assert plan.active("h") is None
    assert [plan.next_for("h"), plan.next_for("h")] == [0, 2]
    assert plan.active("h") == "A"
    assert plan.next_for("h") == 3  # looked ahead to B, but A stays active
    assert plan.active("h") == "A"
    plan.complete(0)
    plan.complete(2)
    assert plan.active("h") == "B"
    assert plan.next_for("h") is None
    assert plan.exhausted


def test_without_configs_xdist_keeps_the_users_dist(pytester: pytest.Pytester) -> None:
    # A project's own tests, the plugin merely installed: --dist each runs every
    # test on every worker, as xdist promises (config scheduling would run it once).
    pytester.makepyfile(test_plain="def test_a():\n    pass\n")
    result = pytester.runpytest("-n", "2", "--dist", "each", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert "is not used for this run" not in result.stdout.str()
