"""``--dflash-dry-run``: the whole plan printed, nothing started, stopped or sent.

The proof that nothing is sent is taken from outside the plugin: an sshd that
logs every connection (shown to log one, first) and a listener on each
host's HTTP port, whose accept queue stays empty.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from pytest_specdecode.processes.children import free_port
from pytest_specdecode.service.ssh import open_connection

from ..conftest import SSHD

TESTS = """
def test_answers(dflash_service):
    pass

def test_answers_again(dflash_service):
    pass
"""
LAUNCH = "python -m sglang.launch_server --model-path /models/big --tp-size 8"


@pytest.fixture
def listeners() -> Iterator[tuple[int, list[socket.socket]]]:
    """Listening sockets on 127.0.0.1 and 127.0.0.2 at one port: where a probe would go."""
    port = free_port()
    socks = []
    for address in ("127.0.0.1", "127.0.0.2"):
        sock = socket.socket()
        sock.bind((address, port))
        sock.listen(8)
        sock.setblocking(False)
        socks.append(sock)
    yield port, socks
    for sock in socks:
        sock.close()


def connections_logged(sshd: SSHD) -> int:
    return sshd.log.read_text().count("Connection from")


def test_a_dry_run_of_a_two_host_systemd_sweep_sends_nothing(
    pytester: pytest.Pytester,
    verbose_sshd: SSHD,
    listeners: tuple[int, list[socket.socket]],
) -> None:
    port, socks = listeners
    # The log records a connection: a login made here shows up in it (sshd logs the
    # connection, then the accepted key, before the login completes).
    open_connection(verbose_sshd.target()).close()
    deadline = time.monotonic() + 10
    while "Accepted publickey" not in verbose_sshd.log.read_text():
        assert time.monotonic() < deadline, verbose_sshd.log.read_text()
        time.sleep(0.02)
    before = connections_logged(verbose_sshd)
    hosts = [f"127.0.0.1:{verbose_sshd.port}", f"127.0.0.2:{verbose_sshd.port}"]
    pytester.makepyfile(test_sweep=TESTS)
    result = pytester.runpytest(
        "-n", "2", "-p", "no:cacheprovider",
        *(f"--dflash-host={h}" for h in hosts),
        f"--dflash-ssh-user={verbose_sshd.user}", f"--dflash-ssh-key={verbose_sshd.client_key}",
        "--dflash-ssh-accept-new-host-key", "--dflash-unit=sglang.service",
        f"--dflash-launch={LAUNCH}", "--dflash-draft-model=/m/d", f"--dflash-port={port}",
        "--dflash-sweep=budget=4,8,16,32;window=1024,2048", "--dflash-dry-run",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.OK
    out = result.stdout.str()
    assert out.count("write /etc/systemd/system/sglang.service.d/50-specdecode.conf:") == 8
    order = [(b, w) for b in (4, 8, 16, 32) for w in (1024, 2048)]
    expected = [
        f"*dflash dry run: 8 configs, 16 tests to run, 8 restarts at most*on {hosts[0]}, "
        f"{hosts[1]} with -n 2: nothing was started, stopped or sent"
    ]
    for n, (budget, window) in enumerate(order):
        host = hosts[n % 2]
        expected += [
            f"[{n + 1}/8] DFLASH budget={budget} window={window} (2 tests) on {host}:",
            "      [[]Service]",
            "      ExecStart=",
            f"      ExecStart={LAUNCH} --speculative-algorithm DFLASH "
            f"--speculative-draft-model-path /m/d --speculative-num-draft-tokens {budget} "
            f"--speculative-draft-window-size {window}",
            "    then: systemctl daemon-reload; systemctl restart sglang.service; wait for "
            f"http://{host.split(':')[0]}:{port} to serve this config",
        ]
    result.stdout.fnmatch_lines(expected)
    assert "created: 2/2 workers" not in out  # no xdist worker was started either
    # Nothing connected: no SSH connection in the sshd's log, no HTTP request queued.
    assert connections_logged(verbose_sshd) == before  # the fixture's probe and ours
    assert verbose_sshd.log.read_text().count("Accepted publickey") == 1
    for sock in socks:
        with pytest.raises(BlockingIOError):
            sock.accept()


def test_a_dry_run_names_a_bad_config_and_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bad="""
        import pytest

        @pytest.mark.dflash(budget=8, window=4)
        def test_bad(dflash_service):
            pass

        def test_fine(dflash_service):
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--dflash-dry-run")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*dflash dry run: 1 config, 1 test to run, 1 restart at most*on localhost*",
            "[1/1] DFLASH (1 test) on localhost:",
            "    launch: * -m pytest_specdecode.sim --host 127.0.0.1 --port * --speculative-*",
            "bad config, not run: test_bad.py::test_bad: bad dflash config: *window*",
        ]
    )


def test_a_dry_run_in_script_mode_shows_the_quoted_command(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_s="def test_s(dflash_service): pass")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--dflash-dry-run", "--dflash-host=gpu1",
        "--dflash-restart-cmd=/opt/reconfig.sh {budget} {draft_model}",
        "--dflash-sweep=budget=4,8;draft_model=/m/my model", "--dflash-restart=always",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*dflash dry run: 2 configs, 2 tests to run, 2 restarts, on gpu1: nothing was*",
            "[[]1/2] DFLASH budget=4 draft_model=/m/my model (1 test) on gpu1:",
            "    run over SSH: /opt/reconfig.sh 4 '/m/my model'",
            "    then wait for http://gpu1:30000 to serve this config",
            "[[]2/2] DFLASH budget=8 draft_model=/m/my model (1 test) on gpu1:",
            "    run over SSH: /opt/reconfig.sh 8 '/m/my model'",
        ]
    )


def test_a_dry_run_masks_an_api_key_on_the_launch_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_s="def test_s(dflash_service): pass")
    launch = "python -m pytest_specdecode.sim --api-key s3cret-key-value"
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--dflash-dry-run", f"--dflash-launch={launch}"
    )
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["    launch: *--api-key ****"])
    assert "s3cret" not in result.stdout.str()


def test_a_systemd_dry_run_shows_the_key_going_to_its_own_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_s="def test_s(dflash_service): pass")
    launch = "python -m sglang.launch_server --api-key s3cret-key-value"
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--dflash-dry-run", f"--dflash-launch={launch}",
        "--dflash-host=127.0.0.1", "--dflash-unit=sglang.service", "--dflash-draft-model=/m",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "    write /etc/systemd/system/sglang.service.d/50-specdecode.secrets (mode 0600, "
            "over SSH stdin): SPECDECODE_API_KEY",
            "    write /etc/systemd/system/sglang.service.d/50-specdecode.conf:",
            "      ExecStart=python -m sglang.launch_server --api-key ${SPECDECODE_API_KEY} *",
            "      EnvironmentFile=/etc/systemd/system/sglang.service.d/50-specdecode.secrets",
        ]
    )
    assert "s3cret" not in result.stdout.str()


@pytest.mark.parametrize(
    ("given", "added"),
    [
        ("--host=0.0.0.0", "--port"),  # the = form is the launch line's own host
        ("--host 0.0.0.0", "--port"),
        ("--hos 0.0.0.0", "--port"),  # an abbreviation SGLang's parser takes for --host
        ("--port=30000", ""),
        ("--host 0.0.0.0 --port 30000", ""),
        ("", "--host"),
    ],
)
def test_a_local_launch_line_gets_no_second_host_or_port(
    pytester: pytest.Pytester, given: str, added: str
) -> None:
    pytester.makepyfile(test_s="def test_s(dflash_service): pass")
    launch = f"python -m sglang.launch_server --model-path /m {given}".rstrip()
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--dflash-dry-run", f"--dflash-launch={launch}",
        "--dflash-draft-model=/m/drafter",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.OK
    (line,) = [w for w in result.stdout.lines if w.startswith("    launch: ")]
    words = line.split()
    hosts = [w for w in words if w.split("=")[0] in ("--host", "--hos")]
    ports = [w for w in words if w.split("=")[0] == "--port"]
    assert len(hosts) <= 1, line
    assert len(ports) == 1, line
    if added:
        assert added in words, line
