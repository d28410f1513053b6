"""The real SGLang 0.5.23 on the CPU, for the plugin's real-server tier.

``install.sh`` creates (or reuses, from the user's cache) a venv with
``sglang==0.5.23`` and the project's stand-in ``sgl_kernel``;
``make_tiny_model.py`` makes a tiny fp32 Llama (config and tokenizer only:
SGLang serves it with ``--load-format dummy``). Fixtures here start that
server directly (:class:`RealServer`) or give the launch line for the
plugin's own local mode (:func:`launch_line`), and run the plugin in a
nested pytest process (:func:`run_plugin`), as a user would.

Run by ``make real-server`` (``.ci/run`` too), not by ``make test``.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

import pytest

from pytest_specdecode.client.sglang import prometheus_value
from pytest_specdecode.processes.children import free_port
from pytest_specdecode.service.ownership import parent_death_signal
from pytest_specdecode.statefiles import WaitTimeout, wait_until

HERE = Path(__file__).resolve().parent
# A first start on a busy 2-core machine takes minutes (SGLang imports and
# compiles its bytecode); a later one about a minute.
READY_TIMEOUT = 900.0
# The server's flags that make it serve on the CPU with the tiny model; the KV
# pool is capped, else SGLang sizes it from the machine's free memory. An idle
# scheduler polls for requests on a whole core unless it sleeps on idle.
CPU_FLAGS = (
    *("--device", "cpu", "--attention-backend", "torch_native", "--load-format", "dummy"),
    *("--max-total-tokens", "65536", "--enable-metrics", "--sleep-on-idle"),
)
# The stand-in sgl_kernel has no kernels: SGLang's CPU engine must not look for them.
SERVER_ENV = {"SGLANG_USE_CPU_ENGINE": "1"}


@pytest.fixture(scope="session")
def sglang_python() -> Path:
    """The real SGLang venv's python (installed once per machine, minutes the first time)."""
    started = time.monotonic()
    done = subprocess.run(
        ["bash", str(HERE / "install.sh")],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(
            f"installing sglang for the CPU failed (exit {done.returncode}):\n"
            f"{done.stderr[-3000:]}",
            pytrace=False,
        )
    python = Path(done.stdout.strip().splitlines()[-1])
    sys.stderr.write(f"\nsglang venv ready in {time.monotonic() - started:.0f} s: {python}\n")
    return python


@pytest.fixture(scope="session")
def tiny_model(sglang_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny fp32 Llama made here (config, tokenizer): no model hub."""
    out = tmp_path_factory.mktemp("tiny-llama")
    subprocess.run(
        [str(sglang_python), str(HERE / "make_tiny_model.py"), str(out)],
        check=True,
        timeout=300,
        capture_output=True,
    )
    return out


def launch_line(sglang_python: Path, model: Path, *extra: str) -> str:
    """``--dflash-launch`` for the real server (the plugin adds host, port, config flags)."""
    words = [str(sglang_python), "-m", "sglang.launch_server", "--model-path", str(model)]
    return " ".join([*words, *CPU_FLAGS, *extra])


def answers(url: str, timeout: float = 5.0) -> int | None:
    """The status of ``GET url``; None while nothing answers HTTP there."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return None


def metric(base_url: str, name: str) -> float | None:
    """A counter of ``/metrics``, read as any Prometheus scraper does (gzip accepted)."""
    req = urllib.request.Request(base_url + "/metrics", headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=30) as reply:
        body = reply.read()
        if reply.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
    return prometheus_value(body.decode(), name)


# Kills a process group once its stdin ends: when these tests close it, or die however
# they die. The parent-death signal reaches SGLang's first process only, and SGLang's
# detokenizer outlived a killed run without this.
GROUP_GUARD = """
import os, signal, sys
sys.stdin.buffer.read()
try:
    os.killpg(int(sys.argv[1]), signal.SIGKILL)
except ProcessLookupError:
    pass
"""


def guard_group(pgid: int) -> subprocess.Popen[bytes]:
    """A process that SIGKILLs the group ``pgid`` once its stdin (held by us) closes."""
    return subprocess.Popen(
        [sys.executable, "-I", "-c", GROUP_GUARD, str(pgid)],
        stdin=subprocess.PIPE,
        start_new_session=True,
    )


@dataclass
class RealServer:
    """SGLang started by the tests (not by the plugin), in its own process group."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    started: float
    guard: subprocess.Popen[bytes]  # guard_group(proc.pid)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> float:
        """Until ``/health_generate`` answers 200; the seconds since the start."""

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"sglang exited {self.proc.returncode}:\n{self.log_tail()}")
            return answers(self.url + "/health_generate", timeout=30) == 200

        try:
            wait_until(ready, timeout=timeout, what="sglang ready", poll=1.0)
        except WaitTimeout:
            raise AssertionError(f"sglang not ready in {timeout} s:\n{self.log_tail()}") from None
        return time.monotonic() - self.started

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=60)
        assert self.guard.stdin is not None
        self.guard.stdin.close()  # what SGLang left of its group goes now
        self.guard.wait(timeout=60)


@contextlib.contextmanager
def real_server(
    sglang_python: Path, model: Path, log_dir: Path, *extra: str
) -> Iterator[RealServer]:
    """Start SGLang on a free port (not waiting for it); stop its process group on exit."""
    port = free_port()
    log = log_dir / f"sglang-{port}.log"
    argv = [str(sglang_python), "-m", "sglang.launch_server", "--model-path", str(model)]
    argv += [*CPU_FLAGS, "--host", "127.0.0.1", "--port", str(port), *extra]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # Stopped with these tests even when they are killed (no teardown runs then).
            preexec_fn=parent_death_signal(),
            env={**os.environ, **SERVER_ENV},
        )
    server = RealServer(proc, port, log, time.monotonic(), guard_group(proc.pid))
    try:
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class PluginRun:
    """A nested pytest run of the plugin: exit status, output, JUnit outcomes."""

    ret: int
    output: str
    outcomes: dict[str, str]
    path: Path

    def names(self, outcome: str, prefix: str = "") -> list[str]:
        return [n for n, o in self.outcomes.items() if o == outcome and n.startswith(prefix)]

    def report(self) -> dict[str, object]:
        data: dict[str, object] = json.loads((self.path / "report.json").read_text())
        return data


def project(path: Path, launch: str | None = None, ini: str = "") -> Path:
    """A project dir for the plugin: an ini with a long ready timeout and a JSON report."""
    path.mkdir(parents=True, exist_ok=True)
    lines = [
        "[pytest]",
        f"dflash_ready_timeout = {int(READY_TIMEOUT)}",
        "dflash_report = report.json",
        # A calibration of the client costs a minute of load beside the server here.
        "dflash_client_calibration = off",
    ]
    if launch is not None:
        lines.append(f"dflash_launch = {launch}")
    (path / "pytest.ini").write_text("\n".join([*lines, ini]) + "\n")
    return path


def run_plugin(path: Path, *args: str, timeout: float = 1500) -> PluginRun:
    """``pytest ARGS`` in ``path`` with the plugin (this venv), its JUnit XML read back."""
    junit = path / "junit.xml"
    junit.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={junit}"]
    done = subprocess.run(
        [*cmd, *args],
        cwd=path,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **SERVER_ENV},
        check=False,
    )
    output = done.stdout + done.stderr
    return PluginRun(done.returncode, output, junit_outcomes(junit), path)


def junit_outcomes(junit: Path) -> dict[str, str]:
    """``{test name: passed|failed|error|skipped}`` from pytest's JUnit XML."""
    if not junit.exists():
        return {}
    outcomes: dict[str, str] = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        outcome = next((k for k in ("error", "failure", "skipped") if k in kinds), "passed")
        name = case.get("name", "")
        # A teardown error comes as a second testcase of the same name: errors win.
        if outcomes.get(name) != "error":
            outcomes[name] = {"failure": "failed"}.get(outcome, outcome)
    return outcomes


def count_collected(path: Path, *args: str) -> int:
    """How many tests ``pytest --collect-only ARGS`` collects (no server needed)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", *args],
        cwd=path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return sum(1 for line in done.stdout.splitlines() if "::" in line)


def last_lines(text: str, n: int = 60) -> str:
    return "\n".join(text.splitlines()[-n:])


Args = Sequence[str]
