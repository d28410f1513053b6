"""Wall time of an 8-config sweep on four hosts: -n 0 against -n 4.

Four loopback addresses (127.0.0.1-4) stand for four GPU hosts. A private
OpenSSH sshd listens on all four; the plugin reaches each over SSH and runs a
reconfigure script there that restarts the bundled simulator (with a modelled
load time, as a real server has) on the address it was reached at. The same
sweep runs once without workers and once with ``-n 4``; the script prints both
wall times and their ratio, and exits 1 when the ratio is above the
requirement (35%, ``--max-ratio``). Figures come from the simulator, not a GPU.

    .venv/bin/python benchmarks/xdist_scaling.py [--load-seconds 8]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_specdecode.processes.children import free_port

HOSTS = [f"127.0.0.{n}" for n in range(1, 5)]

RECONFIG = """#!/bin/bash
set -e
host=$(echo "$SSH_CONNECTION" | cut -d' ' -f3)
pidfile="{dir}/sim-$host.pid"
if [ -f "$pidfile" ]; then
    kill -TERM -- "-$(cat "$pidfile")" 2>/dev/null || true
    sleep 0.5
fi
setsid {python} -m pytest_specdecode.sim --host "$host" --port {port} \\
    --speculative-algorithm DFLASH --speculative-draft-model-path d \\
    --speculative-num-draft-tokens "$1" --speculative-draft-window-size "$2" \\
    --sim-load-seconds {load} --sim-warmup-seconds 0.5 --sim-time-scale 0.2 \\
    > "{dir}/sim-$host.log" 2>&1 < /dev/null &
echo $! > "$pidfile"
"""

TESTS = """
import pytest

@pytest.mark.coding
def test_coding(dflash_problem, dflash_coding):
    dflash_coding.check(dflash_problem)
"""


def start_sshd(base: Path) -> tuple[subprocess.Popen[bytes], int, Path]:
    """A private sshd on the four addresses; returns (process, port, client key)."""
    for name in ("host_key", "client_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(base / name)], check=True
        )
    port = free_port()
    (base / "authorized_keys").write_text((base / "client_key.pub").read_text())
    lines = [f"Port {port}", *(f"ListenAddress {h}" for h in HOSTS)]
    lines += [
        f"HostKey {base / 'host_key'}",
        f"AuthorizedKeysFile {base / 'authorized_keys'}",
        f"PidFile {base / 'sshd.pid'}",
        "UsePAM no",
        "StrictModes no",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "MaxStartups 50",
        "MaxSessions 50",
    ]
    (base / "sshd_config").write_text("\n".join(lines) + "\n")
    os.makedirs("/run/sshd", exist_ok=True)
    sshd = "/usr/sbin/sshd"
    proc = subprocess.Popen(
        [sshd, "-D", "-e", "-f", str(base / "sshd_config")],
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, port, base / "client_key"
        except OSError:
            time.sleep(0.05)
    raise SystemExit("sshd did not start")


def run_sweep(project: Path, args: list[str]) -> float:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.monotonic() - started
    last = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    if result.returncode != 0:
        raise SystemExit(f"pytest {' '.join(args)} failed:\n{result.stdout[-3000:]}")
    print(f"  pytest {'-n 4' if '-n' in args else '-n 0'}: {last}")
    return elapsed


REQUIREMENT_RATIO = 0.35


def verdict(serial: float, parallel: float, max_ratio: float) -> int:
    """The exit status: 0 when -n 4 takes at most ``max_ratio`` of -n 0's time."""
    return 0 if serial > 0 and parallel / serial <= max_ratio else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load-seconds", type=float, default=8.0)
    parser.add_argument("--problems", default="gcd or fib or is_palindrome")
    parser.add_argument(
        "--max-ratio", type=float, default=REQUIREMENT_RATIO, help="Default: %(default)r"
    )
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dflash-scaling-") as tmp:
        base = Path(tmp)
        sshd, ssh_port, key = start_sshd(base)
        http_port = free_port()
        script = base / "reconfig.sh"
        script.write_text(
            RECONFIG.format(
                dir=base, python=shlex.quote(sys.executable), port=http_port,
                load=options.load_seconds,
            )
        )  # fmt: skip
        script.chmod(0o755)
        project = base / "project"
        project.mkdir()
        (project / "pytest.ini").write_text("[pytest]\n")
        (project / "test_sweep.py").write_text(TESTS)
        common = [f"--dflash-host={h}" for h in HOSTS] + [
            f"--dflash-ssh-port={ssh_port}",
            f"--dflash-ssh-key={key}",
            "--dflash-ssh-accept-new-host-key",
            f"--dflash-restart-cmd={script} {{budget}} {{window}}",
            f"--dflash-port={http_port}",
            "--dflash-sweep=budget=4,8,12,16;window=1024,2048",
            "-k",
            options.problems,
        ]
        try:
            print(
                "8-config sweep on 4 simulated hosts "
                f"(load {options.load_seconds:g} s per restart; simulator, not GPU):"
            )
            serial = run_sweep(project, common)
            parallel = run_sweep(project, [*common, "-n", "4"])
        finally:
            for pid_file in base.glob("sim-*.pid"):
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.killpg(int(pid_file.read_text()), signal.SIGKILL)
            os.killpg(sshd.pid, signal.SIGTERM)
            sshd.wait()
    print(f"-n 0: {serial:.1f} s wall")
    print(f"-n 4: {parallel:.1f} s wall")
    print(f"ratio: {parallel / serial:.0%} (requirement: at most {options.max_ratio:.0%})")
    status = verdict(serial, parallel, options.max_ratio)
    print("PASS" if status == 0 else "FAIL")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
