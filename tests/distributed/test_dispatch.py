"""Which scheduler runs an xdist session: ours only when a test runs under a config."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_specdecode.distributed.dispatch import DispatchScheduling


class Recording:
    """A scheduler that records the protocol calls it gets."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[tuple[str, Any]] = []
        self._nodes: list[Any] = []

    @property
    def nodes(self) -> Sequence[Any]:
        return self._nodes

    @property
    def collection_is_completed(self) -> bool:
        return len(self._nodes) == 2

    @property
    def tests_finished(self) -> bool:
        return self.name == "theirs"

    @property
    def has_pending(self) -> bool:
        return self.name == "ours"

    def add_node(self, node: Any) -> None:
        self._nodes.append(node)
        self.calls.append(("add_node", node))

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        self.calls.append(("collection", (node, list(collection))))

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        self.calls.append(("complete", item_index))

    def mark_test_pending(self, item: str) -> None:
        self.calls.append(("pending", item))

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        self.calls.append(("steal", list(indices)))

    def remove_node(self, node: Any) -> str | None:
        self._nodes.remove(node)
        self.calls.append(("remove", node))
        return f"{self.name}-crashed"

    def schedule(self) -> None:
        self.calls.append(("schedule", None))


def session(
    has_configs: bool, dist: str = "load"
) -> tuple[DispatchScheduling, Recording, Recording, list[str]]:
    ours, theirs = Recording("ours"), Recording("theirs")
    notes: list[str] = []
    dispatch = DispatchScheduling(ours, theirs, lambda: has_configs, dist=dist, note=notes.append)
    for node in ("gw0", "gw1"):
        dispatch.add_node(node)
        dispatch.add_node_collection(node, ["t::a", "t::b"])
    return dispatch, ours, theirs, notes


def test_until_the_choice_both_see_every_worker_and_its_collection() -> None:
    dispatch, ours, theirs, _ = session(has_configs=False)
    assert ours.calls == theirs.calls
    assert [c for c, _ in ours.calls] == ["add_node", "collection"] * 2
    assert dispatch.collection_is_completed


def test_without_configs_xdist_s_own_scheduler_runs_the_session() -> None:
    dispatch, ours, theirs, notes = session(has_configs=False, dist="loadfile")
    dispatch.schedule()
    dispatch.mark_test_complete("gw0", 1)
    dispatch.mark_test_pending("t::a")
    dispatch.remove_pending_tests_from_node("gw1", [0])
    assert dispatch.remove_node("gw1") == "theirs-crashed"
    assert dispatch.tests_finished
    assert not dispatch.uses_ours
    assert [c for c, _ in theirs.calls[4:]] == [
        "schedule",
        "complete",
        "pending",
        "steal",
        "remove",
    ]
    assert len(ours.calls) == 4  # nothing after the choice
    assert notes == []  # the user's --dist is what runs


def test_with_configs_ours_runs_and_a_replaced_dist_is_said_once() -> None:
    dispatch, ours, theirs, notes = session(has_configs=True, dist="loadfile")
    dispatch.schedule()
    dispatch.schedule()
    dispatch.mark_test_complete("gw0", 0)
    assert dispatch.has_pending
    assert dispatch.uses_ours
    assert [c for c, _ in ours.calls[4:]] == ["schedule", "schedule", "complete"]
    assert len(theirs.calls) == 4
    assert len(notes) == 1
    assert notes[0].startswith("dflash: --dist loadfile is not used for this run")


def test_the_default_dist_is_replaced_without_a_word() -> None:
    dispatch, _, _, notes = session(has_configs=True, dist="load")
    dispatch.schedule()
    assert notes == []


def test_without_another_scheduler_ours_runs() -> None:
    ours = Recording("ours")
    dispatch = DispatchScheduling(ours, None, lambda: False)
    dispatch.add_node("gw0")
    dispatch.schedule()
    assert dispatch.uses_ours
    assert ours.calls[-1] == ("schedule", None)
