"""pytest-xdist support: the controller schedules by config; workers share servers.

Registered only when pytest-xdist runs the session with workers
(:func:`.controller.start_controller`; lookups through :func:`.run.controller_of`, the
run's ``config.stash``, never a plugin name). The controller process
(:class:`.controller.XdistController`) makes a lease directory and, for the
local simulator, one port, and hands both to every worker
(``pytest_configure_node``); each worker binds to one host (worker N to host N
modulo the number of hosts) and takes its server through
:class:`.lease.HostLease` (:func:`.worker_side.worker_lease`, the worker's one
entry).

Workers write which config each collected test runs under to the lease
directory (:mod:`.shared_files`); the controller schedules with
:class:`.scheduling.ConfigScheduling`, which hands each host one config's tests
at a time (:mod:`.schedule`) and tells the lease which config each host may
switch to. So each config starts once, by construction, however the workers'
timing falls. A worker that finds its host down says so in the lease directory
(:mod:`.placement`); the scheduler, which watches for that in a thread of its
own (the other workers may all be idle, so no event would come), moves the
host's configs not yet done and its workers to a live host and publishes where
each config runs now. At the end the controller stops the local servers the
workers left running.

Under ``--dflash-search`` with several hosts, a :class:`.schedule.Chooser`
(the search's distributed side, :mod:`pytest_specdecode.search.distributed`,
which the search registers: it is the search's own state, a layer above)
picks each host's next config when the host has nothing left; it hears when a
config's tests are done (their reports have reached this process by then).

Throughput cases need the server to themselves: pytest-benchmark switches
itself off under xdist, and a case is measured by the plugin's own load
client only where each worker holds its host alone
(:func:`.worker_side.holds_host_alone`); elsewhere it skips.

The manager (:mod:`pytest_specdecode.service.manager`, a layer below) takes
the lease and placement as the protocols of
:mod:`pytest_specdecode.service.sharing`.
"""
