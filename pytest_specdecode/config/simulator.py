"""The bundled simulator's settings: its knobs and the defaults a simulated run gets.

The ``--dflash-sim-*`` options become the simulator's own ``--sim-*`` flags on
its launch line, so a user never rewrites ``--dflash-launch`` to reach them.
A run on the simulator also gets lighter defaults than a run on a GPU (fewer
output tokens per throughput request, a faster clock), so the default
simulated suite ends in about a minute; each default in effect is said in the
header and the summary (:func:`simulator_argv` returns the sentences), and the
figures stay simulated, never GPU results.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

# Output tokens per throughput request: against a server, and (fewer, so the
# default simulated run ends in about a minute) against the bundled simulator.
OUTPUT_TOKENS = 512
SIMULATOR_OUTPUT_TOKENS = 128
# The simulator's time scale unless one is given: its modelled GPU time, halved.
SIMULATOR_TIME_SCALE = 0.5
# Server starts counted across runs (--dflash-sim-restart-noise), beside the report.
START_COUNT_FILE = ".dflash/sim-starts"


def output_tokens_note() -> str:
    """The header's sentence for the simulator's default output tokens."""
    return (
        f"{SIMULATOR_OUTPUT_TOKENS} output tokens per throughput request ({OUTPUT_TOKENS} "
        "against a server; --dflash-output-tokens sets it)"
    )


def simulator_argv(
    launch: str,
    *,
    time_scale: float | None = None,
    quality: float | None = None,
    answers: str | None = None,
    faults: Sequence[str] = (),
    extra: str = "",
    restart_noise: float | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The simulator's ``--sim-*`` flags for these knobs, and the notes of the
    simulator-only defaults applied (its time scale, when nothing sets one).

    ``answers`` is a path (made absolute: the simulator runs elsewhere);
    ``extra`` more simulator options as one shell-quoted line. ``restart_noise``
    gives each start its own speed; the starts are counted in :data:`START_COUNT_FILE`
    (absolute: the simulator runs elsewhere) so that separate runs draw separate factors.
    """
    argv: list[str] = []
    if time_scale is not None:
        argv += ["--sim-time-scale", f"{time_scale:g}"]
    if quality is not None:
        argv += ["--sim-quality", f"{quality:g}"]
    if answers is not None:
        argv += ["--sim-answers", os.path.abspath(answers)]
    for fault in faults:
        argv += ["--sim-fault", fault]
    if restart_noise:
        argv += ["--sim-restart-noise", f"{restart_noise:g}"]
        argv += ["--sim-start-count-file", os.path.abspath(START_COUNT_FILE)]
    argv += shlex.split(extra)
    if "--sim-time-scale" in [*shlex.split(launch), *argv]:
        return tuple(argv), ()
    note = (
        f"--sim-time-scale {SIMULATOR_TIME_SCALE:g}: the simulator runs twice as fast as the GPU "
        "it models (its tok/s doubled, its ratios unchanged; --dflash-sim-time-scale 1 for the "
        "modelled speed)"
    )
    return ("--sim-time-scale", f"{SIMULATOR_TIME_SCALE:g}", *argv), (note,)
