"""pytest-xdist support: the controller schedules by config; workers share servers.

Registered only when pytest-xdist runs the session with workers. The
controller process makes a lease directory and, for the local simulator, one
port, and hands both to every worker (``pytest_configure_node``); each worker
binds to one host (worker N to host N modulo the number of hosts) and takes
its server through :class:`pytest_specdecode.service.lease.HostLease`.

Workers write which config each collected test runs under to the lease
directory; the controller schedules with :class:`ConfigScheduling`, which
hands each host one config's tests at a time (:mod:`.schedule`) and tells the
lease which config each host may switch to. So each config starts once, by
construction, however the workers' timing falls. A worker that finds its
host down says so in the lease directory (:mod:`.placement`); the scheduler,
which watches for that in a thread of its own (the other workers may all be
idle, so no event would come), moves the host's configs not yet done and its
workers to a live host and publishes where each config runs now. At the end the controller
stops the local servers the workers left running.

Under ``--dflash-search`` with several hosts, a :class:`~.schedule.Chooser`
(the search, registered by :mod:`pytest_specdecode.search.loop`) picks each
host's next config when the host has nothing left; it hears when a config's
tests are done (their reports have reached this process by then).

Throughput cases need the server to themselves: pytest-benchmark switches
itself off under xdist, and a case is measured by the plugin's own load
client only where each worker holds its host alone (:func:`holds_host_alone`);
elsewhere it skips.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from xdist.remote import Producer
from xdist.report import report_collection_diff
from xdist.workermanage import WorkerController, parse_tx_spec_config

from pytest_specdecode import statefiles
from pytest_specdecode.config.settings import Host, Settings, SettingsError
from pytest_specdecode.config.spec import SpecConfig
from pytest_specdecode.service.lease import HostLease, write_active
from pytest_specdecode.service.local import stop_group_id
from pytest_specdecode.service.ownership import Registry
from pytest_specdecode.service.placement import (
    SharedPlacement,
    down_hosts,
    host_key,
    write_placement,
)
from pytest_specdecode.service.schedule import Chooser, ConfigPlan
from pytest_specdecode.service.shared_files import (
    GROUPS,
    LEASE_DIR,
    planned_tests,
    read_carried,
    read_groups,
    share_resume,
    shared_resume,
    write_carried,
    write_groups,
)
from pytest_specdecode.service.xdist_dispatch import DispatchScheduling

__all__ = [
    "GROUPS",
    "LEASE_DIR",
    "ConfigScheduling",
    "XdistController",
    "host_key",
    "planned_tests",
    "read_carried",
    "share_resume",
    "shared_resume",
    "worker_lease",
    "write_carried",
    "write_groups",
]

PORT = "dflash_port"
LEASES = "leases"
# Tests a worker holds: xdist runs a test once the worker holds the next one.
PENDING_PER_WORKER = 2


def is_xdist_controller(config: pytest.Config) -> bool:
    """Whether this process hands tests to xdist workers (``-n N`` with N >= 1)."""
    return bool(
        config.pluginmanager.hasplugin("xdist")
        and not hasattr(config, "workerinput")
        and getattr(config.option, "numprocesses", None)
        and getattr(config.option, "dist", "no") != "no"
    )


def check_options(config: pytest.Config, settings: Settings) -> None:
    """Option combinations that cannot work with workers; :class:`SettingsError` says why."""
    if not is_xdist_controller(config):
        return
    if settings.restore:
        raise SettingsError(
            "--dflash-restore does not work with -n: run the restore in a run without workers"
        )


def serial_for_dry_run(config: pytest.Config) -> int:
    """A dry run plans in this process, so xdist must start no workers (a worker may start
    nothing either, but would need collecting and scheduling for it). Returns the ``-n``
    given, for the plan; called before xdist's own ``pytest_configure``."""
    if not is_xdist_controller(config):
        return 0
    workers = int(config.option.numprocesses or 0)
    config.option.dist = "no"
    config.option.tx = []
    config.option.numprocesses = 0
    return workers


def config_key(config: SpecConfig) -> str:
    """The key of a config in lease files and the controller's schedule: its canonical key."""
    return config.key()


def worker_index(worker: str) -> int:
    """``gw3`` -> 3."""
    return int("".join(ch for ch in worker if ch.isdigit()) or 0)


def bound_host(settings: Settings, worker: str) -> Host | None:
    """The host worker ``worker`` is bound to (N modulo the number of hosts)."""
    if not settings.hosts:
        return None
    return settings.hosts[worker_index(worker) % len(settings.hosts)]


def parallel_hosts(config: pytest.Config, settings: Settings) -> int:
    """How many hosts serve configs at once: under xdist, those that have workers."""
    if not is_xdist_controller(config):
        return 1
    workers = int(config.option.numprocesses or 1)
    return max(1, min(workers, len(settings.hosts) if settings.remote else 1))


def holds_host_alone(config: pytest.Config, settings: Settings, current: Host | None) -> bool:
    """On an xdist worker: whether no other worker can use its server while it measures.

    True when the hosts are remote and distinct per worker (no more workers than
    hosts, worker N on host N) and no host of the run was lost (a lost host's
    workers move to a live host, which they then share with its own)."""
    info: dict[str, Any] | None = getattr(config, "workerinput", None)
    if not info or not settings.remote or len(settings.hosts) < 2 or LEASE_DIR not in info:
        return False
    if down_hosts(Path(info[LEASE_DIR])):
        return False
    workers = int(info.get("workercount") or 0)
    if not 0 < workers <= len(settings.hosts):
        return False
    bound = bound_host(settings, str(info.get("workerid", "")))
    return bound is not None and current == bound


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
        if not self.collection_is_completed or self.plan is None:
            return False
        if not self.plan.exhausted:
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
            return self._remove_node(node)

    def _remove_node(self, node: WorkerController) -> str | None:
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
                self.plan = ConfigPlan(collections[0], self._read_groups(), chosen)
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
        return bool(self._read_groups())

    def _read_groups(self) -> dict[str, str]:
        return read_groups(self.lease_dir)

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


class XdistController:
    """Controller-side hooks: share the lease directory and port, schedule, clean up."""

    def __init__(self, settings: Settings, port: int) -> None:
        self.settings = settings
        self.port = port
        self.lease_dir = Path(tempfile.mkdtemp(prefix="dflash-lease-"))
        self.scheduler: ConfigScheduling | None = None
        self.chooser: Chooser | None = None  # set by a search over several hosts

    def host_of(self, worker: str) -> str:
        return host_key(self.settings, bound_host(self.settings, worker), self.port)

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Producer) -> Any:
        names = {host_key(self.settings, h, self.port): str(h) for h in self.settings.hosts}
        self.scheduler = ConfigScheduling(
            config,
            log,
            self.lease_dir,
            self.host_of,
            hosts=list(names),
            names=names,
            chooser=self.chooser,
        )
        # What xdist (or another plugin) would run: used when no test has a config.
        theirs = config.pluginmanager.subset_hook_caller(
            "pytest_xdist_make_scheduler", remove_plugins=[self]
        )(config=config, log=log)
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        return DispatchScheduling(
            self.scheduler,
            theirs,
            self.scheduler.has_configs,
            dist=str(config.getoption("dist", "load")),
            note=reporter.write_line if reporter is not None else lambda line: None,
        )

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[LEASE_DIR] = str(self.lease_dir)
        node.workerinput[PORT] = self.port

    def pytest_sessionfinish(self) -> None:
        if self.scheduler is not None:
            self.scheduler.stop()
        stop_local_servers(self.lease_dir)

    def pytest_unconfigure(self) -> None:
        stop_local_servers(self.lease_dir)
        shutil.rmtree(self.lease_dir, ignore_errors=True)


def stop_local_servers(lease_dir: Path) -> None:
    """Stop every local server a worker left running (recorded in the lease files), and
    every server a worker started and did not stop (the servers' records)."""
    Registry(lease_dir / LEASES).reap(only_orphans=False)
    for path in (lease_dir / LEASES).glob("*.json"):
        try:
            server = (statefiles.read_json(path) or {}).get("server") or {}
        except AttributeError:  # a lease file holding a list or a number
            continue
        if server.get("pgid"):
            stop_group_id(int(server["pgid"]))


class WorkerBinding(NamedTuple):
    """What an xdist worker serves from: its host, the server port, the lease on that
    host, the scheduler's placement (multi-host runs), and the lease of any other host."""

    lease: HostLease
    host: Host | None
    port: int
    placement: SharedPlacement | None
    lease_for: Callable[[Host], HostLease]


def worker_lease(config: pytest.Config, settings: Settings) -> WorkerBinding | None:
    """On an xdist worker: where it serves from (see :class:`WorkerBinding`)."""
    info: dict[str, Any] | None = getattr(config, "workerinput", None)
    if not info or LEASE_DIR not in info:
        return None
    worker = str(info["workerid"])
    host = bound_host(settings, worker)
    port = int(info[PORT])
    directory = Path(info[LEASE_DIR])

    def lease_for(target: Host | None) -> HostLease:
        return HostLease(directory / LEASES, host_key(settings, target, port), worker)

    lease = lease_for(host)
    lease.register()
    placement = None
    if settings.remote and len(settings.hosts) > 1:
        hosts = {host_key(settings, h, port): h for h in settings.hosts}
        placement = SharedPlacement(directory, hosts, host_key(settings, host, port), worker)
    return WorkerBinding(lease, host, port, placement, lease_for)
