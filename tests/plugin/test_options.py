"""Options, ini and environment: resolution, precedence and one-line errors."""

from __future__ import annotations

import pytest

from pytest_specdecode.config.settings import Host, SettingsError, parse_host, resolve


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu1", Host("gpu1")),
        ("gpu1:2222", Host("gpu1", 2222)),
        ("[::1]:22", Host("::1", 22)),
        ("10.1.2.200", Host("10.1.2.200")),
    ],
)
def test_parse_host(text: str, expected: Host) -> None:
    assert parse_host(text) == expected


@pytest.mark.parametrize("text", ["gpu1:x", "gpu1:0", "gpu1:70000", ""])
def test_parse_host_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"port|empty"):
        parse_host(text)


def test_defaults_run_the_simulator_locally(pytester: pytest.Pytester) -> None:
    settings = resolve(pytester.parseconfig(), environ={})
    assert settings.control == "local"
    assert settings.uses_simulator
    assert settings.restart == "auto"
    assert settings.ready_timeout == 1800.0
    assert settings.draft_model  # the simulator needs a drafter path, as SGLang does


def test_precedence_cli_over_env_over_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ndflash_ready_timeout = 30\ndflash_ssh_user = ini-user\n")
    env = {"DFLASH_READY_TIMEOUT": "20", "DFLASH_SSH_USER": "env-user"}
    assert resolve(pytester.parseconfig(), environ={}).ready_timeout == 30
    assert resolve(pytester.parseconfig(), environ=env).ready_timeout == 20
    cli = pytester.parseconfig("--dflash-ready-timeout", "10")
    settings = resolve(cli, environ=env)
    assert settings.ready_timeout == 10
    assert settings.ssh_user == "env-user"


def test_control_mode_follows_the_options(pytester: pytest.Pytester) -> None:
    systemd = pytester.parseconfig("--dflash-host", "gpu1", "--dflash-unit", "sglang.service")
    assert resolve(systemd, environ={}).control == "systemd"
    script = pytester.parseconfig("--dflash-host", "gpu1", "--dflash-restart-cmd", "/r {budget}")
    assert resolve(script, environ={}).control == "script"
    external = pytester.parseconfig("--dflash-host", "gpu1", "--dflash-restart", "never")
    assert resolve(external, environ={}).control == "external"


def test_bad_ini_value_names_its_source(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ndflash_ready_timeout = soon\n")
    with pytest.raises(SettingsError, match=r"'soon' from dflash_ready_timeout ini option"):
        resolve(pytester.parseconfig(), environ={})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dflash-ready-timeout", "abc"], "*--dflash-ready-timeout: expected a number*"),
        (["--dflash-min-pass-rate", "2"], "*--dflash-min-pass-rate: expected a fraction*"),
        (["--dflash-config", "budget=x"], "*budget*"),
        (["--dflash-config", "budgte=8"], "*budgte*"),
        (["--dflash-sweep", "budget="], "*--dflash-sweep*"),
        (["--dflash-host", "gpu1"], "*--dflash-host gpu1 needs a way to restart the server*"),
        (["--dflash-control", "systemd"], "*--dflash-control systemd needs --dflash-host*"),
        (["--dflash-compare", "9999"], "*--dflash-compare*9999*"),
        (["--dflash-compare-fail", "tok_s:5%"], "*--dflash-compare-fail needs --dflash-compare*"),
        (["--dflash-dialect", "template"], "*dflash_args*"),
    ],
)
def test_bad_options_are_one_line_usage_errors(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_help_shows_the_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*speculative-decoding*", "*--dflash-host=HOST*"])
