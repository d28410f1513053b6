"""Noise that spans restarts (``--sim-restart-noise F``): each start runs at its own speed.

Real servers settle into a different stable level from one start to the next
(memory layout, clocks, kernel autotuning), so two runs of one config on two
starts differ by more than either run's own round-to-round noise. The
simulator models that with one speed factor per server start, drawn
uniformly within ``1 +- F`` from ``--sim-seed`` and the start's number, and
divides every modelled step time by it.

The start number has to survive the process (each pytest run starts a new
simulator), so it is kept in a file, ``--sim-start-count-file PATH``: each
start adds one under an exclusive lock (starts of parallel workers never
share a number). The same seed, the same file history: the same factors.
"""

from __future__ import annotations

import fcntl
import os
import random


def next_start(path: str) -> int:
    """Count this start in ``path`` and return its number (1 for the first start)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        text = os.read(fd, 64).decode("ascii", "replace").strip()
        count = int(text) + 1 if text.isdigit() else 1
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, f"{count}\n".encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)  # closing drops the lock
    return count


def speed_factor(seed: int, start: int, noise: float) -> float:
    """The speed factor of start number ``start``: uniform within ``[1 - noise, 1 + noise]``."""
    if noise <= 0:
        return 1.0
    # A string seed is hashed the same way in every process (not Python's hash()).
    rng = random.Random(f"sim-restart-noise:{seed}:{start}")
    return 1.0 + rng.uniform(-noise, noise)
