"""pytest entry point: options, markers, hooks and fixtures only.

The work lives in plain modules that tests can call without pytest; the
session object (:class:`pytest_specdecode.session.core.SpecDecodeSession`) holds
the per-run state, like pytest-xdist's ``DSession``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_specdecode.config import options, rootdir_guard
from pytest_specdecode.output import redact
from pytest_specdecode.session import hookspecs, inert

if TYPE_CHECKING:
    # Imported when used: a run that does not use the plugin never loads the service
    # layer, the client or the runners (session/inert.py).
    from pytest_specdecode.client import SGLangClient
    from pytest_specdecode.coding import Problem
    from pytest_specdecode.coding.runner import CodingRunner
    from pytest_specdecode.config.settings import Settings
    from pytest_specdecode.config.spec import SpecConfig
    from pytest_specdecode.service.manager import ServiceHandle
    from pytest_specdecode.session.core import SpecDecodeSession
    from pytest_specdecode.throughput.runner import LosslessChecker, ThroughputRunner
    from pytest_specdecode.throughput.workload import ThroughputCase

SESSION_KEY = pytest.StashKey["SpecDecodeSession"]()
SCRUBBER_KEY = pytest.StashKey[redact.ReportScrubber]()

MARKERS = (
    "dflash(budget=None, topk=None, window=None, algorithm=None, draft_model=None, "
    "**extra_flags): run this test against a server restarted with this speculative-decoding "
    "config; a list value runs the test once per value",
    "coding: a coding-correctness test (one problem asked to the model and checked in a sandbox)",
    "throughput(contexts=None, concurrency=None, output_tokens=None, domains=None, "
    "request_rates=None): throughput cases (context x load x prompt domain)",
    "lossless: greedy outputs under the config must equal the non-speculative baseline",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    # Through the recorder: a run with one of these ini keys set uses the plugin.
    options.add_options(cast(pytest.Parser, inert.IniRecorder(parser)))


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    from pytest_specdecode.config.settings import SettingsError, resolve
    from pytest_specdecode.config.spec import ConfigError

    for line in MARKERS:
        config.addinivalue_line("markers", line)
    if (misread := rootdir_guard.check(config)) is not None:
        raise pytest.UsageError(redact.for_options(config)(misread))
    try:
        settings = resolve(config)  # bad values are usage errors, used or not
    except (SettingsError, ConfigError) as exc:
        raise pytest.UsageError(redact.for_options(config)(str(exc))) from None
    if inert.explicitly_used(config):
        _start(config, settings)
        return
    # Not used (yet): the session starts at the first test that needs a config.
    dormant = inert.Dormant(config, lambda: _start(config, settings, late=True))
    config.pluginmanager.register(dormant, "specdecode-dormant")
    if (secrets := redact.for_settings(settings)).secrets:
        _scrub_reports(config, secrets)
    if inert.xdist_controller(config):
        inert.prepare_xdist(config, settings)


def _start(config: pytest.Config, settings: Settings, *, late: bool = False) -> SpecDecodeSession:
    from pytest_specdecode.config.settings import SettingsError
    from pytest_specdecode.config.spec import ConfigError
    from pytest_specdecode.search import missing_optuna
    from pytest_specdecode.session.core import SpecDecodeSession

    if settings.search and (line := missing_optuna()) is not None:
        raise pytest.UsageError(line)  # before the session starts anything
    try:
        session = SpecDecodeSession(config, settings, late=late)
    except (SettingsError, ConfigError) as exc:
        raise pytest.UsageError(redact.for_options(config)(str(exc))) from None
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(session, "specdecode-session")
    _scrub_reports(config, session.redactor)  # outside the session's report wrapper
    if session.settings.search:
        from pytest_specdecode.search.loop import register
        from pytest_specdecode.session.items import item_config

        loop = register(config, session.settings, session.outputs, session.results, item_config)
        loop.workers_asked = session.target.dry_workers
        loop.before_space = session.carry_from_workers  # a resumed run's, under xdist
    return session


def _scrub_reports(config: pytest.Config, redactor: redact.Redactor) -> None:
    """Every report masked by ``redactor`` from now on (the session's replaces the
    dormant run's)."""
    if (scrubber := config.stash.get(SCRUBBER_KEY, None)) is not None:
        config.pluginmanager.unregister(scrubber)
    scrubber = config.stash[SCRUBBER_KEY] = redact.ReportScrubber(redactor)
    config.pluginmanager.register(scrubber, "specdecode-scrubber")


def _session(request: pytest.FixtureRequest) -> SpecDecodeSession:
    return request.config.stash[SESSION_KEY]


@pytest.fixture(scope="session")
def dflash_config(request: pytest.FixtureRequest) -> SpecConfig:
    """The speculative-decoding config the current test runs under.

    From the test's ``dflash`` marker, ``--dflash-config``, ``--dflash-sweep``
    and the ``dflash_config`` ini default, validated at collection.
    """
    config: SpecConfig = request.param
    return config


@pytest.fixture(scope="session")
def dflash_service(
    request: pytest.FixtureRequest,
    dflash_config: SpecConfig,
    tmp_path_factory: pytest.TempPathFactory,
) -> ServiceHandle:
    """A server verified to run ``dflash_config``: restarted, ready, checked.

    Session-scoped per config: the server restarts once per distinct config.
    Tests behind a failed readiness gate error with the gate's message.
    """
    from pytest_specdecode.service.manager import OtherConfigLive, ServiceUnavailable

    session = _session(request)
    log_dir = tmp_path_factory.getbasetemp() / "dflash-logs"
    log_dir.mkdir(exist_ok=True)
    # Fail or skip outside the except blocks, so no exception chain is shown.
    failed = skipped = None
    try:
        handle = session.services.acquire(dflash_config, log_dir)
    except ServiceUnavailable as exc:
        failed = str(exc)
    except OtherConfigLive as exc:
        skipped = str(exc)
    if failed is not None:
        pytest.fail(failed, pytrace=False)
    if skipped is not None:
        pytest.skip(skipped)
    return handle


@pytest.fixture
def dflash_problem(request: pytest.FixtureRequest) -> Problem:
    """One coding problem; a test using it runs once per problem (``test_x[fib]``).

    The problems: the built-ins (or ``--dflash-dataset humaneval``), the TOML
    files of ``--dflash-problems`` / ini ``dflash_problems`` (``[[problem]]``
    tables) and the ``Problem`` lists returned by
    ``pytest_dflash_problems(config)`` hooks in conftest.py files. Pass it to
    ``dflash_coding.check(dflash_problem)``.
    """
    problem: Problem = _param(request, "dflash_problem")
    return problem


@pytest.fixture
def dflash_case(request: pytest.FixtureRequest) -> ThroughputCase:
    """One throughput case; a test using it runs once per case (``test_x[ctx1024-c8-chat]``).

    Cases are context x load x prompt domain from ``--dflash-contexts``,
    ``--dflash-concurrency``, ``--dflash-request-rate`` and ``--dflash-domains``
    (or the test's ``throughput(...)`` marker). Pass it to
    ``dflash_throughput.run(dflash_case, benchmark)``.
    """
    case: ThroughputCase = _param(request, "dflash_case")
    return case


def _param(request: pytest.FixtureRequest, name: str) -> Any:
    if not hasattr(request, "param"):
        pytest.fail(f"{name} has no value: the plugin parametrizes it at collection", pytrace=False)
    return request.param


@pytest.fixture
def dflash_client(dflash_service: ServiceHandle) -> SGLangClient:
    """An SGLang HTTP client bound to the verified server of this test's config."""
    return dflash_service.client


@pytest.fixture
def dflash_throughput(
    request: pytest.FixtureRequest, dflash_service: ServiceHandle
) -> ThroughputRunner:
    """Runs a throughput case (``.run(case, benchmark)``) against the verified server."""
    from pytest_specdecode.throughput.runner import ThroughputRunner

    session = _session(request)
    # -q and quieter: no line per round (the readiness wait is still shown above -qq).
    quiet = request.config.get_verbosity() < 0
    progress = None if quiet else session.progress
    return ThroughputRunner(
        session.settings,
        dflash_service,
        request.node,
        progress,
        session.lossless_baseline,
        alone=session.holds_host_alone(),
        calibration=session.calibrating.found,
    )


@pytest.fixture
def dflash_lossless(
    request: pytest.FixtureRequest, dflash_service: ServiceHandle
) -> LosslessChecker:
    """Records the non-speculative baseline or compares greedy outputs with it."""
    from pytest_specdecode.throughput.runner import LosslessChecker

    session = _session(request)
    return LosslessChecker(
        session.lossless_baseline,
        dflash_service,
        request.node,
        session.settings,
        calibration=session.calibrating.found,
    )


@pytest.fixture
def dflash_coding(request: pytest.FixtureRequest, dflash_service: ServiceHandle) -> CodingRunner:
    """Asks the model a coding problem and checks the answer in the sandbox."""
    from pytest_specdecode.coding.runner import CodingRunner, session_checker

    settings = _session(request).settings
    checker = session_checker(request.config, settings)
    return CodingRunner(settings, dflash_service, request.node, checker=checker)
