"""The JSON run report (format 2) as typed values: what a reader of ``report.json`` gets.

Every key is snake_case and every set of records is a list (a config's lossless
checks, its pass@k figures, the verdict's excluded configs, the problem set), so a
reader never meets a key made from a label or a test id. :class:`Report` reads and
writes the file (:meth:`Report.from_json`, :meth:`Report.to_json`); the JSON Schema
shipped beside this module (``report.schema.json``) is generated from it
(:func:`schema`, checked by a test). A format-1 file is read through
:func:`~pytest_specdecode.report.upgrade.upgrade`.

Fields a newer version adds are kept out of the way: unknown keys are ignored on
reading, and every field has a default, so an older or interrupted run's report
still reads. The figures of a throughput case are typed too (:class:`Metrics`, the
flat keys of ``benchmark.extra_info``, declared where they are measured:
``throughput/metrics.py``); the facts a server told (``service``) and the
search's section (``search``) are open objects, owned by service/ and search/record.py.

This is the one shape of a report: the run converts its records once, when a test's
properties are taken (report/results.py) and when the report is assembled
(``RunOutputs.report``), and every renderer, gate, resume and the search read it.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import msgspec

from pytest_specdecode.throughput.metrics import Metrics as Metrics
from pytest_specdecode.throughput.metrics import RoundSummary as RoundSummary

FORMAT = 2
SCHEMA_FILE = "report.schema.json"


class _Record(msgspec.Struct, kw_only=True):
    """A report object: its keys in the order the report writes them."""


# --- settings -----------------------------------------------------------------


class Cases(_Record):
    """The throughput cases a run measures and the load they run under."""

    contexts: list[int] = []
    concurrency: list[int] = []
    output_tokens: int | None = None
    rounds: int | None = None
    domains: list[str] = []
    request_rates: list[float] = []
    max_concurrency: int | None = None
    rate_requests: int | None = None
    slo: str = ""


class FileDigest(_Record):
    """A problem file and a digest of its content (``unreadable`` when it could not be read)."""

    path: str
    digest: str


class Problems(_Record):
    """How the coding questions are asked."""

    dataset: str | None = None
    files: list[FileDigest] = []
    samples: int | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    api: str | None = None
    system_prompt: str | None = None
    prompt_template: str | None = None
    answer_timeout: float | None = None


class ProblemDigest(_Record):
    """One coding problem by name and a digest of its definition."""

    name: str
    digest: str


class Settings(_Record):
    """The settings that change what a run measures (``--dflash-resume`` compares them)."""

    dialect: str | None = None
    sglang_version: str | None = None
    launch_line: str | None = None
    restart_command: str | None = None
    flag_templates: list[str | None] = []
    draft_model: str | None = None
    simulator_arguments: list[str] = []
    cases: Cases = msgspec.field(default_factory=Cases)
    problems: Problems = msgspec.field(default_factory=Problems)
    problem_set: list[ProblemDigest] | None = None


# --- configs ------------------------------------------------------------------


class Config(_Record):
    """A config's values (``SpecConfig``)."""

    algorithm: str | None = None
    budget: int | None = None
    topk: int | None = None
    window: int | None = None
    draft_model: str | None = None
    extra: list[Any] = []
    steps: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The values as ``config_to_dict`` writes them (``steps`` only where set)."""
        found: dict[str, Any] = msgspec.to_builtins(self)
        if self.steps is None:
            del found["steps"]
        return found


class PassRate(_Record):
    """Mean pass@1 over the problems, and how many passed."""

    rate: float
    passed: int
    total: int


class PassAtK(_Record):
    """Mean unbiased pass@k over the problems with at least k samples."""

    k: int
    value: float


class CodingRecord(_Record):
    """One coding problem under one config."""

    problem: str
    passed: bool
    status: str = ""
    reason: str = ""
    samples: int = 1
    correct: int = 0
    latency: float | None = None
    completion_tokens: int | None = None
    accept_length: float | None = None
    generate_seconds: float | None = None
    check_seconds: float | None = None
    rechecked: int = 0
    nodeid: str = ""
    failed_answers: list[dict[str, Any]] = []
    digest: str | None = None


class Ratio(_Record):
    """A ratio with its 95% interval over ``n`` paired rounds."""

    value: float | None = None
    low: float | None = None
    high: float | None = None
    n: int | None = None


class Speedup(_Record):
    """A case's speedup over the baseline: TPOT and tok/s ratios, and which baseline."""

    tpot: Ratio | None = None
    tok_s: Ratio | None = None
    baseline: str | None = None


class CaseRepetition(_Record):
    """A case's repeated-4-gram share beside the baseline's."""

    value: float | None = None
    baseline: float | None = None
    baseline_config: str | None = None
    degenerate: bool = False


class ClientLimited(_Record):
    """Why a case's figures are the load client's, not the server's (left out of the verdict)."""

    why: str = ""


class ThroughputRecord(_Record):
    """One throughput case under one config; ``metrics`` as in ``benchmark.extra_info``."""

    case: str
    metrics: Metrics = msgspec.field(default_factory=Metrics)
    key: str = ""
    nodeid: str = ""
    speedup: Speedup | None = None
    repetition: CaseRepetition | None = None
    client_limited: ClientLimited | None = None
    digest: str | None = None


class LosslessRecord(_Record):
    """One lossless check: greedy outputs compared with the baseline's."""

    nodeid: str
    passed: bool
    detail: str = ""
    replies: int | None = None
    defects: int | None = None
    numerics: int | None = None
    divergences: list[dict[str, Any]] | None = None
    seconds: float | None = None
    digest: str | None = None


class ServerDied(_Record):
    """The server exited mid-run: why, and after how many tests."""

    reason: str
    after_tests: int


class Carried(_Record):
    """Results carried from an earlier run by ``--dflash-resume``."""

    report: str | None = None
    started: str | None = None
    git_commit: str | None = None
    tests: list[str] = []
    whole: bool = False


class StartPhases(_Record):
    """What the config's start cost, in seconds (``service/start_phases.py``).

    ``total`` and ``first_generate``: the plugin's clock from the launch; the
    phases: the server's own log lines (None where it had no such line);
    ``other``: the rest of ``total``. ``weight_cache``: ``off``, ``client`` or
    ``fell back``.
    """

    total_seconds: float
    first_generate_seconds: float | None = None
    load_seconds: float | None = None
    kv_cache_seconds: float | None = None
    graph_capture_seconds: float | None = None
    warmup_seconds: float | None = None
    other_seconds: float | None = None
    resolution_seconds: float | None = None
    weight_cache: str = "off"
    source: str = ""


class ConfigResults(_Record):
    """Everything measured under one config."""

    label: str
    key: str | None = None
    config: Config = msgspec.field(default_factory=Config)
    service: dict[str, Any] = {}
    start_phases: StartPhases | None = None
    pass_rate: PassRate | None = None
    pass_at_k: list[PassAtK] = []
    accept_length: float | None = None
    coding: list[CodingRecord] = []
    throughput: list[ThroughputRecord] = []
    lossless: list[LosslessRecord] = []
    errors: list[str] = []
    server_died: ServerDied | None = None
    died_tests: list[str] = []
    carried: Carried | None = None


class TestEntry(_Record):
    """One test phase's outcome."""

    __test__ = False  # not a test class, for pytest

    nodeid: str
    when: str
    outcome: str
    duration: float = 0.0
    config: str | None = None
    config_key: str | None = None
    carried: bool = False
    digest: str | None = None


# --- run-wide sections ----------------------------------------------------------


class ResumedFrom(_Record):
    """The report a resumed run continued."""

    report: str | None = None
    started: str | None = None
    git_commit: str | None = None


class Sweep(_Record):
    """How far the sweep got."""

    configs_done: int = 0
    configs_total: int = 0
    carried: int = 0
    elapsed_seconds: float | None = None
    left_seconds: float | None = None


class Finding(_Record):
    """A ``--dflash-compare-fail`` gate's word on one case."""

    case: str | None = None
    spec: str = ""
    status: str = ""
    line: str = ""
    noise: Any = None
    saved_runs: Any = None


class CompareRow(_Record):
    """One case beside the saved run."""

    case: str
    config: str | None = None
    tok_s_saved: float | None = None
    tok_s_now: float | None = None
    tok_s_change_pct: float | None = None
    accept_length_saved: float | None = None
    accept_length_now: float | None = None


class Compare(_Record):
    """This run against a saved pytest-benchmark run."""

    baseline: str | None = None
    baseline_configs: list[str] = []
    table: str = ""
    noise_method: str = ""
    findings: list[Finding] = []
    rows: list[CompareRow] = []


class Gates(_Record):
    """Every gate's verdict, and the thresholds set."""

    failed: list[str] = []
    summary: list[str] = []
    min_pass_rate: float | None = None
    min_accept_length: float | None = None
    max_repetition: float | None = None
    compare_fail: list[str] = []


class SpeedupMethod(_Record):
    """Where the speedups' baseline came from, and how they are computed."""

    baseline: list[str] = []
    missing: str | None = None
    method: str = ""


class DegenerateCase(_Record):
    """A case whose output repeats itself far more than the baseline's."""

    config: str
    case: str
    domain: str
    repetition: float | None = None
    baseline: float | None = None
    baseline_config: str | None = None
    degenerate: bool = True
    excerpt: str | None = None


class Repetition(_Record):
    """How output quality was judged, and the degenerate cases."""

    method: str = ""
    bound: float | None = None
    margin: float | None = None
    degenerate: list[DegenerateCase] = []


class BreakEven(_Record):
    """Where a config's speedup crosses 1.0 as the load grows."""

    config: str
    domain: str
    load_kind: str
    loads: list[float] = []
    speedups: list[float] = []
    lows: list[float | None] = []
    highs: list[float | None] = []
    crossings: int = 0
    break_even: float | None = None
    low: float | None = None
    high: float | None = None
    direction: str | None = None
    status: str = ""
    line: str = ""


class Coverage(_Record):
    """What checked a config's correctness (``checked``: coding or lossless ran for it)."""

    checked: bool = False
    passed: int | None = None
    total: int | None = None
    lossless: str = "not checked"
    accept_floor: str = "not checked"


class VerdictMember(_Record):
    """One ranked config of a load and domain: its score, interval and coverage."""

    config: str
    saved: str | None = None
    score: float | None = None
    low: float | None = None
    high: float | None = None
    best: bool = False
    coverage: Coverage = msgspec.field(default_factory=Coverage)


class Unranked(_Record):
    """A config left out of a group's ranking, and why (``inconsistent figures``, ...)."""

    config: str
    reason: str
    detail: str = ""


class VerdictGroup(_Record):
    """The answer for one load and domain: ``best_set`` holds the top config and every
    config whose interval overlaps it; ``best`` is the top alone (older readers)."""

    load: str
    domain: str
    contexts: list[int | None] = []
    best: str | None = None
    best_set: list[str] = []
    score: float | None = None
    range: list[float] | None = None
    runner_up: str | None = None
    runner_up_score: float | None = None
    margin: str | None = None
    candidates: int = 0
    ranked_by: str = ""
    members: list[VerdictMember] = []
    unranked: list[Unranked] = []


class Excluded(_Record):
    """A config kept out of the verdict, with the gates it failed."""

    config: str
    reasons: list[str] = []


class ParetoPoint(_Record):
    """One (config, load) point of a context and domain."""

    config: str
    load: str
    case: str | None = None
    req_tok_s: float | None = None
    tok_s: float | None = None
    eligible: bool = False
    front: bool = False


class Pareto(_Record):
    """The points of one context and domain, the non-dominated ones marked."""

    context: int | None
    domain: str
    points: list[ParetoPoint] = []


class Verdict(_Record):
    """Per load and domain, the best config among those that passed every gate."""

    ranked_by: str = ""
    groups: list[VerdictGroup] = []
    excluded: list[Excluded] = []
    pareto: list[Pareto] = []


class Ceiling(_Record):
    """What the load client reached at one concurrency against a null server."""

    concurrency: int
    tok_s: float
    overhead_ms_p99: float | None = None


class Calibration(_Record):
    """The load client's ceiling on this machine (the simulator at time scale 0)."""

    method: str = ""
    max_tokens: int = 0
    seconds: float = 0.0
    ceilings: list[Ceiling] = []
    skipped: list[int] = []
    error: str | None = None


class Report(_Record):
    """A run report, format 2."""

    format: int = FORMAT
    plugin: str | None = None
    pytest: str | None = None
    python: str | None = None
    started: str | None = None
    hosts: list[str] = []
    control: str | None = None
    dialect: str | None = None
    launch: str | None = None
    simulated: bool = False
    simulator_defaults: list[str] = []
    git_commit: str | None = None
    settings: Settings | None = None
    configs: list[ConfigResults] = []
    other_failures: list[str] = []
    tests: list[TestEntry] = []
    resumed_from: ResumedFrom | None = None
    sweep: Sweep | None = None
    # --dflash-search's section (search/record.py owns its fields).
    search: dict[str, Any] | None = None
    intervals: str | None = None
    calibration: Calibration | None = None
    compare: Compare | None = None
    gates: Gates = msgspec.field(default_factory=Gates)
    finished: str | None = None
    exitstatus: int | None = None
    interrupted: bool = False
    interrupted_during: str | None = None
    speedup: SpeedupMethod | None = None
    repetition: Repetition | None = None
    break_even: list[BreakEven] = []
    verdict: Verdict | None = None

    @classmethod
    def from_json(cls, data: bytes | str) -> Report:
        """A report from its file's text; ``msgspec.ValidationError`` if it is not format 2."""
        return msgspec.json.decode(data, type=cls)

    @classmethod
    def from_dict(cls, data: Any) -> Report:
        """A report from decoded JSON (``json.load``'s result)."""
        return msgspec.convert(data, type=cls)

    def to_json(self) -> bytes:
        """The report as its file holds it."""
        return msgspec.json.encode(self)

    def to_dict(self) -> dict[str, Any]:
        """The report as decoded JSON: what the renderers read."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out


def schema() -> dict[str, Any]:
    """The JSON Schema of :class:`Report`, as shipped in ``report.schema.json``."""
    found: dict[str, Any] = msgspec.json.schema(Report)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "pytest-specdecode run report, format 2",
        **found,
    }


def schema_text() -> str:
    """:func:`schema` as the shipped file holds it."""
    return json.dumps(schema(), indent=2, sort_keys=True) + "\n"


def shipped_schema() -> dict[str, Any]:
    """The JSON Schema file shipped in the package."""
    text = resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    found: dict[str, Any] = json.loads(text)
    return found


if __name__ == "__main__":  # python -m pytest_specdecode.report.model > report.schema.json
    print(schema_text(), end="")
