"""Enough file descriptors for the connections of a round.

Every in-flight request holds one socket; at concurrency 1024 the common soft
limit of 1024 descriptors runs out. The soft limit is raised toward the hard
limit when needed (a process may do that without privileges); when the hard
limit itself is too low, one line says what to do.
"""

from __future__ import annotations

from pytest_specdecode.errors import SpecDecodeError

SPARE = 128
"""Descriptors kept for everything else: pytest, logs, the control path, the server's pipes."""


class FdLimitError(SpecDecodeError):
    """The hard limit on open files is below what the load needs."""


def ensure_fds(connections: int, *, spare: int = SPARE) -> int | None:
    """Make room for ``connections`` sockets; return the soft limit now in force.

    ``None`` where the platform has no ``resource`` module (nothing to do there).
    """
    try:
        import resource
    except ImportError:  # Windows: no RLIMIT_NOFILE
        return None
    needed = connections + spare
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return int(soft)
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise FdLimitError(
            f"{connections} requests in flight need about {needed} open files but the hard "
            f"limit is {hard} (ulimit -Hn); raise it (ulimit -Hn {needed}, or LimitNOFILE= / "
            "limits.conf nofile) or lower --dflash-concurrency"
        )
    target = needed if hard == resource.RLIM_INFINITY else min(hard, max(needed, soft))
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target
