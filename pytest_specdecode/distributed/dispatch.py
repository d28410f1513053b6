"""Which xdist scheduler runs a session: ours only when tests run under a config.

The plugin is installed for every pytest run of its environment, so replacing
pytest-xdist's scheduler in a run with no ``dflash`` config (a project's own
unit tests, say) would silently ignore the user's ``--dist``. This scheduler
stands between xdist and two others: :class:`ConfigScheduling` (one config
per host at a time) and the one xdist (or another plugin) would have used.
Until every worker's collection is in (or the first :meth:`schedule`) both see
every worker and its collection; then one is chosen for the rest of the
session: ours when any collected test runs under a config, else theirs. A
``--dist`` mode ours replaces for config tests is said once (``note``), never
dropped in silence; a run handed to theirs is told apart from one without the
plugin by nothing, not even xdist's ``scheduling tests via ...`` line (which
reads ``__class__``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

# --dist modes ConfigScheduling stands in for without a word: "load" is
# xdist's default with -n, and what ours does for tests without a config.
QUIET_MODES = frozenset({"load", "no"})


class _Scheduling(Protocol):
    """pytest-xdist's ``Scheduling`` protocol, as far as this module calls it."""

    @property
    def nodes(self) -> Sequence[Any]: ...
    @property
    def collection_is_completed(self) -> bool: ...
    @property
    def tests_finished(self) -> bool: ...
    @property
    def has_pending(self) -> bool: ...
    def add_node(self, node: Any) -> None: ...
    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None: ...
    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None: ...
    def mark_test_pending(self, item: str) -> None: ...
    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None: ...
    def remove_node(self, node: Any) -> str | None: ...
    def schedule(self) -> None: ...


class DispatchScheduling:
    """xdist's ``Scheduling`` protocol, passed on to ``ours`` or ``theirs``.

    ``has_configs()`` says, at the first :meth:`schedule`, whether any
    collected test runs under a config; ``dist`` is the session's ``--dist``
    and ``note`` where to say that ours replaces it.
    """

    def __init__(
        self,
        ours: _Scheduling,
        theirs: _Scheduling | None,
        has_configs: Callable[[], bool],
        *,
        dist: str = "load",
        note: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.ours = ours
        self.theirs = theirs
        self._has_configs = has_configs
        self._dist = dist
        self._note = note
        self.chosen: _Scheduling | None = None

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # xdist names the scheduler by ``sched.__class__.__name__`` once the collection is
        # in (after the choice): the chosen one's name. type() still says what this is.
        return type(self.chosen) if self.chosen is not None else type(self)

    @property
    def uses_ours(self) -> bool:
        """Whether config scheduling runs this session (before the choice: assumed)."""
        return self.chosen is None or self.chosen is self.ours

    def _both(self) -> list[_Scheduling]:
        if self.chosen is not None:
            return [self.chosen]
        return [self.ours] + ([self.theirs] if self.theirs is not None else [])

    @property
    def _current(self) -> _Scheduling:
        return self.chosen or self.ours

    # --- the protocol -----------------------------------------------------

    @property
    def nodes(self) -> Sequence[Any]:
        return self._current.nodes

    @property
    def collection_is_completed(self) -> bool:
        return self._current.collection_is_completed

    @property
    def tests_finished(self) -> bool:
        return self._current.tests_finished

    @property
    def has_pending(self) -> bool:
        return self._current.has_pending

    def add_node(self, node: Any) -> None:
        for scheduler in self._both():
            scheduler.add_node(node)

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        for scheduler in self._both():
            scheduler.add_node_collection(node, collection)
        # Every worker wrote its groups before reporting its collection: the choice can be
        # made now, so what xdist asks next (has_pending, the name) is the chosen one's.
        if self.chosen is None and self.ours.collection_is_completed:
            self.chosen = self._choose()

    def remove_node(self, node: Any) -> str | None:
        found = [scheduler.remove_node(node) for scheduler in self._both()]
        return found[0]

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        self._current.mark_test_complete(node, item_index, duration)

    def mark_test_pending(self, item: str) -> None:
        self._current.mark_test_pending(item)

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        self._current.remove_pending_tests_from_node(node, indices)

    def schedule(self) -> None:
        if self.chosen is None:
            self.chosen = self._choose()
        self.chosen.schedule()

    def _choose(self) -> _Scheduling:
        if self.theirs is None:
            return self.ours
        if not self._has_configs():
            return self.theirs
        if self._dist not in QUIET_MODES:
            self._note(
                f"dflash: --dist {self._dist} is not used for this run: tests under a dflash "
                "config are scheduled one config per host at a time (tests without a config "
                "go to any worker)"
            )
        return self.ours
