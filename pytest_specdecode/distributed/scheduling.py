"""The xdist scheduler of config tests: per host, one config's tests at a time.

:class:`ConfigScheduling` implements xdist's ``Scheduling`` protocol over the
bookkeeping of :mod:`.schedule`, publishes each host's active config to its
lease (:mod:`.lease`) and, with several hosts, where each config runs
(:mod:`.placement`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.report import report_collection_diff
from xdist.workermanage import WorkerController, parse_tx_spec_config

from pytest_specdecode.distributed.lease import write_active
from pytest_specdecode.distributed.placement import down_hosts, write_placement
from pytest_specdecode.distributed.schedule import Chooser, ConfigPlan
from pytest_specdecode.distributed.shared_files import LEASES, read_groups

# Tests a worker holds: xdist runs a test once the worker holds the next one.
PENDING_PER_WORKER = 2


class ConfigScheduling:
    """xdist scheduling: per host, one config's tests at a time (see :mod:`.schedule`).

    Implements xdist's ``Scheduling`` protocol. ``host_of(worker_id)`` is the
    lease name of the host a worker is bound to; ``publish(host, key, holders)``
    tells that host's lease its active config and the workers holding its
    remaining tests (default: the file the lease reads). ``hosts`` are the
    run's host keys in order (where a lost host's work goes: the next live
    one) and ``names`` how the report names them. ``watch`` is how often the
    thread looks for lost hosts (0: only on xdist's events).
    """

    def __init__(
        self,
        config: pytest.Config,
        log: Producer | None,
        lease_dir: Path,
        host_of: Callable[[str], str],
        *,
        publish: Callable[[str, str | None, list[str]], None] | None = None,
        hosts: Sequence[str] = (),
        names: Mapping[str, str] | None = None,
        watch: float = 0.2,
        chooser: Chooser | None = None,
    ) -> None:
        self.numnodes = len(parse_tx_spec_config(config))
        self.config = config
        self.log = (log or Producer("configsched")).configsched
        self.lease_dir = lease_dir
        self.host_of = host_of
        self._publish = publish or (
            lambda host, key, holders: write_active(lease_dir / LEASES, host, key, holders)
        )
        self.node2collection: dict[WorkerController, list[str]] = {}
        self.node2pending: dict[WorkerController, list[int]] = {}
        self.plan: ConfigPlan | None = None
        self._written: dict[str, tuple[str | None, list[str]]] = {}
        self._outbox: list[tuple[WorkerController, list[int], bool]] = []
        self.hosts = list(hosts)
        self.names = dict(names or {})
        self.moves: dict[str, list[dict[str, str]]] = {}
        self._placement: tuple[dict[str, str], dict[str, list[dict[str, str]]]] | None = None
        # xdist calls from its loop; the watcher thread from its own: one at a time.
        self._lock = threading.RLock()
        self._stopped = threading.Event()
        self._watch = watch
        self._thread: threading.Thread | None = None
        self.chooser = chooser
        self._told: set[str] = set()  # config keys whose completion the chooser heard

    # --- the protocol's properties --------------------------------------

    @property
    def nodes(self) -> list[WorkerController]:
        return list(self.node2pending)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.node2collection) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        if not self.collection_is_completed or self.plan is None or not self.plan.exhausted:
            return False
        return all(len(pending) < PENDING_PER_WORKER for pending in self.node2pending.values())

    @property
    def has_pending(self) -> bool:
        if self.plan is not None and not self.plan.exhausted:
            return True
        return any(self.node2pending.values())

    # --- events -----------------------------------------------------------

    def add_node(self, node: WorkerController) -> None:
        assert node not in self.node2pending
        self.node2pending[node] = []

    def add_node_collection(self, node: WorkerController, collection: Sequence[str]) -> None:
        assert node in self.node2pending
        if self.plan is not None and list(collection) != self.plan.collection:
            first = next(iter(self.node2collection))
            self.log(
                report_collection_diff(
                    self.plan.collection, collection, first.gateway.id, node.gateway.id
                )
            )
            return
        self.node2collection[node] = list(collection)

    def mark_test_complete(
        self, node: WorkerController, item_index: int, duration: float = 0
    ) -> None:
        with self._lock:
            assert self.plan is not None
            self.node2pending[node].remove(item_index)
            self.plan.complete(item_index)
            self._lost_hosts()
            self._tell_completed()
            # A search may have held a worker back (its host had a config queued): any
            # completion can free it, not only its own.
            for other in self.nodes if self.chooser is not None else [node]:
                self._top_up(other)
            self._write_actives()

    def mark_test_pending(self, item: str) -> None:
        with self._lock:
            assert self.plan is not None
            self.plan.put_back([self.plan.collection.index(item)])
            for node in self.nodes:
                self._top_up(node)
            self._write_actives()

    def remove_pending_tests_from_node(
        self, node: WorkerController, indices: Sequence[int]
    ) -> None:
        raise NotImplementedError("ConfigScheduling does not steal tests")

    def remove_node(self, node: WorkerController) -> str | None:
        with self._lock:
            pending = self.node2pending.pop(node)
            if not pending or self.plan is None:
                return None
            # The worker crashed running pending[0]: that test is reported as
            # failed; the ones it held go to the other workers.
            crashed = pending.pop(0)
            self.plan.complete(crashed)
            self.plan.put_back(pending)
            for other in self.nodes:
                self._top_up(other)
            self._write_actives()
            return self.plan.collection[crashed]

    def schedule(self) -> None:
        assert self.collection_is_completed
        with self._lock:
            if self.plan is None:
                collections = list(self.node2collection.values())
                if any(c != collections[0] for c in collections[1:]):
                    self.log("**Different tests collected, aborting run**")
                    return
                chosen = self.chooser.keys() if self.chooser is not None else ()
                self.plan = ConfigPlan(collections[0], read_groups(self.lease_dir), chosen)
                self._start_watching()
            for node in self.nodes:
                self._top_up(node)
            self._write_actives()

    # --- lost hosts -------------------------------------------------------

    def host(self, worker: str) -> str:
        """The host a worker serves: its own, or once that is lost, the live host its
        configs moved to (the first live one after it, as in :meth:`_lost_hosts`)."""
        found = self.host_of(worker)
        if self.plan is not None and found in self.plan.down:
            return self._successor(found) or found
        return found

    def _successor(self, host: str, also_down: Sequence[str] = ()) -> str | None:
        """The live host after ``host`` in the run's order (wrapping), or None."""
        down = set(self.plan.down if self.plan is not None else ()) | set(also_down) | {host}
        i = self.hosts.index(host) if host in self.hosts else -1
        order = self.hosts[i + 1 :] + self.hosts[: i + 1]
        return next((h for h in order if h not in down), None)

    def _start_watching(self) -> None:
        if self._watch <= 0 or self._thread is not None or len(self.hosts) < 2:
            return
        self._thread = threading.Thread(target=self._watching, name="dflash-hosts", daemon=True)
        self._thread.start()

    def _watching(self) -> None:
        while not self._stopped.wait(self._watch):
            with self._lock:
                if self.plan is not None and self._lost_hosts():
                    self._write_actives()

    def stop(self) -> None:
        """End the watcher thread (at session end)."""
        self._stopped.set()

    def _lost_hosts(self) -> bool:
        """Take in the hosts workers found down; True when something moved."""
        plan = self.plan
        if plan is None or len(self.hosts) < 2:
            return False
        found = {h: r for h, r in down_hosts(self.lease_dir).items() if h not in plan.down}
        for host, reason in found.items():
            target = self._successor(host, also_down=list(found))
            moved = plan.lose_host(host, target)
            for g in moved:
                self.moves.setdefault(plan.groups[g].key, []).append(
                    {
                        "from": self.names.get(host, host),
                        "to": self.names.get(target or "", target or ""),
                        "reason": reason,
                    }
                )
            self.log(f"host {host} lost ({reason}): {len(moved)} config(s) moved to {target}")
        return bool(found)

    # --- helpers ----------------------------------------------------------

    def has_configs(self) -> bool:
        """Whether any collected test runs under a config (the workers wrote their groups)."""
        return bool(read_groups(self.lease_dir))

    def _tell_completed(self) -> None:
        """Tell the chooser of every config whose tests have all completed (once each)."""
        plan, chooser = self.plan, self.chooser
        if plan is None or chooser is None:
            return
        for key in dict.fromkeys(group.key for group in plan.groups):
            if key not in self._told and plan.key_done(key):
                self._told.add(key)
                chooser.completed(key)

    def _choose(self, host: str, stuck: bool) -> str | None:
        """A search's next config for ``host``: asked only when ``host`` has at most one
        config left to finish (the one whose last tests are running), so each config is
        chosen knowing every config finished before it; or when the worker asking is
        ``stuck`` (it holds one test, which it runs only once it holds the next: after a
        lost host's config joined this host's, say)."""
        plan, chooser = self.plan, self.chooser
        if plan is None or chooser is None or host in plan.down:
            return None
        if plan.ahead(host) > 1 and not stuck:
            return None
        key = chooser.ask(host) if chooser.open else None
        if key is None and not chooser.open and plan.held:
            unvisited = [plan.groups[g].key for g in sorted(plan.held)]
            chooser.closed(unvisited)  # before their tests go out: workers read the reasons
            plan.release()
        return key

    def _top_up(self, node: WorkerController) -> None:
        if self.plan is None or node.shutting_down:
            return
        host = self.host(node.gateway.id)
        served = {self.host(n.gateway.id) for n in self.nodes if not n.shutting_down}
        orphans = [h for h in self.plan.assigned if h not in served]
        pending = self.node2pending[node]
        sent: list[int] = []
        ran_out = False
        choose = None
        if self.chooser is not None:
            choose = lambda: self._choose(host, len(pending) == 1)  # noqa: E731
        while len(pending) < PENDING_PER_WORKER:
            index = self.plan.next_for(host, orphans=orphans, holding=pending, choose=choose)
            if index is None and self.plan.free:
                continue  # the search just stopped: its unvisited tests were released
            if index is None:
                # A search still going may pick a config for this host later.
                ran_out = self.chooser is None or not self.chooser.open
                break
            pending.append(index)
            sent.append(index)
        # Sent by _write_actives, after the lease files say what is active: a worker
        # must never reach the lease before the scheduler's word is there (it would
        # take the host as unscheduled and switch to whatever config it holds).
        self._outbox.append((node, sent, ran_out))

    def _write_actives(self) -> None:
        """Publish each host's active config, then send what :meth:`_top_up` handed out."""
        self._publish_actives()
        outbox, self._outbox = self._outbox, []
        for node, sent, ran_out in outbox:
            if sent:
                node.send_runtest_some(sent)
            if ran_out:
                # Nothing more for this host: the worker runs what it holds and ends.
                node.shutdown()

    def _publish_actives(self) -> None:
        plan = self.plan
        if plan is None:
            return
        for host in plan.assigned:
            g = plan.active_group(host)
            key = None if g is None else plan.groups[g].key
            holders = sorted(
                node.gateway.id
                for node, pending in self.node2pending.items()
                if g is not None and any(plan.group_of[i] == g for i in pending)
            )
            if self._written.get(host) != (key, holders):
                self._publish(host, key, holders)
                self._written[host] = (key, holders)
        if len(self.hosts) < 2:
            return  # one host: nowhere to move to, nobody reads the placement
        placement = (plan.where(), {k: list(v) for k, v in self.moves.items()})
        if placement != self._placement:
            write_placement(self.lease_dir, *placement)
            self._placement = placement
