"""Read saved pytest-benchmark runs, pair throughput cases, gate regressions.

pytest-benchmark saves runs as ``<storage>/<machine-id>/NNNN_<name>.json``
(machine id like ``Linux-CPython-3.11-64bit``); ``--benchmark-compare=NNNN``
finds ``NNNN_*.json`` under the current machine's folder, and
``--benchmark-compare`` alone the newest one. The same lookup is used here,
falling back to any machine folder when the current one has none. Our
metrics live in each benchmark's ``extra_info``, with the per-round values
the gate compares (``intervals``).

A gate ``tok_s:5%`` fails a case only when the whole 95% interval of the
relative change lies below -5%: round by round when both runs have as many
rounds (round i sends the same prompts in both), else the ratio of the round
means (delta method on its log, Welch-Satterthwaite degrees of freedom); see
:mod:`~pytest_specdecode.throughput.stats`. When the interval straddles the
limit the case is *inconclusive*, said in one line with the noise, and does
not fail. ``accept_length:0.2`` does the same with the difference.

Noise across restarts: the saved runs beside the compared one
(:mod:`~pytest_specdecode.throughput.saved_runs`) that measured its config and
case give the spread of a run's mean from one server start to the next; with
three or more, the gate uses the wider of that between-run interval and the
within-run one (:data:`~pytest_specdecode.throughput.stats.BETWEEN_METHOD`),
and each finding says which noise it used.
"""

from __future__ import annotations

import argparse
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_benchmark.utils import get_machine_id

from pytest_specdecode import statefiles
from pytest_specdecode.errors import SpecDecodeError
from pytest_specdecode.output import figures
from pytest_specdecode.throughput import fingerprint, stats
from pytest_specdecode.throughput.metrics import ACCEPT_LENGTH, TOK_S

METRICS = (TOK_S, ACCEPT_LENGTH)
"""Metrics a fail spec may name; higher is better for both."""


RUN_PREFIX = "[0-9][0-9][0-9][0-9]_"
"""How the name of a run pytest-benchmark saved starts (``NNNN_``), as a glob."""


class CompareError(SpecDecodeError):
    """A saved run could not be found or read; one line for users."""


def machine_id() -> str:
    """pytest-benchmark's folder name for this machine, e.g. ``Linux-CPython-3.11-64bit``
    (its own function: the folder it saves into)."""
    return str(get_machine_id())  # type: ignore[no-untyped-call]


def find_saved_run(spec: str, storage: str | Path = ".benchmarks") -> Path:
    """Resolve ``spec`` (a .json path, ``NNNN``, ``NNNN_name``, the ``--benchmark-save``
    name alone or ``latest``) to one saved file; a name saved twice is its newest run.

    ``storage`` is a folder or pytest-benchmark's ``file://`` storage URL.
    """
    candidate = Path(spec)
    if candidate.is_file():
        return candidate
    root = Path(str(storage).removeprefix("file://"))
    if spec == "latest":
        if (newest := _newest(root, f"{RUN_PREFIX}*.json")) is None:
            raise CompareError(
                f"no saved benchmark run under {str(root)!r} to compare with; "
                "save one first with --benchmark-save=NAME or --benchmark-autosave"
            )
        return newest
    if not re.fullmatch(r"\d{4}(_.*)?", spec):
        return _saved_by_name(spec, root)
    pattern = spec if "_" in spec else f"{spec}_*"
    pattern = pattern if pattern.endswith(".json") else pattern.rstrip("*") + "*.json"
    mine = sorted((root / machine_id()).glob(pattern))
    found = mine or sorted(root.glob(f"*/{pattern}")) or sorted(root.glob(pattern))
    if not found:
        raise CompareError(
            f"no saved benchmark run {spec!r} under {str(root)!r}; "
            "save one first with --benchmark-save=NAME or --benchmark-autosave"
        )
    if len(found) > 1:
        names = ", ".join(repr(str(p)) for p in found[:4])
        raise CompareError(f"saved run {spec!r} is ambiguous: {names}; pass the .json path instead")
    return found[0]


def _saved_by_name(name: str, root: Path) -> Path:
    """The newest run saved with ``--benchmark-save=NAME`` (``NNNN_NAME.json``)."""
    if not re.fullmatch(r"[\w.-]+", name):
        raise CompareError(
            f"no saved benchmark run {name!r}: give a .json file, a run number such as '0001', "
            "the name given to --benchmark-save, or 'latest'"
        )
    if (newest := _newest(root, f"{RUN_PREFIX}{name}.json")) is None:
        raise CompareError(
            f"no saved benchmark run named {name!r} under {str(root)!r} (pytest-benchmark saves "
            f"--benchmark-save={name} as NNNN_{name}.json); give a .json file, a run number such "
            "as '0001' or 'latest'"
        )
    return newest


def _newest(root: Path, pattern: str) -> Path | None:
    """The newest saved run matching ``pattern`` in this machine's folder, else in any."""
    runs = sorted((root / machine_id()).glob(pattern))
    runs = runs or sorted(root.glob(f"*/{pattern}"), key=lambda p: p.name)
    return runs[-1] if runs else None


@dataclass(frozen=True)
class CaseRow:
    """One benchmark of a run, reduced to what comparisons need."""

    key: str
    fullname: str
    case: str
    config: str
    tok_s: float | None
    accept_length: float | None
    extra_info: Mapping[str, Any]
    refused: str | None = None
    """Why the saved record is not used (a figure of the wrong type), else None."""

    def samples(self, metric: str) -> list[float]:
        """The per-round values of ``metric`` (a run saved without them: its one value;
        a refused record: none)."""
        if self.refused is not None:
            return []
        listed = _saved_values(self.extra_info, metric)
        values = stats.clean(listed) if isinstance(listed, list) else []
        if values:
            return values
        point = getattr(self, metric, None) if metric in METRICS else self.extra_info.get(metric)
        return stats.clean([point])

    def mean(self, metric: str) -> float | None:
        """The mean of :meth:`samples` (what tables and gate lines show)."""
        values = self.samples(metric)
        return sum(values) / len(values) if values else None

    @property
    def algorithm(self) -> str:
        """The config's algorithm (``NONE`` for a non-speculative baseline)."""
        found = self.extra_info.get("algorithm")
        return str(found) if found else (self.config.split() or ["?"])[0]


def pairing_key(fullname: str, extra_info: Mapping[str, Any]) -> str:
    """The test name without its config part: ``path::test[case]``.

    Under a sweep the config is part of the test id; the case id stored in
    ``extra_info`` is what must match across configs.
    """
    base = fullname.split("[", 1)[0]
    case = extra_info.get("case")
    if isinstance(case, str) and case:
        return f"{base}[{case}]"
    return fullname


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _figure_fault(value: Any) -> str | None:
    """What is wrong with a saved figure (absent is not wrong), or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"a {type(value).__name__} ({_short(value)})"
    return None if math.isfinite(value) else f"not finite ({value!r})"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _saved_values(info: Mapping[str, Any], metric: str) -> Any:
    """``info["intervals"][metric]["values"]`` as saved; None where a level is missing."""
    intervals = info.get("intervals")
    found = intervals.get(metric) if isinstance(intervals, Mapping) else None
    return found.get("values") if isinstance(found, Mapping) else None


def refusal(info: Mapping[str, Any]) -> str | None:
    """Why a saved record's figures cannot be used, or None: a figure the gate reads
    (each of :data:`METRICS` and its per-round values) that is there but not a finite
    number. Such a record is refused whole, never repaired from its other fields."""
    for metric in METRICS:
        fault = _figure_fault(info.get(metric))
        if fault is not None:
            return f"{metric} is {fault}"
        values = _saved_values(info, metric)
        if values is None:
            continue
        if not isinstance(values, list):
            return f"the {metric} round values are a {type(values).__name__}, not a list"
        for i, value in enumerate(values):
            fault = _figure_fault(value) if value is not None else "null"
            if fault is not None:
                return f"the {metric} value of round {i + 1} is {fault}"
    return None


def row_from_benchmark(bench: Mapping[str, Any]) -> CaseRow:
    """A :class:`CaseRow` from one entry of a saved run's ``benchmarks`` list.

    Whatever the entry holds (another plugin's, an older format, a hand edit), the
    row has no figure it did not state as a number: the gate then cannot judge it;
    a figure of the wrong type refuses the record (:func:`refusal`)."""
    if not isinstance(bench, Mapping):
        bench = {}
    fullname = str(bench.get("fullname") or bench.get("name") or "?")
    info = bench.get("extra_info")
    info = info if isinstance(info, Mapping) else {}
    return CaseRow(
        key=pairing_key(fullname, info),
        fullname=fullname,
        case=str(info.get("case") or bench.get("param") or bench.get("name") or fullname),
        config=str(info.get("config") or ""),
        tok_s=_number(info.get(TOK_S)),
        accept_length=_number(info.get(ACCEPT_LENGTH)),
        extra_info=dict(info),
        refused=refusal(info),
    )


def load_run(path: str | Path) -> list[CaseRow]:
    """All benchmarks of a saved pytest-benchmark JSON file (``--benchmark-save``/``--json``)."""
    try:
        data = statefiles.load_json(path)
        benches = data["benchmarks"]
        if not isinstance(benches, list):
            raise TypeError(f"'benchmarks' is a {type(benches).__name__}, not a list")
        return [row_from_benchmark(b) for b in benches]
    except statefiles.FileRefused as exc:
        raise CompareError(f"cannot read saved benchmark run {exc}") from None
    except (KeyError, TypeError, AttributeError) as exc:
        raise CompareError(
            f"cannot read saved benchmark run {str(path)!r}: {type(exc).__name__}: {exc}"
        ) from None


@dataclass(frozen=True)
class CaseDelta:
    """The same case in a baseline run and the current run."""

    key: str
    case: str
    base: CaseRow | None
    current: CaseRow | None

    def value(self, metric: str, side: str) -> float | None:
        """``metric`` of the ``"base"`` or ``"current"`` row (the mean over its rounds)."""
        row = self.base if side == "base" else self.current
        return None if row is None else row.mean(metric)

    def change_interval(self, metric: str, *, percent: bool) -> stats.Interval | None:
        """The change of ``metric`` with its 95% interval: relative (in %) or absolute."""
        if self.base is None or self.current is None:
            return None
        base, now = self.base.samples(metric), self.current.samples(metric)
        if not percent:
            return stats.paired_diff_interval(base, now)
        ratio = stats.paired_ratio_interval(now, base)
        return None if ratio is None else _as_percent(ratio)

    def between_interval(
        self, metric: str, run_means: Sequence[float], *, percent: bool
    ) -> stats.Interval | None:
        """The change's interval from the spread of saved runs' means (``None``: too few),
        in % for a relative change (:func:`stats.between_run_interval`)."""
        a, b = self.value(metric, "base"), self.value(metric, "current")
        if a is None or b is None:
            return None
        if not percent:
            return stats.between_run_interval(b - a, run_means, relative=False)
        if a <= 0 or b <= 0:
            return None
        within = self.change_interval(metric, percent=True)
        # Centred on the within-run estimate (paired rounds: their geometric mean).
        ratio = 1.0 + within.value / 100.0 if within is not None else b / a
        found = stats.between_run_interval(ratio, run_means, relative=True)
        return None if found is None else _as_percent(found)

    def change(self, metric: str) -> float | None:
        """current - base, or ``None`` when either side lacks the value."""
        a, b = self.value(metric, "base"), self.value(metric, "current")
        return None if a is None or b is None else b - a

    def change_pct(self, metric: str) -> float | None:
        """Relative change in percent; ``None`` when undefined."""
        a, d = self.value(metric, "base"), self.change(metric)
        return None if d is None or not a else d / a * 100


def _as_percent(ratio: stats.Interval) -> stats.Interval:
    """A ratio's interval as the relative change it says, in percent."""

    def pct(x: float) -> float:
        return (x - 1.0) * 100.0

    low = None if ratio.low is None else pct(ratio.low)
    high = None if ratio.high is None else pct(ratio.high)
    return stats.Interval(pct(ratio.value), low, high, ratio.n, ratio.method)


def pair(base: Iterable[CaseRow], current: Iterable[CaseRow]) -> list[CaseDelta]:
    """Pair rows by :func:`pairing_key`, current order first, then baseline-only rows."""
    base_by = {r.key: r for r in base}
    out = [CaseDelta(row.key, row.case, base_by.get(row.key), row) for row in current]
    seen = {d.key for d in out}
    return out + [CaseDelta(k, r.case, r, None) for k, r in base_by.items() if k not in seen]


def _signed(value: float | None, percent: bool) -> str:
    """``+1.5%`` (``percent``) or ``+0.25``; ``-`` for no value."""
    if value is None:
        return "-"
    return f"{value:+.1f}%" if percent else f"{value:+.2f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        cells = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _interval_cell(interval: stats.Interval | None) -> str:
    if interval is None or not interval.known:
        return "-"
    return f"{_signed(interval.low, True)} to {_signed(interval.high, True)}"


def render_compare(deltas: Sequence[CaseDelta], base_label: str, current_label: str) -> str:
    """Side-by-side table: per case (and config), tok/s and accept length of both runs,
    the change and the 95% interval of the tok/s change."""
    header = [
        "case",
        "config",
        f"tok/s {base_label}",
        f"tok/s {current_label}",
        "change",
        "95% interval",
        f"accept {base_label}",
        f"accept {current_label}",
        "change",
    ]
    rows = [
        [
            d.case,
            d.current.config if d.current else "-",
            figures.rate(d.value("tok_s", "base")),
            figures.rate(d.value("tok_s", "current")),
            _signed(d.change_pct("tok_s"), True),
            _interval_cell(d.change_interval("tok_s", percent=True)),
            figures.number(d.value("accept_length", "base"), 2),
            figures.number(d.value("accept_length", "current"), 2),
            _signed(d.change("accept_length"), False),
        ]
        for d in deltas
    ]
    return _table(header, rows)


@dataclass(frozen=True)
class FailSpec:
    """A regression limit: ``metric`` may drop by at most ``limit`` (percent or absolute)."""

    metric: str
    limit: float
    percent: bool

    def __str__(self) -> str:
        return f"{self.metric}:{figures.plain(self.limit)}{'%' if self.percent else ''}"


_FAIL_RE = re.compile(r"^(?P<metric>[a-z_]+):(?P<num>\d+(?:\.\d+)?)(?P<pct>%?)$")


def parse_fail_spec(text: str) -> FailSpec:
    """Parse ``tok_s:5%`` or ``accept_length:0.3``; ``argparse.ArgumentTypeError`` if bad."""
    m = _FAIL_RE.match(text.strip())
    if not m or m["metric"] not in METRICS:
        raise argparse.ArgumentTypeError(
            f"invalid compare-fail spec {text!r}: expected METRIC:N% or METRIC:N with METRIC "
            f"one of {', '.join(METRICS)} (e.g. 'tok_s:5%' or 'accept_length:0.2')"
        )
    return FailSpec(m["metric"], float(m["num"]), bool(m["pct"]))


CANNOT_JUDGE = "cannot-judge"
"""A finding's status when the gate lacks what it needs to judge: it fails the run."""


@dataclass(frozen=True)
class Finding:
    """What a fail spec says about one case: ``fail``, ``pass``, ``inconclusive``, or
    :data:`CANNOT_JUDGE` (the saved run lacks the figure; ``line`` says what is missing).

    A case this run measured that the saved run does not have is *not compared* (no
    finding): a new case has no baseline. A spec with no finding at all compared
    nothing, and that is a :data:`CANNOT_JUDGE` finding of its own (:func:`check`).

    ``noise`` says which noise the interval used (``within-run``, ``between-run``,
    or ``within-run only`` when too few saved runs were found), ``saved_runs``
    how many saved runs of the config and case were found (``None``: not looked up).
    """

    case: str
    spec: FailSpec
    status: str
    line: str
    change: stats.Interval | None = None
    noise: str = "within-run"
    saved_runs: int | None = None


@dataclass(frozen=True)
class History:
    """The saved runs beside the compared one: their rows by (pairing key, config),
    one per saved run that has the case, and the saved files that could not be read."""

    rows: Mapping[tuple[str, str], Sequence[CaseRow]] = field(default_factory=dict)
    unreadable: int = 0


@dataclass(frozen=True)
class Noise:
    """The saved runs of one config and case that count as noise across restarts of the
    current run's setup (their means), and why each other one was left out."""

    means: list[float]
    left_out: Counter[str]

    def said(self) -> str:
        """``3 left out: 2 another machine, 1 simulated`` (empty when none was)."""
        n = sum(self.left_out.values())
        if not n:
            return ""
        reasons = ", ".join(f"{k} {why}" for why, k in self.left_out.most_common())
        return f"{n} left out: {reasons}"


def run_noise(history: History, row: CaseRow, metric: str, current: CaseRow | None) -> Noise:
    """The saved runs of ``row``'s config and case measured where ``current`` was
    (:func:`fingerprint.left_out`), with a readable ``metric``."""
    means: list[float] = []
    left: Counter[str] = Counter()
    now = current.extra_info.get(fingerprint.KEY) if current is not None else None
    for saved in history.rows.get((row.key, row.config)) or ():
        fingerprinted = saved.extra_info.get(fingerprint.KEY)
        why = "refused" if saved.refused is not None else fingerprint.left_out(fingerprinted, now)
        mean = saved.mean(metric) if why is None else None
        if mean is not None:
            means.append(mean)
        else:
            left[why or f"no {metric}"] += 1
    if history.unreadable:
        left["unreadable"] += history.unreadable
    return Noise(means, left)


def _noise(
    delta: CaseDelta, spec: FailSpec, within: stats.Interval, history: History | None
) -> tuple[stats.Interval, str, str, int | None]:
    """The interval the gate uses, which noise that is, the note the line carries, k."""
    if history is None or delta.base is None:
        return within, "within-run", "", None
    found = run_noise(history, delta.base, spec.metric, delta.current)
    means, left = found.means, found.said()
    k = len(means)
    between = delta.between_interval(spec.metric, means, percent=spec.percent)
    if between is None:
        runs = f"{k} saved runs; {left}" if left else f"{k} saved runs"
        note = f"between-run noise unknown ({runs}): the gate uses the within-run interval only"
        return within, "within-run only", note, k
    spread = _signed(between.half_width, spec.percent).lstrip("+")
    aside = f" ({left})" if left else ""
    if within.half_width is not None and within.half_width >= (between.half_width or 0.0):
        inner = _signed(within.half_width, spec.percent).lstrip("+")
        note = (
            f"within-run noise +-{inner} (the {k} saved runs' between-run noise: +-{spread}){aside}"
        )
        return within, "within-run", note, k
    return between, "between-run", f"between-run noise +-{spread} from {k} saved runs{aside}", k


def judge(
    delta: CaseDelta, spec: FailSpec, history: History | None = None, saved: str = ""
) -> Finding | None:
    """The verdict of ``spec`` on one case; None when the case is not compared (the
    saved run does not have it, or neither run has the metric).

    A case present in the baseline but missing now (or lacking the metric)
    fails: a gate must not pass because the numbers vanished. A case both runs
    have whose saved figure is missing (or, for a relative limit, not positive)
    cannot be judged. ``saved`` names the saved run in that line. With ``history``
    (the saved runs found), the interval is the wider of the within-run one and
    the between-run one (:data:`~pytest_specdecode.throughput.stats.BETWEEN_METHOD`).
    """
    if delta.base is None:
        return None
    if delta.base.refused is not None and delta.current is not None:
        line = (
            f"the saved run {saved or '?'} has a record for {delta.case} that is refused: "
            f"{delta.base.refused}; save the run again"
        )
        return Finding(delta.case, spec, CANNOT_JUDGE, line)
    base = delta.value(spec.metric, "base")
    if base is None:
        if delta.current is None:
            return None
        why = "" if delta.base.extra_info else " (its entry has no extra_info)"
        line = f"the saved run {saved or '?'} has no {spec.metric} for {delta.case}{why}"
        return Finding(delta.case, spec, CANNOT_JUDGE, line)
    now = delta.value(spec.metric, "current")
    if now is None:
        was = figures.metric(spec.metric, base)
        line = f"{delta.case}: {spec.metric} missing in the current run (was {was})"
        return Finding(delta.case, spec, "fail", line)
    if spec.percent and base <= 0:
        line = (
            f"the saved run {saved or '?'} has {spec.metric} {figures.plain(base)} for "
            f"{delta.case}: a relative change from it is undefined"
        )
        return Finding(delta.case, spec, CANNOT_JUDGE, line)
    change = delta.change_interval(spec.metric, percent=spec.percent)
    assert change is not None
    change, noise, note, k = _noise(delta, spec, change, history)
    found = _judged(delta, spec, base, now, change, noise)
    line = f"{found.line}; {note}" if note else found.line
    return Finding(found.case, spec, found.status, line, change, noise, k)


def _judged(
    delta: CaseDelta,
    spec: FailSpec,
    base: float,
    now: float,
    change: stats.Interval,
    used: str = "within-run",
) -> Finding:
    before, after = figures.metric(spec.metric, base), figures.metric(spec.metric, now)
    head = f"{delta.case}: {spec.metric} {before} -> {after} ({_signed(change.value, spec.percent)}"
    limit = -spec.limit
    if change.low is None or change.high is None:
        rounds = f"{len(delta.base.samples(spec.metric)) if delta.base else 0}"
        line = (
            f"{head}): inconclusive: no interval ({rounds} round(s) in the baseline, "
            f"{len(delta.current.samples(spec.metric)) if delta.current else 0} now); "
            f"measure with --dflash-rounds 3 or more"
        )
        return Finding(delta.case, spec, "inconclusive", line, change)
    interval = (
        f"95% interval {_signed(change.low, spec.percent)} to {_signed(change.high, spec.percent)}"
    )
    if change.high < limit:
        line = f"{head}, {interval}), beyond the allowed drop {spec}"
        return Finding(delta.case, spec, "fail", line, change)
    if change.low >= limit:
        line = f"{head}, {interval}), within the allowed drop {spec}"
        return Finding(delta.case, spec, "pass", line, change)
    noise = _signed(change.half_width, spec.percent).lstrip("+")
    hint = "more rounds (--dflash-rounds) narrow it"
    if used == "between-run":
        hint = "the noise is between server starts: more rounds do not narrow it"
    line = (
        f"{head}): inconclusive: noise +-{noise} ({interval}) against the allowed drop "
        f"{spec}; {hint}"
    )
    return Finding(delta.case, spec, "inconclusive", line, change)


def check(
    deltas: Iterable[CaseDelta],
    specs: Iterable[FailSpec],
    history: History | None = None,
    saved: str = "",
) -> list[Finding]:
    """Every spec's verdict on every case that has a baseline; a spec that compared
    no case at all gets one :data:`CANNOT_JUDGE` finding saying why."""
    specs, deltas = list(specs), list(deltas)
    found: list[Finding] = []
    compared: set[FailSpec] = set()
    for d in deltas:
        for spec in specs:
            if (f := judge(d, spec, history, saved)) is not None:
                found.append(f)
                if d.current is not None and f.status != CANNOT_JUDGE:
                    compared.add(spec)
    measured = sum(1 for d in deltas if d.current is not None)
    for spec in specs:
        if spec in compared or any(f.spec == spec and f.status == CANNOT_JUDGE for f in found):
            continue
        if not measured:
            why = "this run measured no throughput case"
        else:
            why = f"the saved run {saved or '?'} has none of this run's {measured} case(s)"
        found.append(Finding("*", spec, CANNOT_JUDGE, f"nothing compared: {why}"))
    return found
