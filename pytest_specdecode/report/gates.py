"""Gates: turn a run's results into an exit status CI can rely on.

Each failed gate is one line (``budget=8 window=2048: 3/5 = 60% < 80%``);
any failed gate makes the run exit 1. With ``--dflash-min-pass-rate`` the
coding tests' own failures stop deciding the exit status: the pass rate per
config does, while every other test must still pass.
"""

from __future__ import annotations

from pytest_specdecode import figures
from pytest_specdecode.config.settings import Settings
from pytest_specdecode.report.results import ConfigResults, RunResults

OK, TESTS_FAILED = 0, 1


def evaluate(settings: Settings, results: RunResults, compare_lines: list[str]) -> list[str]:
    """One line per failed gate; empty when every gate holds."""
    lines: list[str] = []
    for r in results.ordered():
        if r.died is not None:  # what it answered after that says nothing about the model
            lines.append(f"config {r.label}: server died after {r.died_after()} tests ({r.died})")
    threshold = settings.min_pass_rate
    if threshold is not None:
        for r in results.ordered():
            found = r.pass_rate() if r.died is None else None
            if found is None:
                continue
            rate, passed, total = found
            if rate < threshold:
                shown = f"{passed}/{total}" if _single_sample(r) else f"pass@1 {rate:.2f}"
                lines.append(f"pass rate: {r.label}: {shown} = {rate:.0%} < {threshold:.0%}")
    if settings.min_accept_length is not None:
        lines.extend(_accept_length(settings.min_accept_length, results))
    lines.extend(f"throughput regression: {line}" for line in compare_lines)
    return lines


def config_failures(settings: Settings, results: RunResults) -> dict[str, list[str]]:
    """Per config label, the gates it failed (pass rate, lossless, accept floor) and
    whether its server failed its readiness gate: what keeps a config out of the verdict."""
    out: dict[str, list[str]] = {}
    for r in results.ordered():
        reasons: list[str] = []
        found, floor = r.pass_rate(), settings.min_pass_rate
        if floor is not None and found is not None and found[0] < floor:
            reasons.append(f"pass rate {found[0]:.0%} < {floor:.0%}")
        if any(not record.passed for record in r.lossless.values()):
            reasons.append("not lossless")
        least = settings.min_accept_length
        if least is not None and r.config.get("algorithm") != "NONE":
            accept = r.accept_length()
            if accept is None or accept < least:
                shown = "unknown" if accept is None else figures.number(accept, 2)
                reasons.append(f"accept length {shown} < {figures.plain(least)}")
        if r.errors:
            reasons.append("server not ready")
        out[r.label] = reasons
    return out


def exit_status(
    exitstatus: int, settings: Settings, results: RunResults, gate_lines: list[str]
) -> int:
    """The run's exit status once gates are applied.

    Interruptions, usage and internal errors and "no tests ran" keep pytest's
    status; otherwise a failed gate is 1, and with a pass-rate gate, coding
    failures alone no longer fail the run.
    """
    if exitstatus not in (OK, TESTS_FAILED):
        return exitstatus
    if gate_lines:
        return TESTS_FAILED
    if settings.min_pass_rate is not None and any(r.coding for r in results.ordered()):
        errored = any(r.errors for r in results.ordered())
        return TESTS_FAILED if results.other_failures or errored else OK
    return exitstatus


def _single_sample(results: ConfigResults) -> bool:
    return all(record.samples == 1 for record in results.coding.values())


def _accept_length(minimum: float, results: RunResults) -> list[str]:
    """The accept-length gate: a figure the server did not report is unknown, and an
    unknown figure fails the gate (it cannot show the drafter still helps)."""
    lines: list[str] = []
    measured = [
        r
        for r in results.ordered()
        if r.config.get("algorithm") != "NONE" and (r.throughput or r.coding)
    ]
    for r in measured:
        accept = r.accept_length()
        if accept is None:
            lines.append(
                f"accept length: {r.label}: unknown < {figures.plain(minimum)}: the server "
                "reported no speculation counts (spec_verify_ct, spec_accept_length); check "
                "that it runs speculative decoding and reports them"
            )
        elif accept < minimum:
            lines.append(
                f"accept length: {r.label}: {figures.number(accept, 2)} < {figures.plain(minimum)}"
            )
    if not measured:
        lines.append(
            f"accept length: unknown < {figures.plain(minimum)}: no throughput or coding test "
            "of a speculative config ran, so nothing measured it"
        )
    return lines
