"""Long sweeps that survive: resume, dry run, a lost host, a flaky start (issue 15).

Four checks against the bundled simulator (figures are simulated, not GPU
results), each run as a user would run pytest, each with its requirement:

- resume: a 6-config sweep killed with SIGTERM after its third config, then
  rerun with ``--dflash-resume``, starts the server for the last three configs
  only, and its report equals an uninterrupted run's config by config (up to
  timing figures), as do its gate lines and exit status;
- dry-run: ``--dflash-dry-run`` of a 2-host, 8-config systemd sweep under
  ``-n 2`` prints 8 drop-ins and makes no SSH connection (an sshd logging
  every connection, LogLevel VERBOSE, shows none) and no HTTP request;
- lost-host: three loopback hosts (real sshd, script mode, ``-n 3``); the
  third dies while being reconfigured for its second config (its sshd and
  its server are killed): every config still passes, on the two others
  after that, and the report names the moved configs;
- retry: a start that runs out of CUDA memory the first time only is retried
  and passes; a bad flag (exit status 2) is started once and not retried.

    .venv/bin/python benchmarks/long_sweeps.py [--only resume|dry-run|lost-host|retry]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pytest_specdecode.processes.children import free_port

FAST_SIM = (
    f"{sys.executable} -m pytest_specdecode.sim --sim-load-seconds 0.3 "
    "--sim-warmup-seconds 0.2 --sim-time-scale 0 --sim-quality 0.4"
)
REQUIREMENTS = {
    "resume": "the resumed run starts exactly the last 3 configs; its report equals an "
    "uninterrupted run's config by config (timing figures aside), gates and exit status too",
    "dry-run": "8 drop-ins printed, exit 0, no SSH connection in the sshd log, no HTTP request",
    "lost-host": "every test passes; no config starts on the lost host after it died; every "
    "config it had not done names its move in the report",
    "retry": "the flaky config passes after exactly 2 starts; the bad flag is started once",
}


def pytest_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args]


def block_sizes(basetemp: Path) -> list[int]:
    """The draft block size of every server start under ``basetemp`` (all workers)."""
    found = []
    for log in sorted(basetemp.glob("**/dflash-logs/server-*.log")):
        match = re.search(r"draft runner\..*?block_size=(\d+)", log.read_text(errors="replace"))
        found.append(int(match[1]) if match else -1)
    return found


# --- resume --------------------------------------------------------------------------

SWEEP_TESTS = """
import pytest

@pytest.mark.coding
def test_coding(dflash_problem, dflash_coding):
    dflash_coding.check(dflash_problem)

@pytest.mark.throughput(contexts=[60], concurrency=[1, 4], output_tokens=32)
def test_throughput(dflash_case, dflash_throughput, benchmark):
    dflash_throughput.run(dflash_case, benchmark)
"""
SWEEP = "budget=4,8,16;window=1024,2048"  # 6 configs, in run order by budget then window
PER_CONFIG = 5  # 3 problems and 2 throughput cases


def stable(config: dict[str, Any]) -> dict[str, Any]:
    """A config's report entry without its timing figures (and the resume's own mark)."""
    service = config.get("service") or {}
    return {
        "label": config["label"],
        "key": config["key"],
        "config": config["config"],
        "restarted": service.get("restarted"),
        "server": {k: v for k, v in service.items() if k.startswith("speculative_")},
        "pass_rate": config["pass_rate"],
        "pass_at_k": config["pass_at_k"],
        "coding": sorted(
            (c["problem"], c["passed"], c["status"], c["correct"], c["completion_tokens"])
            for c in config["coding"]
        ),
        "throughput": sorted(
            (t["case"], t["metrics"]["completion_tokens"], t["metrics"]["errors"])
            for t in config["throughput"]
        ),
        "errors": config["errors"],
        "server_died": config["server_died"],
    }


def done_configs(report: Path) -> int:
    try:
        data = json.loads(report.read_text())
    except (OSError, ValueError):
        return 0
    per_config: dict[str, int] = {}
    for test in data.get("tests", []):
        if test.get("when") == "call":
            per_config[test["config_key"]] = per_config.get(test["config_key"], 0) + 1
    return sum(n == PER_CONFIG for n in per_config.values())


def check_resume(base: Path) -> list[str]:
    project = base / "resume"
    project.mkdir()
    (project / "pytest.ini").write_text(
        f"[pytest]\ndflash_launch = {FAST_SIM}\ndflash_ready_timeout = 60\n"
        "dflash_rounds = 1\ndflash_min_pass_rate = 0.8\n"
    )
    (project / "test_sweep.py").write_text(SWEEP_TESTS)
    common = [f"--dflash-sweep={SWEEP}", "-k", "fib or gcd or is_palindrome or throughput", "-q"]
    failures = []
    # The uninterrupted run, for reference.
    ref = subprocess.run(
        pytest_cmd(*common, "--dflash-report=ref.json", f"--basetemp={project / 'ref'}"),
        cwd=project, capture_output=True, text=True, check=False,
    )  # fmt: skip
    print(f"  uninterrupted: exit {ref.returncode}: {ref.stdout.strip().splitlines()[-1]}")
    # The same sweep, SIGTERM once its third config is done.
    report = project / "run.json"
    proc = subprocess.Popen(
        pytest_cmd(*common, f"--dflash-report={report.name}", f"--basetemp={project / 'cut'}"),
        cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while done_configs(report) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _out, _ = proc.communicate(timeout=60)
    cut_configs = done_configs(report)
    print(f"  killed with SIGTERM after {cut_configs} configs: exit {proc.returncode}")
    if proc.returncode != 2:
        failures.append(f"the SIGTERM run exited {proc.returncode}, not 2 (interrupted)")
    resumed = subprocess.run(
        pytest_cmd(*common, f"--dflash-report={report.name}", "--dflash-resume",
                   f"--basetemp={project / 'resumed'}"),
        cwd=project, capture_output=True, text=True, check=False,
    )  # fmt: skip
    lines = resumed.stdout.strip().splitlines()
    shown = [line for line in lines if line.startswith("dflash: resume:")]
    print(f"  resumed: exit {resumed.returncode}: {lines[-1]}")
    print(f"  {shown[0] if shown else 'no resume line!'}")
    starts = block_sizes(project / "resumed")
    cut_starts = block_sizes(project / "cut")
    print(f"  starts: uninterrupted {block_sizes(project / 'ref')}, cut run {cut_starts}, "
          f"resumed {starts}")  # fmt: skip
    if starts != [16, 16, 8] and sorted(starts) != [8, 16, 16]:
        failures.append(f"the resumed run started {starts}, not the last three configs")
    if len(starts) != 3:
        failures.append(f"the resumed run started {len(starts)} servers, not 3")
    if cut_configs != 3:
        failures.append(f"the SIGTERM came after {cut_configs} complete configs, not 3")
    reference = json.loads((project / "ref.json").read_text())
    final = json.loads(report.read_text())
    ref_configs = [stable(c) for c in reference["configs"]]
    new_configs = [stable(c) for c in final["configs"]]
    same = sum(a == b for a, b in zip(ref_configs, new_configs, strict=False))
    print(f"  report: {same}/{len(ref_configs)} configs equal to the uninterrupted run's")
    if len(ref_configs) != 6 or ref_configs != new_configs:
        for a, b in zip(ref_configs, new_configs, strict=False):
            if a != b:
                failures.append(f"config {a['label']} differs: {a} != {b}")
        if len(ref_configs) != len(new_configs):
            failures.append(f"{len(ref_configs)} configs against {len(new_configs)}")
    carried = [c["label"] for c in final["configs"] if (c.get("carried") or {}).get("whole")]
    print(f"  carried whole: {', '.join(carried)}")
    if reference["gates"]["failed"] != final["gates"]["failed"]:
        failures.append(
            f"gates differ: {reference['gates']['failed']} != {final['gates']['failed']}"
        )
    print(f"  gate lines: {final['gates']['failed'] or 'none failed'} (same as uninterrupted: "
          f"{reference['gates']['failed'] == final['gates']['failed']})")  # fmt: skip
    if ref.returncode != resumed.returncode:
        failures.append(f"exit status {resumed.returncode}, uninterrupted {ref.returncode}")
    return failures


# --- sshd --------------------------------------------------------------------------


def banner(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            return sock.recv(4) == b"SSH-"
    except OSError:
        return False


@contextlib.contextmanager
def sshd(base: Path, log_level: str = "ERROR") -> Iterator[tuple[int, Path, Path, int]]:
    """A private sshd on 127.0.0.1-4: (port, client key, log, process group)."""
    base.mkdir(parents=True, exist_ok=True)
    for name in ("host_key", "client_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(base / name)], check=True
        )
    port = free_port()
    (base / "authorized_keys").write_text((base / "client_key.pub").read_text())
    lines = [f"Port {port}", *(f"ListenAddress 127.0.0.{n}" for n in range(1, 5))]
    lines += [
        f"HostKey {base / 'host_key'}", f"AuthorizedKeysFile {base / 'authorized_keys'}",
        f"PidFile {base / 'sshd.pid'}", "UsePAM no", "StrictModes no",
        "PermitRootLogin prohibit-password", "PasswordAuthentication no", "MaxStartups 50",
        "MaxSessions 50", f"LogLevel {log_level}", "UseDNS no",
    ]  # fmt: skip
    (base / "sshd_config").write_text("\n".join(lines) + "\n")
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", exist_ok=True)
    log = base / "sshd.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            ["/usr/sbin/sshd", "-D", "-e", "-f", str(base / "sshd_config")],
            stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while not banner(port):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"sshd did not start: {log.read_text()[-500:]}")
            time.sleep(0.05)
        yield port, base / "client_key", log, proc.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()


# --- dry run -------------------------------------------------------------------------


def check_dry_run(base: Path) -> list[str]:
    project = base / "dry"
    project.mkdir()
    (project / "test_sweep.py").write_text(
        "def test_a(dflash_service): pass\n\ndef test_b(dflash_service): pass\n"
    )
    failures = []
    http = free_port()
    listeners = []
    for address in ("127.0.0.1", "127.0.0.2"):
        sock = socket.socket()
        sock.bind((address, http))
        sock.listen(8)
        sock.setblocking(False)
        listeners.append(sock)
    with sshd(base / "sshd-dry", "VERBOSE") as (port, key, log, _):
        # The log shows a login: one made here, first, is in it.
        from pytest_specdecode.service.ssh import SSHTarget, open_connection

        target = SSHTarget("127.0.0.1", port=port, key_filename=str(key),
                           accept_unknown_host_keys=True)  # fmt: skip
        open_connection(target).close()
        deadline = time.monotonic() + 10
        while "Accepted publickey" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        before = log.read_text().count("Connection from")
        result = subprocess.run(
            pytest_cmd(
                "-n", "2", f"--dflash-host=127.0.0.1:{port}", f"--dflash-host=127.0.0.2:{port}",
                f"--dflash-ssh-key={key}", "--dflash-ssh-accept-new-host-key",
                "--dflash-unit=sglang.service", f"--dflash-port={http}",
                "--dflash-launch=python -m sglang.launch_server --model-path /m/big --tp-size 8",
                "--dflash-draft-model=/m/drafter", "--dflash-dry-run",
                "--dflash-sweep=budget=4,8,16,32;window=1024,2048",
            ),
            cwd=project, capture_output=True, text=True, check=False,
        )  # fmt: skip
        after = log.read_text().count("Connection from")
    queued = 0
    for sock in listeners:
        try:
            sock.accept()[0].close()
            queued += 1
        except BlockingIOError:
            pass
        sock.close()
    dropins = result.stdout.count("write /etc/systemd/system/sglang.service.d/50-specdecode.conf:")
    head = [line for line in result.stdout.splitlines() if line.startswith("dflash dry run:")]
    print(f"  {head[0] if head else 'no dry-run header!'}")
    print(f"  exit {result.returncode}; drop-ins printed: {dropins}; sshd 'Connection from' "
          f"lines before/after: {before}/{after}; HTTP connections queued: {queued}")  # fmt: skip
    first = result.stdout.split("[1/8]", 1)[-1].split("[2/8]", 1)[0]
    print("  [1/8]" + "\n  ".join(first.rstrip().splitlines()))
    if result.returncode != 0 or dropins != 8 or after != before or queued:
        failures.append(f"dry run: exit {result.returncode}, {dropins} drop-ins, "
                        f"{after - before} SSH connections, {queued} HTTP")  # fmt: skip
    return failures


# --- lost host -----------------------------------------------------------------------

RECONFIG = """#!/bin/bash
set -e
dir={dir}
host=$(echo "$SSH_CONNECTION" | cut -d' ' -f3)
echo "$host $1 $2" >> "$dir/applied.txt"
if [ "$host" = 127.0.0.3 ] && [ -f "$dir/started-127.0.0.3" ]; then
    echo $$ > "$dir/hanging.pid"
    sleep 600  # the host dies here: the harness kills its sshd and its server
fi
pidfile="$dir/sim-$host.pid"
if [ -f "$pidfile" ]; then
    old=$(cat "$pidfile")
    kill -TERM -- "-$old" 2>/dev/null || true
    for _ in $(seq 200); do
        [ -e "/proc/$old" ] && ! grep -q ') Z' "/proc/$old/stat" || break
        sleep 0.05
    done
fi
setsid {python} -m pytest_specdecode.sim --host "$host" --port {port} \\
    --speculative-algorithm DFLASH --speculative-draft-model-path d \\
    --speculative-num-draft-tokens "$1" --speculative-draft-window-size "$2" \\
    --sim-load-seconds 0.5 --sim-warmup-seconds 0.2 --sim-time-scale 0 \\
    > "$dir/sim-$host.log" 2>&1 < /dev/null &
echo $! > "$pidfile"
touch "$dir/started-$host"
"""

HOST_TESTS = """
import pytest

@pytest.mark.parametrize("n", range(2))
def test_server(dflash_service, dflash_config, n):
    info = dflash_service.server_info
    assert info["speculative_num_draft_tokens"] == dflash_config.budget
    assert info["speculative_draft_window_size"] == dflash_config.window
"""


def kill_group_in(pid_file: Path) -> None:
    with contextlib.suppress(ProcessLookupError, ValueError, FileNotFoundError):
        os.killpg(os.getpgid(int(pid_file.read_text())), signal.SIGKILL)


def check_lost_host(base: Path) -> list[str]:
    remote = base / "remote"
    remote.mkdir()
    project = base / "hosts"
    project.mkdir()
    (project / "test_hosts.py").write_text(HOST_TESTS)
    http = free_port()
    script = remote / "reconfig.sh"
    script.write_text(RECONFIG.format(dir=remote, python=shlex.quote(sys.executable), port=http))
    script.chmod(0o755)
    failures = []
    with sshd(base / "sshd-a") as (port_a, key_a, _, _), sshd(base / "sshd-b") as (
        port_b, _key_b, _, group_b,
    ):  # fmt: skip
        # One client key for both: the second sshd accepts the first's too.
        (base / "sshd-b" / "authorized_keys").write_text((key_a.with_suffix(".pub")).read_text())
        hosts = [f"127.0.0.1:{port_a}", f"127.0.0.2:{port_a}", f"127.0.0.3:{port_b}"]
        proc = subprocess.Popen(
            pytest_cmd(
                "-n", "3", "-q", *(f"--dflash-host={h}" for h in hosts),
                f"--dflash-ssh-key={key_a}", "--dflash-ssh-accept-new-host-key",
                f"--dflash-restart-cmd={script} {{budget}} {{window}}", f"--dflash-port={http}",
                "--dflash-ready-timeout=60", "--dflash-report=report.json",
                "--dflash-start-retry-pause=0.5",
                "--dflash-sweep=budget=2,4,8,16,32;window=1024,2048",
            ),
            cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            hanging = remote / "hanging.pid"
            deadline = time.monotonic() + 300
            while not hanging.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            lost_at = time.monotonic()
            os.killpg(group_b, signal.SIGKILL)  # host 3 goes away: its sshd...
            kill_group_in(remote / "sim-127.0.0.3.pid")  # ...and its server
            kill_group_in(hanging)
            applied_before = (remote / "applied.txt").read_text().splitlines()
            out, _ = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
            for pid_file in remote.glob("sim-*.pid"):
                kill_group_in(pid_file)
    lines = out.strip().splitlines()
    print(f"  exit {proc.returncode}: {lines[-1] if lines else 'no output'}")
    print(f"  host 127.0.0.3 killed {time.monotonic() - lost_at:.1f} s before the run ended")
    applied = (remote / "applied.txt").read_text().splitlines()
    on_lost = [line for line in applied[len(applied_before) :] if line.startswith("127.0.0.3")]
    report = json.loads((project / "report.json").read_text())
    for config in report["configs"]:
        service = config["service"]
        moves = "; ".join(f"{m['from']} -> {m['to']} ({m['reason'][:60]}...)"
                          for m in service.get("moves") or [])  # fmt: skip
        print(f"  {config['label']}: ran on {service.get('host')}"
              + (f", moved: {moves}" if moves else ""))  # fmt: skip
    moved = [c for c in report["configs"] if c["service"].get("moves")]
    lost_done = [c for c in report["configs"] if c["service"].get("host") == hosts[2]]
    if proc.returncode != 0 or "20 passed" not in out:
        failures.append(f"lost host run: exit {proc.returncode}: {out[-2000:]}")
    if on_lost:
        failures.append(f"configs started on the lost host after it died: {on_lost}")
    if not moved:
        failures.append("no config names a move in the report")
    if any(c["service"].get("host") != hosts[0] for c in moved):
        failures.append("a moved config ran elsewhere than on the next host")
    print(f"  {len(moved)} config(s) moved, {len(lost_done)} done on 127.0.0.3 before it died")
    for line in lines:
        if line.startswith("dflash moved:"):
            print(f"  {line}")
    return failures


# --- retry ---------------------------------------------------------------------------


def check_retry(base: Path) -> list[str]:
    project = base / "retry"
    project.mkdir()
    (project / "pytest.ini").write_text(f"[pytest]\ndflash_launch = {FAST_SIM}\n")
    (project / "test_retry.py").write_text(
        "import pytest\n\n"
        '@pytest.mark.dflash(budget=8, sim_fault="oom-on-first-start", sim_state_file="state")\n'
        "def test_flaky(dflash_service):\n    pass\n\n"
        '@pytest.mark.dflash(budget=4, sim_fault="bogus")\n'
        "def test_bad_flag(dflash_service):\n    pass\n"
    )
    result = subprocess.run(
        pytest_cmd("-v", "--dflash-start-retry-pause=1", f"--basetemp={project / 'bt'}",
                   "--dflash-report=report.json"),
        cwd=project, capture_output=True, text=True, check=False,
    )  # fmt: skip
    starts = block_sizes(project / "bt")
    retried = [line for line in result.stdout.splitlines() if "retrying in" in line]
    print(f"  {result.stdout.strip().splitlines()[-1]}")
    print(f"  starts by budget: {starts}")
    for line in retried:
        print(f"  {line.strip()}")
    report = json.loads((project / "report.json").read_text())
    for config in report["configs"]:
        for attempt in config["service"].get("start_attempts") or []:
            print(f"  report: {config['label']}: attempt {attempt['attempt']}: {attempt['kind']}, "
                  f"retried after {attempt['retried_after_seconds']} s")  # fmt: skip
    failures = []
    if starts.count(8) != 1 or starts.count(-1) != 2:
        # block size 8 logged once (the good start); the OOM start and the bad flag log none.
        failures.append(f"starts {starts}: expected one good start of budget 8 and 2 failed")
    if "1 passed, 1 error" not in result.stdout:
        failures.append(f"outcome: {result.stdout.strip().splitlines()[-1]}")
    return failures


CHECKS: dict[str, Callable[[Path], list[str]]] = {
    "resume": check_resume,
    "dry-run": check_dry_run,
    "lost-host": check_lost_host,
    "retry": check_retry,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(CHECKS), action="append")
    options = parser.parse_args(argv)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="dflash-long-") as tmp:
        for name in options.only or list(CHECKS):
            started = time.monotonic()
            print(f"{name}: (requirement: {REQUIREMENTS[name]})", flush=True)
            failures = CHECKS[name](Path(tmp))
            for failure in failures:
                print(f"  FAIL: {failure}")
            print(f"{name}: {'FAIL' if failures else 'PASS'} ({time.monotonic() - started:.0f} s)",
                  flush=True)  # fmt: skip
            failed += bool(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
