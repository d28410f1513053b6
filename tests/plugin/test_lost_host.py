"""A host that refuses SSH hands the sweep to the next host, over real SSH (no xdist).

The first host is a loopback port nobody listens on; the second is the test
sshd, where the user's reconfigure script starts the simulator. The config is
tried twice on the first (connection refused is transient), then runs on the
second; the report says where it ran and why it moved.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..conftest import SSHD, free_port
from ..xdist.test_multihost import stop_simulators, write_script


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    stop_simulators(tmp_path)


def test_a_host_refusing_ssh_hands_its_config_to_the_next(
    pytester: pytest.Pytester, sshd: SSHD, remote: Path
) -> None:
    port = free_port()
    script = write_script(remote, port, load=0.2)
    pytester.makepyfile(
        test_moved="""
        import pytest

        @pytest.mark.dflash(budget=4, window=1024)
        def test_server(dflash_service):
            assert dflash_service.server_info["speculative_num_draft_tokens"] == 4
        """
    )
    dead = f"127.0.0.1:{free_port()}"
    live = f"127.0.0.2:{sshd.port}"
    result = pytester.runpytest(
        "-v", "-p", "no:cacheprovider",
        f"--dflash-host={dead}", f"--dflash-host={live}",
        f"--dflash-ssh-user={sshd.user}", f"--dflash-ssh-key={sshd.client_key}",
        "--dflash-ssh-accept-new-host-key",
        f"--dflash-restart-cmd={script} {{budget}} {{window}}",
        f"--dflash-port={port}", "--dflash-ready-timeout=60", "--dflash-report=report.json",
        "--dflash-start-retry-pause=0.1",
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*host {dead} lost: host {dead} cannot start config*refused*"])
    assert (remote / "applied.txt").read_text() == "127.0.0.2 4 1024\n"
    (config,) = json.loads((pytester.path / "report.json").read_text())["configs"]
    service = config["service"]
    assert service["host"] == live
    assert service["base_url"] == f"http://127.0.0.2:{port}"
    (move,) = service["moves"]
    assert (move["from"], move["to"]) == (dead, live)
    assert "refused" in move["reason"]
    tried = [(a["host"], a["kind"]) for a in service["start_attempts"]]
    assert tried == [(dead, "ssh-unreachable"), (dead, "ssh-unreachable")]
