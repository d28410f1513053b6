"""Everything a run leaves behind: JSON report, comparison, gates, plots, CI summary.

:class:`RunOutputs` is driven by the session's hooks: :meth:`update` after each
test (the report is rewritten atomically, so an interrupted run keeps what it
measured), :meth:`finish` once at the end (comparison, gates, plots, the
GitHub step summary).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.config.spec import ConfigError
from pytest_specdecode.output import redact
from pytest_specdecode.report import (
    break_even,
    client_limit,
    degenerate,
    digest,
    gates,
    json_report,
    verdict,
)
from pytest_specdecode.report.model import ConfigResults, Report
from pytest_specdecode.report.results import RunResults
from pytest_specdecode.throughput import comparison as compare
from pytest_specdecode.throughput import fingerprint, stats


class RunOutputs:
    """The run's report data and the files made from it."""

    def __init__(
        self,
        settings: Settings,
        results: RunResults,
        root: Path,
        *,
        redactor: redact.Redactor | None = None,
    ) -> None:
        self.settings = settings
        # Everything below is made from data(): the JSON report, the Markdown
        # summary, the plots and the terminal summary all get masked text.
        self.redactor = redactor or redact.for_settings(settings)
        self.results = results
        self.root = root
        # Bad --dflash-compare inputs are usage errors, found before any test runs.
        self.fail_specs = _fail_specs(settings)
        self.baseline_label, self.baseline = _load_baseline(settings, bool(self.fail_specs))
        # The saved runs beside the compared one, read now: this run's own save comes later.
        self.history = _load_history(settings) if self.baseline and self.fail_specs else None
        self.speedup_label, self.speedup_rows = _load_speedup_baseline(settings)
        if settings.plot:
            _require_plots()
        _check_paths(settings, root)
        # Outputs never crash the run: a write that fails later is one warning line.
        self._failed_writes: set[str] = set()
        # Set by the session once a test of ours is collected: an interrupted run then
        # writes its report even before any test of ours reported (a readiness wait).
        self.ours = False
        self.phase: str | None = None  # what the run was doing (the session says)
        self._meta: dict[str, Any] | None = None
        # The run's coding problems as json_report.problem_set, if they load (the session's).
        self.problem_set: Callable[[], Mapping[str, str] | None] | None = None
        self._start = datetime.now(timezone.utc)
        self._started = self._start.isoformat(timespec="seconds")
        self._paths: tuple[Path, Path | None] | None = None
        self.compare: dict[str, Any] | None = None
        self.gate_lines: list[str] = []
        self.gate_outcomes: list[gates.Outcome] = []
        self.final: dict[str, Any] = {}
        self.notes: list[str] = []
        # The load client's null-server calibration (throughput/calibration.py), once run.
        self.calibration: dict[str, Any] | None = None

    def meta(self) -> dict[str, Any]:
        """Run metadata, gathered on first use: a run without our tests never pays
        for it (it asks git for the commit)."""
        if self._meta is None:
            self._meta = json_report.metadata(self.settings, self._started, self.root)
            found = self.problem_set() if self.problem_set else None
            if found is not None:  # --dflash-resume compares it (report.resume)
                self._meta["settings"]["problem_set"] = json_report.problem_records(found)
        return self._meta

    @property
    def report_path(self) -> Path | None:
        """Where the report goes; None when the run measured nothing of ours (and was not
        interrupted while it had tests of ours to run)."""
        interrupted = bool(self.final.get("interrupted")) and self.ours
        if not (self.settings.report and (self.results.configs or interrupted)):
            return None
        return self._run_paths()[0]

    @property
    def report_copy(self) -> Path | None:
        """The copy of this run's report named after its start time (None with a
        ``{now}``/``{n}`` path: that file is the run's own already)."""
        return self._run_paths()[1] if self.report_path is not None else None

    def _run_paths(self, data: Report | None = None) -> tuple[Path, Path | None]:
        # Chosen once, at the first write, which claims them: {n} is the next free
        # number then, and a copy's name is one no other run can take.
        if self._paths is None:
            if data is None:
                return json_report.run_paths(self.settings.report, self.root, self._start)
            self._paths = json_report.claim_paths(
                self.settings.report, self.root, self._start, data
            )
        return self._paths

    def report(self) -> Report:
        """The run report as it stands: metadata, per-config results, comparison, gates,
        outcome, and the values judged from them (speedups, verdict, break-even)."""
        s = self.settings
        data = {
            **self.meta(),
            **self.results.to_json(),
            "intervals": stats.METHOD,
            "calibration": self.calibration,
            "compare": self.compare,
            "gates": {
                "failed": self.gate_lines,
                # Every gate's verdict as the summary shows it, passing ones too.
                "summary": [o.shown for o in self.gate_outcomes],
                "min_pass_rate": s.min_pass_rate,
                "min_accept_length": s.min_accept_length,
                "max_repetition": s.max_repetition,
                "compare_fail": list(s.compare_fail),
            },
            **self.final,
        }
        masked: dict[str, Any] = self.redactor.value(data)
        # The one conversion: every reader below (renderers, gates, resume, search) takes it.
        found = Report.from_dict(masked)
        self._judge(found)
        # Digests of the records as written (masked): --dflash-resume checks them.
        digest.sign(found)
        return found

    def _judge(self, report: Report) -> None:
        """The values judged from ``report``, set on it (:func:`judge`); what comes from
        outside it (a saved run's rows, the gates the configs failed) is masked first, as
        the report's own text is."""
        saved = self.speedup_rows or self.baseline or []
        label = self.speedup_label if self.speedup_rows else self.baseline_label
        excluded: dict[str, list[str]] = {}
        compared: list[ConfigResults] = []
        name = self.redactor.text(saved_name(self.baseline_label))
        if any(c.throughput for c in report.configs):
            excluded = self.redactor.value(gates.config_failures(self.settings, self.results))
            # A compared run's configs are ranked beside this run's: "(saved run NNNN)".
            found = verdict.saved_configs(report, self.baseline or [], name)
            compared = msgspec.convert(
                self.redactor.value(msgspec.to_builtins(found)), list[ConfigResults]
            )
        judge(
            report,
            self.settings.max_repetition,
            saved=saved,
            saved_label=None if label is None else self.redactor.text(label),
            excluded=excluded,
            compared=compared,
            compared_name=name,
        )

    def update(self) -> None:
        """Rewrite the report (after each test)."""
        if self.report_path is None:
            return
        data = self.report()
        with self._warn_on_failure("the report", self.settings.report):
            first = self._paths is None  # this write claims the run's own file
            path, copy = self._run_paths(data)
            if copy is not None or not first:
                # The latest report is replaced atomically: readers see the old or the new.
                json_report.write_atomic(path, data)
            if copy is not None and not first:
                json_report.write_atomic(copy, data)

    @contextlib.contextmanager
    def _warn_on_failure(self, what: str, where: str) -> Iterator[None]:
        """A failed write is one warning line (once per output), never the run's error."""
        try:
            yield
        except (OSError, ValueError) as exc:
            if what not in self._failed_writes:
                self._failed_writes.add(what)
                reason = f"{type(exc).__name__}: {exc}" if not isinstance(exc, OSError) else exc
                self.notes.append(
                    f"dflash: WARNING: could not write {what} ({where!r}): {reason}; "
                    "the summary above still holds the run's results"
                )

    def finish(self, exitstatus: int) -> int:
        """Compare, apply the gates, write everything; return the run's exit status."""
        regressions = self._compare()
        findings = (self.compare or {}).get("findings")
        self.gate_outcomes = gates.outcomes(self.settings, self.results, regressions, findings)
        self.gate_lines = [o.line for o in self.gate_outcomes if not o.passed]
        status = gates.exit_status(exitstatus, self.settings, self.results, self.gate_lines)
        self.final = {
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "exitstatus": status,
            "interrupted": exitstatus == 2,
            **({"interrupted_during": self.phase} if exitstatus == 2 and self.phase else {}),
        }
        self.update()
        if self.results.configs:
            self._policy()
            self._plots()
            self._html()
            self._step_summary()
        return status

    def _policy(self) -> None:
        """The speculation policy file (report/policy.py); a failed write is one line."""
        if not self.settings.policy:
            return
        from pytest_specdecode import statefiles
        from pytest_specdecode.report import policy

        found = policy.build(self.report())
        if found is None:
            return
        with self._warn_on_failure("the policy", self.settings.policy):
            path = self.root / self.settings.policy
            path.parent.mkdir(parents=True, exist_ok=True)
            statefiles.write_json(path, found, indent=2)
            self.notes.append(f"dflash policy: {self.settings.policy} ({policy.describe(found)})")

    def fail_after(self, outcome: gates.Outcome) -> int:
        """A gate failed after :meth:`finish` (pytest-benchmark's own, at its summary): it
        joins the gates, the exit status and the outputs; returns the new status."""
        self.gate_outcomes.append(outcome)
        self.gate_lines.append(outcome.line)
        status = int(self.final.get("exitstatus", gates.OK))
        if status == gates.OK:
            self.final["exitstatus"] = status = gates.TESTS_FAILED
        self.update()
        if self.results.configs:
            self._html()
        return status

    def _compare(self) -> list[str]:
        if self.baseline is None:
            return []
        # Each case with where it ran, as its saved benchmark says (runner.py).
        here = {
            simulated: fingerprint.of_run(self.settings, simulated=simulated)
            for simulated in (False, True)
        }
        current = [
            compare.CaseRow(
                key=t.key or t.case,
                fullname=t.key,
                case=t.case,
                config=r.label,
                tok_s=t.metrics.tok_s,
                accept_length=t.metrics.accept_length,
                extra_info={
                    **msgspec.to_builtins(t.metrics),
                    fingerprint.KEY: here[bool(r.service.get("simulated"))],
                },
            )
            for r in self.results.ordered()
            for t in r.throughput.values()
        ]
        if not current and not self.fail_specs:
            return []
        deltas = compare.pair(self.baseline, current)
        # A gate with nothing to compare says so (cannot judge), never passes silently.
        findings = compare.check(
            deltas, self.fail_specs, self.history, saved_name(self.baseline_label)
        )
        self.compare = {
            "baseline": self.baseline_label,
            # Which config(s) the saved run measured: what "saved" means in the table.
            "baseline_configs": list(dict.fromkeys(r.config for r in self.baseline if r.config)),
            "table": compare.render_compare(deltas, "saved", "now"),
            "noise_method": stats.BETWEEN_METHOD,
            "findings": [
                {
                    "case": f.case,
                    "spec": str(f.spec),
                    "status": f.status,
                    "line": f.line,
                    "noise": f.noise,
                    "saved_runs": f.saved_runs,
                }
                for f in findings
            ],
            "rows": [
                {
                    "case": d.case,
                    "config": d.current.config if d.current else None,
                    "tok_s_saved": d.value("tok_s", "base"),
                    "tok_s_now": d.value("tok_s", "current"),
                    "tok_s_change_pct": d.change_pct("tok_s"),
                    "accept_length_saved": d.value("accept_length", "base"),
                    "accept_length_now": d.value("accept_length", "current"),
                }
                for d in deltas
            ],
        }
        return [f.line for f in findings if f.status == "fail"]

    def _plots(self) -> None:
        if not self.settings.plot:
            return
        from pytest_specdecode.report.plots import write_plots

        written: list[Path] = []
        with self._warn_on_failure("the plots", self.settings.plot):
            written = write_plots(self.report(), self.root / self.settings.plot)
        if written:
            self.notes.append(f"dflash plots: {len(written)} PNGs in {self.settings.plot}")

    @property
    def html_path(self) -> Path | None:
        """Where the HTML report goes; None without one (or when the run measured nothing)."""
        if not self.settings.html or self.report_path is None:
            return None
        return self.root / self.settings.html

    def _html(self) -> None:
        """The self-contained HTML page; a failure is one line, never the run's end."""
        path = self.html_path
        if path is None:
            return
        try:
            from pytest_specdecode.report import html

            written = html.write(self.report(), path)
            size = written.stat().st_size
        except Exception as exc:  # an output never crashes the run (docs/report.md)
            reason = (exc.strerror if isinstance(exc, OSError) else None) or exc
            self.notes.append(
                f"dflash warning: could not write the HTML report {str(path)!r}: "
                f"{type(exc).__name__}: {reason}"
            )
            return
        self.notes.append(f"dflash html report: {path} ({size / 1e6:.1f} MB)")

    def _step_summary(self) -> None:
        from pytest_specdecode.report.markdown import append_step_summary

        try:
            if append_step_summary(self.report()):
                self.notes.append("dflash: summary appended to GITHUB_STEP_SUMMARY")
        except OSError as exc:
            self.notes.append(f"dflash: could not write GITHUB_STEP_SUMMARY: {exc}")


def judge(
    report: Report,
    bound: float,
    *,
    saved: Iterable[compare.CaseRow] = (),
    saved_label: str | None = None,
    excluded: Mapping[str, Sequence[str]] | None = None,
    compared: Sequence[ConfigResults] = (),
    compared_name: str | None = None,
) -> None:
    """Set on ``report`` the values judged from it, each from the report as set so far:
    every throughput case's speedup (against this run's NONE, else the saved run's rows
    ``saved``), repetition (``bound``: ``--dflash-max-repetition``) and client limit,
    then the break-even loads and, with throughput cases, the verdict and the Pareto
    front (``excluded``: the gates each config failed; ``compared``: a compared run's
    configs, :func:`verdict.saved_configs` of the run ``compared_name``).
    The one place the judged values are set."""
    cases = [case for _, case in verdict.throughput_cases(report)]
    found = verdict.speedups(report, saved, saved_label)
    for case, speedup in zip(cases, found, strict=True):
        case.speedup = speedup
    report.speedup = verdict.speedup_method(report, found)
    repeats = degenerate.findings(report.configs, bound)
    for case, repetition in zip(cases, degenerate.case_repetitions(report, repeats), strict=True):
        case.repetition = repetition
    report.repetition = degenerate.repetition(repeats, bound)
    for case, limited in zip(cases, client_limit.client_limited(report), strict=True):
        case.client_limited = limited
    # Where each config's speedup crosses 1.0 as the load grows (a list; empty without).
    report.break_even = break_even.records(report)
    if cases:
        report.verdict = verdict.decide(report, excluded or {}, compared, compared_name)


def saved_name(label: str | None) -> str:
    """A saved run as gate lines name it: ``0003_b8`` for ``0003_b8.json``."""
    return (label or "?").removesuffix(".json")


def _load_baseline(
    settings: Settings, gated: bool
) -> tuple[str | None, list[compare.CaseRow] | None]:
    """The saved run to compare with: --dflash-compare, else pytest-benchmark's
    --benchmark-compare (as its own --benchmark-compare-fail does)."""
    if settings.compare:
        source, spec, storage = "--dflash-compare", settings.compare, ".benchmarks"
    elif settings.benchmark_compare:
        source, spec = "--benchmark-compare", settings.benchmark_compare
        storage = settings.benchmark_storage
    else:
        if gated:
            raise ConfigError(
                "--dflash-compare-fail needs a saved run to compare with: --dflash-compare "
                "PATH|NNNN, or pytest-benchmark's --benchmark-compare[=NNNN]"
            )
        return None, None
    try:
        path = compare.find_saved_run(spec, storage)
        return path.name, compare.load_run(path)
    except compare.CompareError as exc:
        if source == "--benchmark-compare" and not gated:
            return None, None  # pytest-benchmark warns about it itself
        raise ConfigError(f"{source}: {exc}") from None


def _load_history(settings: Settings) -> compare.History | None:
    """The saved runs beside the compared one (None when it cannot be found again)."""
    from pytest_specdecode.throughput.saved_runs import load_history

    if settings.compare:
        spec, storage = settings.compare, ".benchmarks"
    else:
        spec, storage = str(settings.benchmark_compare), settings.benchmark_storage
    try:
        return load_history(compare.find_saved_run(spec, storage))
    except compare.CompareError:
        return None


def _load_speedup_baseline(settings: Settings) -> tuple[str | None, list[compare.CaseRow]]:
    if not settings.baseline:
        return None, []
    try:
        path = compare.find_saved_run(settings.baseline, settings.benchmark_storage)
        rows = compare.load_run(path)
    except compare.CompareError as exc:
        raise ConfigError(f"--dflash-baseline: {exc}") from None
    if not any(row.algorithm == "NONE" for row in rows):
        raise ConfigError(
            f"--dflash-baseline: {str(path)!r} holds no case of algorithm NONE; save a "
            "baseline with --dflash-config algorithm=NONE --benchmark-save=none"
        )
    return path.name, rows


def _check_paths(settings: Settings, root: Path) -> None:
    """Output paths that cannot be written are usage errors, before any test runs (the
    default report path only when written: a run of other tests must not fail on it)."""
    from pytest_specdecode.report import writable

    if settings.report and settings.report != Settings.report:
        named = settings.report.replace("{now}", "now").replace("{n}", "0001")
        writable.check_file("--dflash-report", root / named)
    if settings.plot:
        writable.check_dir("--dflash-plot", root / settings.plot)


def _fail_specs(settings: Settings) -> list[compare.FailSpec]:
    try:
        return [compare.parse_fail_spec(text) for text in settings.compare_fail]
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(f"--dflash-compare-fail: {exc}") from None


def _require_plots() -> None:
    from pytest_specdecode.report.plots import PlotsUnavailable, require_matplotlib

    try:
        require_matplotlib()
    except PlotsUnavailable as exc:
        raise ConfigError(f"--dflash-plot: {exc}") from None
