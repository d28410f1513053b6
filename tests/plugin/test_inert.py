"""Installed but not used, the plugin changes nothing in a run.

A plain project (``def test_a(): ...``) in an environment with the plugin
installed: its tests see the default SIGTERM and SIGINT handlers, the output
has no ``dflash`` line, no file appears, no report hook does work, and under
``-n 2`` each ``--dist`` mode places the tests exactly as a run without the
plugin (``-p no:specdecode``) does. Before: five ``dflash:`` header lines, both
handlers replaced by the plugin's, every report through its scrubber.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from typing import Any

import pytest

from pytest_specdecode.output import redact
from pytest_specdecode.session import inert

# The plain project: two modules, one with functions, one with a class, so loadfile and
# loadscope both see exactly two work units for two workers (a deterministic placement).
PLAIN = {
    "test_one": "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n",
    "test_two": "class TestC:\n    def test_c1(self):\n        pass\n\n"
    "    def test_c2(self):\n        pass\n",
}
# Records, per test, the worker that ran it and the signal handlers it saw: a conftest
# of the project (it holds no fixture or marker of the plugin).
RECORDER = """
import json, os, signal
import pytest

@pytest.fixture(autouse=True)
def _record(request):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    line = {
        "test": request.node.nodeid,
        "worker": worker,
        "sigterm": repr(signal.getsignal(signal.SIGTERM)),
        "sigint": repr(signal.getsignal(signal.SIGINT)),
    }
    with open(os.path.join(str(request.config.rootpath), f"ran-{worker}.jsonl"), "a") as fh:
        fh.write(json.dumps(line) + "\\n")
"""
# loadfile and loadscope: two files (and two scopes), one per worker, whichever is first.
BY_FILE = {
    frozenset({"test_one.py::test_a", "test_one.py::test_b"}),
    frozenset({"test_two.py::TestC::test_c1", "test_two.py::TestC::test_c2"}),
}
DURATION = re.compile(r"(\d+ passed) in [\d.]+s.*$")
EXPECTED_TESTS = {
    "test_one.py::test_a",
    "test_one.py::test_b",
    "test_two.py::TestC::test_c1",
    "test_two.py::TestC::test_c2",
}


@pytest.fixture
def plain(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """The plain project, in an environment with no ``DFLASH_*`` variable."""
    for name in [n for n in os.environ if n.startswith("DFLASH_")]:
        monkeypatch.delenv(name)
    pytester.makepyfile(**PLAIN)
    pytester.makeconftest(RECORDER)
    return pytester


def run(project: pytest.Pytester, *args: str, plugin: bool = True) -> dict[str, Any]:
    """One run in a subprocess (signals and workers are real); what it showed, left and ran."""
    for old in project.path.glob("ran-*.jsonl"):
        old.unlink()
    tmp = project.path / "tmpdir"
    tmp.mkdir(exist_ok=True)
    before = set(os.listdir(project.path))
    flags = ["-p", "no:cacheprovider", "-p", "no:randomly", "-v"]
    off = [] if plugin else ["-p", "no:specdecode"]
    # TMPDIR inside the project: a file the run leaves in the temporary directory shows.
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *flags, *off, *args],
        cwd=project.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    ran = [
        json.loads(line)
        for path in sorted(project.path.glob("ran-*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    left = set(os.listdir(project.path)) - before - {f"ran-{r['worker']}.jsonl" for r in ran}
    left |= {f"tmpdir/{name}" for name in os.listdir(tmp)}
    for name in left:  # the next run starts from the same project
        shutil.rmtree(project.path / name, ignore_errors=True)
    return {"ret": proc.returncode, "out": proc.stdout + proc.stderr, "ran": ran, "left": left}


def placement(result: dict[str, Any]) -> set[frozenset[str]]:
    """Which tests ran together on one worker (the worker's name aside: which of gw0 and
    gw1 becomes ready first is the machine's timing, not the scheduler's choice)."""
    per: dict[str, set[str]] = {}
    for record in result["ran"]:
        per.setdefault(record["worker"], set()).add(record["test"])
    return {frozenset(tests) for tests in per.values()}


def scheduler(result: dict[str, Any]) -> str:
    found = re.search(r"scheduling tests via (\w+)", result["out"])
    assert found, result["out"]
    return found.group(1)


@pytest.mark.slow
def test_a_plain_run_sees_default_handlers_no_dflash_line_and_no_file(
    plain: pytest.Pytester,
) -> None:
    used = run(plain)
    unused = run(plain, plugin=False)
    assert used["ret"] == unused["ret"] == 0, used["out"]
    assert {r["test"] for r in used["ran"]} == EXPECTED_TESTS
    for record in used["ran"]:
        assert record["sigterm"] == repr(signal_default("SIGTERM")), record
        assert record["sigint"] == repr(signal_default("SIGINT")), record
    assert not dflash_lines(used["out"]), used["out"]
    assert used["left"] == unused["left"], used["left"]
    assert ".dflash" not in used["left"]
    # The output is the output of a run without the plugin, line for line (the plugin
    # list and the duration aside).
    assert shown(used["out"]) == shown(unused["out"])


def signal_default(name: str) -> Any:
    return signal.SIG_DFL if name == "SIGTERM" else signal.default_int_handler


def dflash_lines(out: str) -> list[str]:
    """The lines that name dflash (the project's directory, named after the test, aside)."""
    return [line for line in shown(out) if "dflash" in line.lower()]


def shown(out: str) -> list[str]:
    return [
        DURATION.sub(r"\1", line)
        for line in out.splitlines()
        if not line.startswith(("plugins:", "rootdir:"))
    ]


# xdist's own scheduler for each mode; which tests ran together on one worker (None: the
# machine's timing decides, each test once). loadfile and loadscope are also compared
# with a run without the plugin; load and each place by rule (kept cheap: one run each).
DIST = {
    "load": ("LoadScheduling", None),
    "each": ("EachScheduling", {frozenset(EXPECTED_TESTS)}),
    "loadfile": ("LoadFileScheduling", BY_FILE),
    "loadscope": ("LoadScopeScheduling", BY_FILE),
}


@pytest.mark.slow
@pytest.mark.parametrize("dist", list(DIST))
def test_under_xdist_each_dist_mode_places_tests_as_without_the_plugin(
    plain: pytest.Pytester, dist: str
) -> None:
    used = run(plain, "-n", "2", "--dist", dist)
    assert used["ret"] == 0, used["out"]
    name, together = DIST[dist]
    # xdist's own scheduler, under its own name, said nothing about.
    assert scheduler(used) == name
    assert not dflash_lines(used["out"]), used["out"]
    # pytest-benchmark's own directory and Python's bytecode of the test files (when
    # bytecode is written), made without this plugin too (compared in the serial test
    # above): nothing else, nothing of ours.
    assert used["left"] <= {".benchmarks", "__pycache__"}, used["left"]
    runs = sorted(r["test"] for r in used["ran"])
    assert runs == sorted([*EXPECTED_TESTS] * (2 if dist == "each" else 1))
    if together is not None:
        assert placement(used) == together
    # The workers' tests see the default handlers, as in a run without the plugin.
    for record in used["ran"]:
        assert record["sigterm"] == repr(signal.SIG_DFL), record
        assert record["sigint"] == repr(signal.default_int_handler), record
    if dist in ("loadfile", "loadscope"):
        unused = run(plain, "-n", "2", "--dist", dist, plugin=False)
        assert scheduler(unused) == name
        assert placement(unused) == placement(used)
        assert {(r["sigterm"], r["sigint"]) for r in unused["ran"]} == {
            (r["sigterm"], r["sigint"]) for r in used["ran"]
        }


def test_a_plain_run_registers_no_session_and_scrubs_no_report(
    plain: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(redact, "scrub_report", lambda report, redactor: calls.append(report))
    plain.makepyfile(test_three="def test_fails():\n    assert False\n")
    seen: dict[str, Any] = {}

    class Look:
        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(self, session: pytest.Session) -> None:
            manager = session.config.pluginmanager
            seen["session"] = manager.get_plugin("specdecode-session")
            seen["dormant"] = manager.get_plugin("specdecode-dormant")

    result = plain.runpytest("-p", "no:cacheprovider", plugins=[Look()])
    result.assert_outcomes(passed=4, failed=1)
    assert seen["session"] is None
    assert isinstance(seen["dormant"], inert.Dormant)
    assert calls == []  # no report went through the scrubber
    assert not dflash_lines(result.stdout.str())


def test_a_secret_in_the_environment_is_still_masked_in_a_plain_run(
    plain: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not a use of the plugin, but a secret it knows never shows, used or not.
    monkeypatch.setenv("DFLASH_API_KEY", "sk-plain-run-secret-1234")
    plain.makepyfile(
        test_three="import os\ndef test_fails():\n    assert os.environ['DFLASH_API_KEY'] == 'x'\n"
    )
    result = plain.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=1)
    assert "sk-plain-run-secret-1234" not in result.stdout.str()
    assert "***" in result.stdout.str()


@pytest.mark.parametrize(
    ("args", "ini", "used"),
    [
        ((), "", False),
        (("-k", "a", "-v"), "", False),
        (("--dflash-restart", "always"), "", True),
        (("--dflash-dry-run",), "", True),
        (("-o", "dflash_restart=always"), "", True),
        ((), "dflash_report = r.json\n", True),
        ((), "dflash_system_prompt = be brief\n", True),  # an ini-only key
    ],
)
def test_a_dflash_option_or_ini_key_counts_as_use(
    pytester: pytest.Pytester, args: tuple[str, ...], ini: str, used: bool
) -> None:
    pytester.makeini(f"[pytest]\n{ini}")
    assert inert.explicitly_used(pytester.parseconfig(*args)) is used


def test_an_option_set_makes_the_session_at_once_with_its_header(
    plain: pytest.Pytester,
) -> None:
    result = plain.runpytest("-p", "no:cacheprovider", "--dflash-restart", "always")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["dflash: target localhost *restart always"])


def test_a_test_needing_a_config_starts_the_session_after_collection(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_plain="def test_a():\n    pass\n",
        test_uses="def test_b(dflash_service):\n    pass\n",
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--collect-only")
    assert result.ret == pytest.ExitCode.OK
    # pytest wrote its header before anyone knew: the session's lines follow the collection.
    result.stdout.fnmatch_lines(["collected 2 items", "dflash: target localhost *"])


def test_importing_the_plugin_loads_none_of_the_service_client_or_their_libraries() -> None:
    code = (
        "import sys, pytest; before = set(sys.modules); import pytest_specdecode.plugin; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    heavy = ("requests", "urllib3", "aiohttp", "xdist", "execnet", "filelock", "msgspec")
    assert not [m for m in loaded if m.split(".")[0] in heavy], loaded
    ours = {"service", "client", "session", "report", "throughput", "coding", "search"}
    # The session package's light modules: the hooks users implement and this guard.
    light = {f"pytest_specdecode.session{m}" for m in ("", ".hookspecs", ".inert")}
    assert not [m for m in loaded if m.split(".")[:2][-1] in ours and m not in light], loaded
