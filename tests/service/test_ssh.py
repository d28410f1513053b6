"""The fabric connection factory against a real sshd: host keys, errors, commands."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_specdecode.processes.children import free_port
from pytest_specdecode.service import ssh
from pytest_specdecode.service.base import SSHError

from .conftest import SSHD


def test_known_host_key_connects_and_runs_commands(sshd: SSHD) -> None:
    conn = ssh.open_connection(sshd.target())
    try:
        result = ssh.run(conn, "echo hello; echo oops >&2; exit 3", timeout=10.0, where="test")
    finally:
        conn.close()
    assert (result.stdout, result.stderr, result.exited) == ("hello\n", "oops\n", 3)


def test_unknown_host_key_is_refused_by_default(sshd: SSHD) -> None:
    target = sshd.target(known_hosts_files=[str(sshd.empty_known_hosts)])
    with pytest.raises(SSHError) as info:
        ssh.open_connection(target)
    message = str(info.value)
    assert "\n" not in message
    assert f"{sshd.user}@127.0.0.1:{sshd.port}" in message
    assert "is unknown (ssh-ed25519 SHA256:" in message
    assert f"ssh-keyscan -p {sshd.port} 127.0.0.1" in message
    assert "--dflash-ssh-accept-new-host-key" in message


def test_unknown_host_key_is_accepted_with_the_opt_in_and_not_saved(sshd: SSHD) -> None:
    target = sshd.target(
        known_hosts_files=[str(sshd.empty_known_hosts)], accept_unknown_host_keys=True
    )
    conn = ssh.connection_factory(target)()
    try:
        assert ssh.run(conn, "true", timeout=10.0, where="test").exited == 0
    finally:
        conn.close()
    assert sshd.empty_known_hosts.read_text() == ""


def test_ssh_config_supplies_host_port_user_key_and_host_key_policy(
    sshd: SSHD, tmp_path: Path
) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(
        "Host specdecode-alias\n"
        "  HostName 127.0.0.1\n"
        f"  Port {sshd.port}\n"
        f"  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key}\n"
        "  StrictHostKeyChecking accept-new\n"
    )
    target = ssh.SSHTarget(
        host="specdecode-alias",
        ssh_config_path=str(config),
        known_hosts_files=[str(sshd.empty_known_hosts)],
    )
    conn = ssh.open_connection(target)
    try:
        assert (conn.host, conn.port, conn.user) == ("127.0.0.1", sshd.port, sshd.user)
        assert ssh.run(conn, "echo ok", timeout=10.0, where="test").stdout == "ok\n"
    finally:
        conn.close()


def test_changed_host_key_is_refused_even_with_the_opt_in(sshd: SSHD, tmp_path: Path) -> None:

    other = tmp_path / "known_hosts"
    # A valid ed25519 key that is not the server's.
    other.write_text(
        f"[127.0.0.1]:{sshd.port} ssh-ed25519 "
        "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
    )
    target = sshd.target(known_hosts_files=[str(other)], accept_unknown_host_keys=True)
    with pytest.raises(SSHError, match="does not match known_hosts"):
        ssh.open_connection(target)


def test_wrong_key_is_an_authentication_error(sshd: SSHD, tmp_path: Path) -> None:

    key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    with pytest.raises(SSHError, match=r"SSH login to .*failed.*--dflash-ssh-key"):
        ssh.open_connection(sshd.target(key_filename=str(key)))


def test_connection_refused_says_what_to_check(sshd: SSHD) -> None:
    with pytest.raises(SSHError, match=r"refused: is sshd running there"):
        ssh.open_connection(sshd.target(port=free_port()))


def test_command_timeout_is_one_line(sshd: SSHD) -> None:
    conn = ssh.open_connection(sshd.target())
    try:
        with pytest.raises(SSHError, match=r"did not finish within 0.5 s"):
            ssh.run(conn, "sleep 5", timeout=0.5, where="test")
    finally:
        conn.close()


def test_a_character_split_between_two_reads_comes_back_whole(sshd: SSHD) -> None:
    # invoke reads output 1000 bytes at a time: with 3-byte characters, reads of
    # a full buffer end inside one. Decoded chunk by chunk they came back as U+FFFD.
    text = "\u20ac" * 20000 + "\n"
    conn = ssh.open_connection(sshd.target())
    try:
        result = ssh.run(
            conn, "cat; cat >&2 <<'E'\n" + text + "E", timeout=10.0, where="test", stdin=text
        )
    finally:
        conn.close()
    assert result.exited == 0
    assert "\ufffd" not in result.stdout + result.stderr
    assert result.stdout == text
    assert result.stderr == text


def test_stdin_reaches_the_command_whole_and_then_ends(sshd: SSHD) -> None:
    # What carries secrets and file contents: not part of the command, read to EOF.
    payload = "".join(f"line {i}: 'quoted' \"double\" $HOME `x` \\ é\r\n" for i in range(3000))
    conn = ssh.open_connection(sshd.target())
    try:
        result = ssh.run(conn, "cat; echo end", timeout=10.0, where="test", stdin=payload)
    finally:
        conn.close()
    assert result.exited == 0
    assert result.stdout == payload + "end\n"
