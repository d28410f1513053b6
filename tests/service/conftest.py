"""Fixtures for the service tests: a real OpenSSH sshd on 127.0.0.1."""

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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode.config import SpecConfig
from pytest_specdecode.dialects import get_dialect
from pytest_specdecode.service.local import group_running
from pytest_specdecode.service.ssh import SSHTarget


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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
    binary = _find_sshd()
    if binary is None:
        pytest.skip("OpenSSH sshd is not installed (apt-get install openssh-server)")
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed (apt-get install openssh-client)")
    base = tmp_path_factory.mktemp("sshd")
    host_key = base / "ssh_host_ed25519_key"
    client_key = base / "client_ed25519"
    _keygen(host_key)
    _keygen(client_key)
    authorized = base / "authorized_keys"
    authorized.write_text(client_key.with_suffix(".pub").read_text())
    known_hosts = base / "known_hosts"
    port = free_port()
    host_pub = host_key.with_suffix(".pub").read_text().split()
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    empty_known_hosts = base / "known_hosts.empty"
    empty_known_hosts.write_text("")
    ssh_config = base / "ssh_config"
    ssh_config.write_text("")
    config = base / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
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
                "LogLevel ERROR",
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


def sim_argv(port: int, *extra: str, budget: int = 8, window: int = 2048) -> tuple[str, ...]:
    """The simulator's command line on 127.0.0.1:``port`` with a DFLASH config."""
    return (
        sys.executable,
        "-m",
        "pytest_specdecode.sim",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--speculative-algorithm",
        "DFLASH",
        "--speculative-draft-model-path",
        "d",
        "--speculative-num-draft-tokens",
        str(budget),
        "--speculative-draft-window-size",
        str(window),
        "--sim-load-seconds",
        "0.5",
        "--sim-warmup-seconds",
        "0.5",
        "--sim-time-scale",
        "0",
        *extra,
    )


def dialect_verify(budget: int = 8, window: int = 2048) -> Callable[[Mapping[str, Any]], Any]:
    """The sglang dialect's verification of a DFLASH config, as the plugin does it."""
    config = SpecConfig(algorithm="DFLASH", budget=budget, window=window, draft_model="d")
    dialect = get_dialect("sglang")

    def verify(info: Mapping[str, Any]) -> Any:
        return dialect.verify(config, info)

    return verify


def pid_gone(pid: int, timeout: float = 5.0) -> bool:
    """Whether process group ``pid`` has no running member within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while group_running(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True
