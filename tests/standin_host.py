"""A stand-in GPU host for systemd mode: what an SSH session there sees.

systemd cannot be booted in a test, so ``systemctl`` and ``journalctl`` are
stand-ins on the session's ``PATH`` that record every call (``calls.log``, as
tests/service/test_systemd.py's do) and also act: ``restart`` starts the
drop-in's ``ExecStart=`` (its ``Environment=`` and ``EnvironmentFile=`` too)
as the unit's main process, in a session of its own, its output filed as the
journal of that pid. Each SSH session runs in a private mount namespace whose
``/etc/systemd/system`` is the host's own directory (the forced command of the
authorized key), so the drop-in lands there and never on this machine.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import process_gone

UNIT_DIR = "/etc/systemd/system"

# Run as the forced command of the authorized key: SSH_ORIGINAL_COMMAND in the namespace.
SESSION = """#!/bin/sh
exec unshare --mount --propagation private sh -c '
mount --bind "$1" {unit_dir} || exit 97
PATH="$2:$PATH"; export PATH
exec "${{SHELL:-/bin/sh}}" -c "$SSH_ORIGINAL_COMMAND"' - {units} {bin}
"""

SYSTEMCTL = '''#!{python}
"""systemctl for one unit: restart runs the drop-in's command as its main process."""
import json, os, shlex, signal, subprocess, sys, time
from pathlib import Path

STATE = Path({state!r})
with open(STATE / "calls.log", "a") as log:
    log.write("systemctl " + " ".join(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
verb, unit = args[0], args[-1]


def pid():
    try:
        return int((STATE / "pid").read_text())
    except (OSError, ValueError):
        return 0


def running(p):
    if not p:
        return False
    try:
        with open(f"/proc/{{p}}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def words(text, env):
    out = []
    for word in shlex.split(text):
        if word.startswith("${{") and word.endswith("}}"):
            out.append(env.get(word[2:-1], ""))
        else:
            out.append(word.replace("$$", "$").replace("%%", "%"))
    return out


def launch():
    dropin = Path({unit_dir!r}) / (unit + ".d") / "50-specdecode.conf"
    env, command = dict(os.environ), None
    for line in dropin.read_text().splitlines():
        key, _, value = line.partition("=")
        if key == "ExecStart" and value:
            command = value
        elif key == "Environment":
            name, _, v = shlex.split(value)[0].partition("=")
            env[name] = v.replace("%%", "%")
        elif key == "EnvironmentFile":
            for item in Path(value.lstrip("-")).read_text().splitlines():
                name, _, v = item.partition("=")
                env[name] = shlex.split(v)[0] if v else ""
    argv = words(command, env)
    with open(STATE / "launched.log", "a") as log:
        log.write(json.dumps(argv) + "\\n")
    old = pid()
    if running(old):
        os.killpg(old, signal.SIGTERM)
        while running(old):
            time.sleep(0.05)
    journal = STATE / "journal"
    journal.mkdir(exist_ok=True)
    log = open(journal / "next.log", "wb")
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True, cwd="/")
    os.replace(journal / "next.log", journal / f"{{proc.pid}}.log")
    (STATE / "pid").write_text(str(proc.pid))
    (STATE / "started").write_text(str(time.time_ns()))


if verb == "daemon-reload":
    sys.exit(0)
if verb == "restart":
    launch()
    sys.exit(0)
p = pid()
state = "active" if running(p) else ("failed" if p else "inactive")
if verb == "is-failed":
    print(state)
    sys.exit(0 if state == "failed" else 1)
if verb == "show":
    started = (STATE / "started").read_text() if (STATE / "started").exists() else ""
    props = {{
        "MainPID": str(p if state == "active" else 0),
        "ExecMainStartTimestamp": started,
        "ActiveState": state,
        "SubState": "running" if state == "active" else "failed",
        "Result": "success" if state != "failed" else "exit-code",
        "ExecMainStatus": "0" if state != "failed" else "1",
    }}
    names = [args[i + 1] for i, a in enumerate(args) if a == "-p"]
    print("\\n".join(f"{{n}}={{props.get(n, '')}}" for n in names))
    sys.exit(0)
sys.exit(0)
'''

JOURNALCTL = '''#!{python}
"""journalctl: the journal of the unit's current main process (or of _PID=N)."""
import sys
from pathlib import Path

STATE = Path({state!r})
with open(STATE / "calls.log", "a") as log:
    log.write("journalctl " + " ".join(sys.argv[1:]) + "\\n")
pid = next((a[5:] for a in sys.argv if a.startswith("_PID=")), None)
if pid is None:
    pid = (STATE / "pid").read_text() if (STATE / "pid").exists() else "0"
path = STATE / "journal" / f"{{pid}}.log"
lines = path.read_text(errors="replace").splitlines() if path.exists() else []
n = next((int(sys.argv[i + 1]) for i, a in enumerate(sys.argv[:-1]) if a == "-n"), None)
print("\\n".join(lines[-n:] if n else lines))
'''


@dataclass
class StandinHost:
    """The host's files: its unit directory, its stand-in programs and their state."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def units(self) -> Path:
        return self.root / "units"

    @property
    def session(self) -> Path:
        return self.root / "session"

    def calls(self) -> list[str]:
        log = self.state / "calls.log"
        return log.read_text().splitlines() if log.exists() else []

    def launched(self) -> list[list[str]]:
        """Every command line ``restart`` started, in order."""
        log = self.state / "launched.log"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def main_pid(self) -> int:
        path = self.state / "pid"
        return int(path.read_text()) if path.exists() else 0

    def stop(self) -> None:
        """Stop the unit's main process, if it runs (safe to call twice)."""
        pid = self.main_pid()
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            process_gone(pid)


def make_host(root: Path) -> StandinHost:
    """The stand-in host's files under ``root``; skips where no mount namespace can be had."""
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "mount", "--bind", "/", "/mnt"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here (unshare --mount): {probe.stderr!r:.200}")
    host = StandinHost(root)
    for directory in (host.bin, host.state, host.units):
        directory.mkdir(parents=True)
    values = {"python": sys.executable, "state": str(host.state), "unit_dir": UNIT_DIR}
    for name, text in (("systemctl", SYSTEMCTL), ("journalctl", JOURNALCTL)):
        (host.bin / name).write_text(text.format(**values))
        (host.bin / name).chmod(0o755)
    host.session.write_text(
        SESSION.format(
            unit_dir=UNIT_DIR, units=shlex.quote(str(host.units)), bin=shlex.quote(str(host.bin))
        )
    )
    host.session.chmod(0o755)
    return host
