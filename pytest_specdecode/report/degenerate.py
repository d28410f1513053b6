"""Degenerate output: a speculative config whose text collapsed while its figures shone.

Each throughput case carries ``repetition``, the share of repeated word
4-grams (character 8-grams where words are few) in a sample of its replies
(:mod:`pytest_specdecode.throughput.quality`).
A speculative config's case is *degenerate* when that figure is above the
bound (``--dflash-max-repetition``, default 0.5) and, when
the run has a non-speculative baseline (algorithm NONE) for the same case,
also more than :data:`MARGIN` above the baseline's figure: a domain whose
normal output repeats (code idioms, a list format) is not flagged because
the drafter reproduced it. Without a baseline the bound alone decides.
A figure the server's text was too short for (fewer than 4 words, or 32
characters where words are few, per reply) is unknown and judges nothing.

A degenerate config fails the run (one line per config and domain, naming
both figures and an escaped excerpt of the worst reply), is marked in the
summary's repetition table and the report's ``repetition`` records
(:func:`case_repetitions`, :func:`repetition`), and is
infeasible: :func:`infeasible` gives the reasons per config that keep it out
of the verdict (and out of a search's candidates).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from pytest_specdecode.config.options import REPETITION_MARGIN
from pytest_specdecode.output import figures
from pytest_specdecode.report.model import (
    CaseRepetition,
    ConfigResults,
    DegenerateCase,
    Metrics,
    Repetition,
    Report,
)
from pytest_specdecode.report.results import RunResults
from pytest_specdecode.report.verdict import case_shape, throughput_cases
from pytest_specdecode.throughput.quality import (
    CHAR_NGRAM,
    CHARS_PER_WORD,
    NGRAM,
    SAMPLE_CHARS,
    SAMPLE_TEXTS,
)

MARGIN = REPETITION_MARGIN
"""How far above the baseline's figure a config's must be to count as degenerate."""
EXCERPT = 60
"""Characters of the worst reply shown in the failure line."""
METHOD = (
    f"share of repeated word {NGRAM}-grams within each reply (1 - distinct / total; "
    f"character {CHAR_NGRAM}-grams in a reply with fewer than one word per "
    f"{CHARS_PER_WORD} characters), pooled "
    f"over the first {SAMPLE_TEXTS} replies of the case ({SAMPLE_CHARS} characters each); "
    f"degenerate: above the bound and, with a NONE baseline, more than {MARGIN:g} above its "
    "figure"
)


Finding = DegenerateCase
"""The repetition of one speculative config's case beside the baseline's, judged
(``degenerate``); the report's record of a degenerate case has the same fields."""


def _line(f: Finding, bound: float) -> str:
    """The one failure line: config, domain, both figures, the case, an escaped excerpt."""
    if f.baseline is not None:
        against = (
            f"vs {figures.number(f.baseline, 2)} for the baseline {f.baseline_config} "
            f"(bound {figures.plain(bound)}, margin {figures.plain(MARGIN)})"
        )
    else:
        against = f"> bound {figures.plain(bound)} (no NONE baseline in this run)"
    return (
        f"degenerate output: {f.config} on {f.domain}: repetition "
        f"{figures.number(f.repetition, 2)} {against} in {f.case}; output starts "
        f"{escaped(f.excerpt or '')}"
    )


def escaped(text: str, limit: int = EXCERPT) -> str:
    """Model text for one line: quoted like a Python string, control characters and
    ANSI escapes written out (``\\x1b[2J``), cut to ``limit`` characters."""
    # Imported here: the coding package loads hypothesis, not needed otherwise.
    from pytest_specdecode.coding.values import printable

    cut = text[:limit]
    return printable(repr(cut)) + ("..." if len(text) > limit else "")


def judge(repetition: float | None, baseline: float | None, bound: float) -> bool:
    """Whether a figure is degenerate: above ``bound`` and, with a baseline's figure,
    more than :data:`MARGIN` above it; an unknown figure is not."""
    if repetition is None or not repetition > bound:
        return False
    return baseline is None or repetition - baseline > MARGIN


def _figure(metrics: Metrics) -> float | None:
    value = metrics.repetition
    return float(value) if value is not None and 0 <= value <= 1 else None


def configs_of(results: RunResults) -> list[ConfigResults]:
    """The run's configs as the report's (label, config, throughput cases)."""
    return [
        ConfigResults(label=r.label, config=r.config, throughput=list(r.throughput.values()))
        for r in results.ordered()
    ]


def findings(configs: Iterable[ConfigResults], bound: float) -> list[Finding]:
    """A finding per throughput case of every speculative config, judged against the
    run's NONE config with the same extra server flags (else any NONE config)."""
    configs = list(configs)
    baselines = _Baselines(c for c in configs if c.config.algorithm == "NONE")
    out = []
    for config in configs:
        if config.config.algorithm == "NONE":
            continue
        for case in config.throughput:
            base_label, base = baselines.find(case.case, config.config.extra)
            figure = _figure(case.metrics)
            out.append(
                Finding(
                    config=config.label,
                    case=case.case,
                    domain=case_shape(case.case, case.metrics)[2],
                    repetition=figure,
                    baseline=base,
                    baseline_config=base_label,
                    degenerate=judge(figure, base, bound),
                    excerpt=case.metrics.repetition_excerpt,
                )
            )
    return out


class _Baselines:
    """The NONE configs' figures by case, looked up in one step per case (a scan of
    every baseline per config made a sweep with many of them quadratic): the first
    baseline with the same extra server flags that has the case's figure, else the
    first with any flags."""

    def __init__(self, baselines: Iterable[ConfigResults]) -> None:
        self.same: dict[tuple[str, str], tuple[str, float]] = {}
        self.any: dict[str, tuple[str, float]] = {}
        for config in baselines:
            extra = _extra_key(config.config.extra)
            for found in config.throughput:
                figure = _figure(found.metrics)
                if figure is None:
                    continue
                entry = (config.label, figure)
                self.same.setdefault((extra, found.case), entry)
                self.any.setdefault(found.case, entry)

    def find(self, case: str, extra: list[Any]) -> tuple[str | None, float | None]:
        found = self.same.get((_extra_key(extra), case)) or self.any.get(case)
        return found if found is not None else (None, None)


def _extra_key(extra: list[Any]) -> str:
    # Extra flags are a list in the report (unhashable); equal lists give equal keys.
    return repr(extra)


def worst(found: Iterable[Finding]) -> list[Finding]:
    """The degenerate findings, one per config and domain: its most repetitive case."""
    out: dict[tuple[str, str], Finding] = {}
    for f in found:
        if not f.degenerate:
            continue
        key = (f.config, f.domain)
        if key not in out or (f.repetition or 0) > (out[key].repetition or 0):
            out[key] = f
    return list(out.values())


def failure_lines(results: RunResults, bound: float) -> list[str]:
    """One line per degenerate config and domain (empty when none is)."""
    return [_line(f, bound) for f in worst(findings(configs_of(results), bound))]


def infeasible(results: RunResults, bound: float) -> dict[str, list[str]]:
    """Per config label with degenerate output, why it is infeasible (one reason per
    domain): what keeps it out of the verdict, and what a search treats as a failed gate."""
    out: dict[str, list[str]] = {}
    for f in worst(findings(configs_of(results), bound)):
        out.setdefault(f.config, []).append(
            f"degenerate output on {f.domain} (repetition {figures.number(f.repetition, 2)})"
        )
    return out


def case_repetitions(report: Report, found: Iterable[Finding]) -> list[CaseRepetition | None]:
    """Every throughput case's repetition beside the baseline's (``found``: the report's
    :func:`findings`), in :func:`~pytest_specdecode.report.verdict.throughput_cases`'
    order (None: a NONE config's case)."""
    by_case = {(f.config, f.case): f for f in found}
    out: list[CaseRepetition | None] = []
    for config, case in throughput_cases(report):
        f = by_case.get((config.label, case.case))
        out.append(
            None
            if f is None
            else CaseRepetition(
                value=f.repetition,
                baseline=f.baseline,
                baseline_config=f.baseline_config,
                degenerate=f.degenerate,
            )
        )
    return out


def repetition(found: Iterable[Finding], bound: float) -> Repetition:
    """How output quality was judged (``bound``: the one ``found`` were judged by), and
    the degenerate cases of ``found`` (one per config and domain)."""
    return Repetition(
        method=METHOD,
        bound=bound,
        margin=MARGIN,
        degenerate=[
            msgspec.structs.replace(f, excerpt=escaped(f.excerpt or "")) for f in worst(found)
        ],
    )
