"""Size caps and whole deadlines for every reply the plugin reads from a server.

A per-read timeout does not bound a request: a server that sends one byte
every few seconds, or a stream that never ends, keeps a per-read timeout
happy forever. So every request has three bounds, shared by the control path
(``requests``) and the load generator (asyncio):

- a *whole deadline* from sending to the last byte, derived from the tokens
  asked for (:meth:`Limits.deadline`);
- a *stall limit*: the longest gap between two reads of the body;
- *size caps*: one SSE line and one whole response.

Passing any of them is an error naming the bound and its value; nothing is
buffered past a cap.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_SSE_LINE = 4 << 20
"""Bytes in one SSE line (one event). SGLang's largest event is the last one of
a stream with ``return_logprob``; a few MiB is far above any real one."""

MAX_RESPONSE = 256 << 20
"""Bytes in one whole response body (all the events of a stream together)."""


@dataclass(frozen=True)
class Limits:
    """The bounds of one kind of request, in seconds.

    ``base`` covers connecting, queueing and prefill; ``per_token`` the decode
    of each token asked for (generous: a loaded GPU at high concurrency decodes
    a request at tens of tokens per second, never below a few per second);
    ``stall`` the longest silence between two reads.
    """

    base: float = 120.0
    per_token: float = 0.5
    stall: float = 120.0

    def deadline(self, max_new_tokens: int | None) -> float:
        """Seconds allowed from sending a request asking for ``max_new_tokens`` tokens to
        its last byte. A request without a token count (a control call:
        ``/server_info``, ``/flush_cache``) gets ``base`` alone."""
        return self.base + self.per_token * max(0, max_new_tokens or 0)


DEFAULT_LIMITS = Limits()
