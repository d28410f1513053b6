"""An SGLang-compatible server simulator: ``python -m pytest_specdecode.sim``.

It speaks SGLang's command line and HTTP API closely enough that a client
written for ``python -m sglang.launch_server`` works against it unchanged, and
models speculative decoding (accept length, step time, continuous batching) so
that sweeps show real trade-offs. It is a simulator: none of its figures are
GPU results. It imports nothing from the rest of ``pytest_specdecode``.
"""

from __future__ import annotations
