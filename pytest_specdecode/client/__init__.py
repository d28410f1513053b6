"""The SGLang HTTP client: the requests, and every reply read within its bounds.

:mod:`~pytest_specdecode.client.sglang` is the client (the control path),
:mod:`~pytest_specdecode.client.limits` the size caps and whole deadlines of
every reply the plugin reads from a server (shared with the load generator),
:mod:`~pytest_specdecode.client.wire` the reading of a reply off the socket
within them. ``pytest_specdecode.client.SGLangClient`` is a documented import
path for conftests.
"""

from __future__ import annotations

from pytest_specdecode.client.sglang import SGLangClient

__all__ = ["SGLangClient"]
