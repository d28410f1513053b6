"""Which test a pytest-xdist worker runs next, so each host serves one config at a time.

Pure bookkeeping, no xdist: :class:`ConfigPlan` holds the collected tests,
grouped by the config they run under (tests without a config need no server
and go first, to anyone). Groups are taken in collection order (the plugin
sorted them: the non-speculative baseline first); each is assigned to one
host when a worker bound to that host asks for work and its host has nothing
left to hand out. A host's *active* config is its first assigned group with
tests not yet completed: the lease lets workers switch the server only to
it (see :mod:`pytest_specdecode.distributed.lease`), so a config becomes live
once, and only after every test of the group before it has completed.

Invariants that keep this free of deadlocks: a worker receives groups in
order and never an earlier group after a later one; a worker is handed the
next group's first tests before the current one is done (pytest-xdist runs
a test only once the worker holds the one after it, or was told to shut
down), and then waits in the lease. Tests of a crashed worker go back to
their group if no worker moved past it yet, else into a new group for the
same config at the end (the config is then applied again: a crash may have
taken the server with it anyway).

A lost host (:meth:`ConfigPlan.lose_host`) hands its groups with tests left
to one live host, after that host's own groups: its workers move there too
(the scheduler rebinds them), so every worker still receives groups in order.

Under a search (``chosen``: the keys a :class:`Chooser` picks among) those
groups are held back: a host that has nothing left asks the chooser for its
next config (``choose`` of :meth:`ConfigPlan.next_for`) instead of taking the
next group in order; once the chooser stops, :meth:`ConfigPlan.release` hands
the tests of the configs it never chose to anyone (they skip, serving nothing).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class Group:
    """The tests of one config, in one pass (``generation`` > 0: re-run after a crash)."""

    key: str
    generation: int = 0
    pool: deque[int] = field(default_factory=deque)
    incomplete: int = 0
    sent_any: bool = False


class Chooser(Protocol):
    """Who picks the next config of a host (a search), for :class:`ConfigScheduling`.

    ``keys()``: the config keys it picks among (their groups are held back);
    ``ask(host)``: the next key for ``host`` (None: nothing now); ``open``: whether
    it may still pick one (False once it stopped, for good); ``completed(key)``:
    every test of ``key`` (any config's) has completed, its reports are in;
    ``closed(unvisited)``: it stopped, the tests of ``unvisited`` are about to be
    handed out (to skip: the moment to publish their reason).
    """

    @property
    def open(self) -> bool: ...
    def keys(self) -> Collection[str]: ...
    def ask(self, host: str) -> str | None: ...
    def completed(self, key: str) -> None: ...
    def closed(self, unvisited: Sequence[str]) -> None: ...


class ConfigPlan:
    """Tests grouped by config key, handed out per host in group order."""

    def __init__(
        self,
        collection: Sequence[str],
        groups: Mapping[str, str],
        chosen: Collection[str] = (),
    ) -> None:
        self.collection = list(collection)
        self.free: deque[int] = deque()
        self.groups: list[Group] = []
        self.group_of: list[int | None] = []
        by_key: dict[str, int] = {}
        for index, nodeid in enumerate(self.collection):
            key = groups.get(nodeid)
            if key is None:
                self.free.append(index)
                self.group_of.append(None)
                continue
            if key not in by_key:
                by_key[key] = len(self.groups)
                self.groups.append(Group(key))
            group = self.groups[by_key[key]]
            group.pool.append(index)
            group.incomplete += 1
            self.group_of.append(by_key[key])
        # Held back for the chooser: handed out only once it picks them.
        self.held = {g for g, group in enumerate(self.groups) if group.key in chosen}
        self.released: set[str] = set()  # never chosen: their tests skip
        self.unassigned: deque[int] = deque(
            g for g in range(len(self.groups)) if g not in self.held
        )
        self.assigned: dict[str, list[int]] = {}
        self.done: set[int] = set()
        self.down: set[str] = set()

    def key_of(self, index: int) -> str | None:
        """The config key test ``index`` runs under (None: no server needed)."""
        group = self.group_of[index]
        return None if group is None else self.groups[group].key

    def next_for(
        self,
        host: str,
        *,
        orphans: Iterable[str] = (),
        holding: Iterable[int] = (),
        choose: Callable[[], str | None] | None = None,
    ) -> int | None:
        """The next test for a worker bound to ``host``, or None when ``host`` has no more.

        ``orphans`` are hosts no live worker serves any more (their workers
        crashed): their groups' remaining tests move to ``host``. ``holding``
        are the tests the worker holds: it is never handed a group that comes
        before one of theirs (after a lost host's groups joined ``host``'s, a
        worker that moved with them holds groups further down the list).
        ``choose`` (a search) names a held-back config for ``host`` when
        nothing else is left (None: none now).
        """
        if self.free:
            return self.free.popleft()
        mine = self.assigned.setdefault(host, [])
        held = {self.group_of[i] for i in holding} - {None}
        start = max((mine.index(g) for g in held if g in mine), default=0)
        for g in mine[start:]:
            if self.groups[g].pool:
                return self._take(g)
        if self.unassigned:
            g = self.unassigned.popleft()
            mine.append(g)
            return self._take(g)
        for other in orphans:
            if other == host:
                continue
            for g in list(self.assigned.get(other, [])):
                if self.groups[g].pool:
                    self.assigned[other].remove(g)
                    mine.append(g)
                    return self._take(g)
        key = choose() if choose is not None else None
        chosen = self.held_group(key) if key is not None else None
        if chosen is not None:
            self.held.discard(chosen)
            mine.append(chosen)
            return self._take(chosen)
        return None

    def held_group(self, key: str) -> int | None:
        """The held-back group of config ``key`` (None: not held, or already chosen)."""
        return next((g for g in sorted(self.held) if self.groups[g].key == key), None)

    def ahead(self, host: str) -> int:
        """How many of ``host``'s configs have tests left to complete (the live one and
        those waiting for it)."""
        return sum(self.groups[g].incomplete > 0 for g in self.assigned.get(host, []))

    def key_done(self, key: str) -> bool:
        """Whether every test of config ``key`` has completed (none held back or released)."""
        return key not in self.released and all(
            group.incomplete == 0 and g not in self.held
            for g, group in enumerate(self.groups)
            if group.key == key
        )

    def release(self) -> list[str]:
        """The chooser stopped: the tests of the configs it never picked go to anyone, as
        tests without a config do (they skip at setup). Their keys, in group order."""
        keys = []
        for g in sorted(self.held):
            group = self.groups[g]
            keys.append(group.key)
            self.released.add(group.key)
            for index in group.pool:
                self.group_of[index] = None
                self.free.append(index)
            group.pool.clear()
            group.incomplete = 0
        self.held.clear()
        return keys

    def _take(self, g: int) -> int:
        group = self.groups[g]
        group.sent_any = True
        return group.pool.popleft()

    def complete(self, index: int) -> None:
        """Test ``index`` finished (passed, failed or crashed its worker)."""
        if index in self.done:
            return
        self.done.add(index)
        g = self.group_of[index]
        if g is not None:
            self.groups[g].incomplete -= 1

    def put_back(self, indices: Iterable[int]) -> None:
        """Tests handed out but not run (their worker died) go out again, in order."""
        retry: dict[int, int] = {}  # passed group -> its new group
        for index in reversed(list(indices)):
            g = self.group_of[index]
            if g is None:
                self.free.appendleft(index)
                continue
            if not self._passed(g):
                self.groups[g].pool.appendleft(index)
                continue
            if g not in retry:
                old = self.groups[g]
                retry[g] = len(self.groups)
                self.groups.append(Group(old.key, old.generation + 1))
                self.unassigned.append(retry[g])
            new = self.groups[retry[g]]
            self.groups[g].incomplete -= 1
            new.pool.appendleft(index)
            new.incomplete += 1
            self.group_of[index] = retry[g]

    def _passed(self, g: int) -> bool:
        """Whether a later group of the same host has had tests sent (a worker moved on)."""
        for mine in self.assigned.values():
            if g in mine:
                return any(self.groups[later].sent_any for later in mine[mine.index(g) + 1 :])
        return False

    def active_group(self, host: str) -> int | None:
        """The group ``host`` may serve now: its first assigned one with tests to finish."""
        for g in self.assigned.get(host, []):
            if self.groups[g].incomplete > 0:
                return g
        return None

    def active(self, host: str) -> str | None:
        """The config key ``host`` may serve now."""
        g = self.active_group(host)
        return None if g is None else self.groups[g].key

    def lose_host(self, host: str, target: str | None) -> list[int]:
        """``host`` is down: its groups with tests left go to the end of ``target``'s
        (None: no host is left; they stay, and :meth:`where` says so). The moved groups."""
        self.down.add(host)
        if target is None:
            return []
        mine = self.assigned.setdefault(host, [])
        moved = [g for g in mine if self.groups[g].incomplete > 0]
        self.assigned[host] = [g for g in mine if g not in moved]
        self.assigned.setdefault(target, []).extend(moved)
        return moved

    def where(self) -> dict[str, str]:
        """Config key -> the host its latest group runs on ("" when that host is down)."""
        found: dict[str, str] = {}
        # In group order: a config re-run after a crash has a later group, which counts.
        for g, host in sorted((g, h) for h, groups in self.assigned.items() for g in groups):
            found[self.groups[g].key] = "" if host in self.down else host
        return found

    @property
    def exhausted(self) -> bool:
        """Every test has been handed out."""
        return not self.held and not self.free and not any(g.pool for g in self.groups)
