"""Shared test helpers: one free-port helper, one way to start the simulator, process
waits; fixtures: no inherited xdist identity, a real OpenSSH sshd on 127.0.0.1."""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import hypothesis
import pytest
import requests  # noqa: F401  (see below)

from pytest_specdecode.processes.children import free_port
from pytest_specdecode.service.ssh import SSHTarget
from pytest_specdecode.statefiles import WaitTimeout, wait_until

# Imported here so it stays in sys.modules: pytester's in-process runs drop the
# modules a run imported, and hypothesis's terminal summary imports the whole
# package at the end of every run (1.5 s each; 0.1 s once it is loaded).
# requests likewise: once a run dropped it, the next run's `requests.compat` does
# `from http import cookiejar`, which takes the dropped module still set on the kept
# `http` package, while `requests.cookies` imports a fresh one, and requests 2.34's
# `merge_cookies` then refuses its own jar ("You can only merge into CookieJar").

# No wall-clock limit on a hypothesis example or its input generation: the suite runs
# on busy machines, where a 0.4 ms example takes 250 ms; speed belongs in benchmarks/.
# A test's own @settings keeps these unless it names the field (too_slow then with it).
hypothesis.settings.register_profile(
    "suite", deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow]
)
hypothesis.settings.load_profile("suite")

# A suite started in the background of a shell without job control (`make test &` in a
# script, nohup) inherits SIGINT ignored, and so would every run it starts: the tests that
# interrupt a run with Ctrl-C, and the sandbox that compares itself with a fresh
# interpreter, need SIGINT as a terminal gives it. A handler (not ignored) is reset to the
# default by exec, so each child starts as it would from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def process_gone(pid: int, timeout: float = 30) -> bool:
    """Wait up to ``timeout`` s for process ``pid`` to be gone (a zombie counts: nothing
    runs); polled every 50 ms, the finest event a process's end offers to a non-parent."""
    try:
        return wait_until(lambda: _gone(pid), timeout=timeout, what=f"pid {pid}", poll=0.05)
    except WaitTimeout:
        return False


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


# The modules with the longest tests (whole pytest sessions under -n 2, several
# end-to-end runs each), longest first. xdist hands tests out in collection order,
# and the xdist modules (then tests/xdist) came last alphabetically: there their
# long runs started last and ran alone at the end beside idle workers. Started
# first, the short tests fill in around them. Whole modules move, so module-scoped
# set-ups still run once.
SLOW_FIRST = (
    "tests/test_example_workflow.py",
    "tests/distributed/test_xdist_e2e.py",
    "tests/distributed/test_owned_cleanup.py",
    "tests/distributed/test_multihost.py",
    "tests/distributed/test_schedule.py",
    "tests/plugin/test_acceptance_hostile.py",
    "tests/plugin/test_acceptance_samples.py",
    "tests/plugin/test_resume.py",
    "tests/plugin/test_lossless_xdist.py",
    "tests/plugin/test_html_e2e.py",
    "tests/plugin/test_identity_e2e.py",
    "tests/plugin/test_acceptance_ssh.py",
    "tests/report/test_html.py",
    "tests/plugin/test_service_e2e.py",
    "tests/plugin/test_search_e2e.py",
    "tests/plugin/test_external_default.py",
)


def slow_rank(nodeid: str) -> int:
    """Where a test's module stands in ``SLOW_FIRST`` (after all of them when absent)."""
    module = nodeid.split("::", 1)[0]
    return SLOW_FIRST.index(module) if module in SLOW_FIRST else len(SLOW_FIRST)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest modules first (a stable sort: the order within each stays)."""
    items.sort(key=lambda item: slow_rank(item.nodeid))


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest runs nested in an xdist worker must not inherit its identity
    (pytest-benchmark would switch itself off in them)."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


# -- the simulator in tests: one command line, one way to start it ----------------

SIM = (sys.executable, "-m", "pytest_specdecode.sim")


def sim_timing(load: float = 0, warmup: float = 0, scale: float = 0) -> tuple[str, ...]:
    """Load and warm-up phases of ``load`` / ``warmup`` s; modelled delays times ``scale``."""
    return (
        *("--sim-time-scale", str(scale)),
        *("--sim-load-seconds", str(load), "--sim-warmup-seconds", str(warmup)),
    )


def dflash_flags(budget: int = 8, window: int = 2048, draft: str = "d") -> tuple[str, ...]:
    """SGLang's flags for a DFLASH config (block ``budget``, window ``window``)."""
    return (
        *("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", draft),
        *("--speculative-num-draft-tokens", str(budget)),
        *("--speculative-draft-window-size", str(window)),
    )


FAST = sim_timing()
DFLASH = dflash_flags()


def sim_launch(*extra: str, load: float = 0.1, warmup: float = 0.1, scale: float = 0) -> str:
    """The simulator as the plugin's launch command (an ini's ``dflash_launch``)."""
    timing = (f"--sim-load-seconds {load} --sim-warmup-seconds {warmup} --sim-time-scale {scale}",)
    return " ".join([*SIM, *timing, *extra])


@dataclass
class Sim:
    """A running simulator subprocess (its own process group)."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stderr(self) -> str:
        return self.log.read_text()

    def wait_healthy(self, timeout: float = 30.0, path: str = "/health") -> None:
        """Until ``path`` answers 200 (fails at once if the simulator exits)."""

        def healthy() -> bool:
            assert self.proc.poll() is None, f"simulator exited early:\n{self.stderr()[-2000:]}"
            try:
                with urllib.request.urlopen(self.url + path, timeout=2) as reply:
                    return bool(reply.status == 200)
            except OSError:
                return False

        try:
            wait_until(healthy, timeout=timeout, what="simulator healthy", poll=0.02)
        except WaitTimeout:
            raise AssertionError(
                f"simulator not healthy after {timeout} s:\n{self.stderr()[-2000:]}"
            ) from None


@contextlib.contextmanager
def run_sim(
    log_dir: Path,
    *args: str,
    fast: bool = True,
    env: Mapping[str, str] | None = None,
    healthy: str | None = None,
) -> Iterator[Sim]:
    """Start the simulator on a free port (``FAST`` timing first unless ``fast=False``),
    waiting until ``healthy`` (a path such as ``/health``) answers 200 when given; its
    process group is killed on exit, whatever happened."""
    port = free_port()
    log = log_dir / f"sim-{port}.log"
    cmd = [*SIM, "--port", str(port), *(FAST if fast else ()), *args]
    with log.open("wb") as err:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # its log lines go to stderr, as SGLang's do
            stderr=err,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    try:
        sim = Sim(proc, port, log)
        if healthy is not None:
            sim.wait_healthy(path=healthy)
        yield sim
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _find_sshd() -> str | None:
    found = shutil.which("sshd")
    if found:
        return found
    return "/usr/sbin/sshd" if os.access("/usr/sbin/sshd", os.X_OK) else None


@dataclass(frozen=True)
class SSHD:
    """A running sshd: where it listens and the files a client needs."""

    host: str
    port: int
    user: str
    client_key: Path
    known_hosts: Path
    empty_known_hosts: Path
    ssh_config: Path
    log: Path

    def target(self, **overrides: object) -> SSHTarget:
        """An SSHTarget for this sshd that trusts its host key and ignores ~/.ssh/config."""
        base = SSHTarget(
            host=self.host,
            port=self.port,
            user=self.user,
            key_filename=str(self.client_key),
            connect_timeout=5.0,
            ssh_config_path=str(self.ssh_config),
            known_hosts_files=[str(self.known_hosts)],
        )
        return replace(base, **overrides)  # type: ignore[arg-type]


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "specdecode-test", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )


def _wait_for_banner(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
                if sock.recv(64).startswith(b"SSH-"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"sshd did not answer on port {port} within {timeout} s")


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHD]:
    """An OpenSSH server on 127.0.0.1 with its own config, host key and client key."""
    with start_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture
def verbose_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHD]:
    """A test's own sshd that logs every connection (``Connection from ...``) to ``log``."""
    with start_sshd(tmp_path_factory.mktemp("sshd-verbose"), log_level="VERBOSE") as server:
        yield server


@contextlib.contextmanager
def start_sshd(base: Path, *, log_level: str = "ERROR", key_options: str = "") -> Iterator[SSHD]:
    """Run sshd on 127.0.0.1-4 at a free port until the block ends; skip without OpenSSH.
    ``key_options`` go before the client's key in authorized_keys (``command="..."``)."""
    binary = _find_sshd()
    if binary is None:
        pytest.skip("OpenSSH sshd is not installed (apt-get install openssh-server)")
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed (apt-get install openssh-client)")
    host_key = base / "ssh_host_ed25519_key"
    client_key = base / "client_ed25519"
    _keygen(host_key)
    _keygen(client_key)
    authorized = base / "authorized_keys"
    prefix = f"{key_options} " if key_options else ""
    authorized.write_text(prefix + client_key.with_suffix(".pub").read_text())
    known_hosts = base / "known_hosts"
    port = free_port()
    host_pub = host_key.with_suffix(".pub").read_text().split()
    # Four loopback addresses: the multi-host tests use them as four hosts.
    addresses = [f"127.0.0.{n}" for n in range(1, 5)]
    known_hosts.write_text(
        "".join(f"[{a}]:{port} {host_pub[0]} {host_pub[1]}\n" for a in addresses)
    )
    empty_known_hosts = base / "known_hosts.empty"
    empty_known_hosts.write_text("")
    ssh_config = base / "ssh_config"
    ssh_config.write_text("")
    config = base / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                *(f"ListenAddress {a}" for a in addresses),
                f"HostKey {host_key}",
                f"AuthorizedKeysFile {authorized}",
                f"PidFile {base / 'sshd.pid'}",
                "UsePAM no",
                "StrictModes no",
                "PermitRootLogin prohibit-password",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "MaxStartups 50",
                "MaxSessions 50",
                f"LogLevel {log_level}",
                "UseDNS no",
                "PrintMotd no",
                "PrintLastLog no",
                "",
            ]
        )
    )
    # Privilege separation needs this directory when sshd runs as root.
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    log = base / "sshd.log"
    with open(log, "wb") as log_fh:
        proc = subprocess.Popen(
            [binary, "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log_fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_for_banner(port, proc, log, timeout=10.0)
        yield SSHD(
            host="127.0.0.1",
            port=port,
            user=getpass.getuser(),
            client_key=client_key,
            known_hosts=known_hosts,
            empty_known_hosts=empty_known_hosts,
            ssh_config=ssh_config,
            log=log,
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
