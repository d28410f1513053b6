"""The processes the plugin starts, kept ours until it has ended them.

:mod:`~pytest_specdecode.processes.children`: a child's pid (and process
group) stays taken until the child is ended for good;
:mod:`~pytest_specdecode.processes.lineage`: every process a launch started,
by lineage and marker, however far it left the launch's process group.
"""

from __future__ import annotations
