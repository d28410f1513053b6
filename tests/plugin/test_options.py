"""Options, ini and environment: resolution, precedence and one-line errors."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_specdecode.config.options import GROUPS, add_options
from pytest_specdecode.config.settings import Host, Settings, SettingsError, parse_host, resolve
from pytest_specdecode.session.target import header_lines


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


@pytest.mark.parametrize(
    ("launch", "drafter"),
    [
        ("python -m sglang.launch_server --model-path /m --speculative-draft-model-path /d", "/d"),
        ("python -m sglang.launch_server --speculative-draft-model=/d2 --tp 8", "/d2"),
        ("python -m sglang.launch_server '--speculative-draft-model-path' '/a b'", "/a b"),
        ("python -m sglang.launch_server --model-path /m", None),
    ],
)
def test_a_drafter_on_the_launch_line_is_the_draft_model(
    pytester: pytest.Pytester, launch: str, drafter: str | None
) -> None:
    config = pytester.parseconfig(
        "--dflash-host", "gpu1", "--dflash-unit", "u", "--dflash-launch", launch
    )
    assert resolve(config, environ={}).draft_model == drafter
    given = pytester.parseconfig(
        "--dflash-host", "gpu1", "--dflash-unit", "u", "--dflash-launch", launch,
        "--dflash-draft-model", "/given",
    )  # fmt: skip
    assert resolve(given, environ={}).draft_model == "/given"  # the option says it first


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


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("dflash_ready_timeout = soon", r"'soon' from dflash_ready_timeout ini option"),
        ("dflash_ready_timeout = nan", r"'nan' from dflash_ready_timeout ini option: .*finite"),
        ("dflash_ready_timeout = -1", r"'-1' from dflash_ready_timeout ini option"),
        ("dflash_sudo = maybe", r"'maybe' from dflash_sudo ini option: expected true or false"),
        ("dflash_dataset = mbpp", r"'mbpp' from dflash_dataset ini option: expected one of"),
        ("dflash_launch = python -m 'x", r"from dflash_launch ini option: No closing quotation"),
        ("dflash_domains = code,poetry", r"dflash_domains ini option: unknown domain 'poetry'"),
        ("dflash_request_rate = 4,0", r"'4,0' from dflash_request_rate .*finite number > 0"),
        ("dflash_slo = ttft:500", r"'ttft:500' from dflash_slo ini option: bad SLO 'ttft:500'"),
        ("dflash_slo = tpot:3ms,tpot:4ms", r"from dflash_slo ini option: SLO 'tpot' given twice"),
        ("dflash_max_repetition = 2", r"'2' from dflash_max_repetition ini option: .*fraction"),
    ],
)
def test_bad_ini_value_names_its_source(pytester: pytest.Pytester, line: str, message: str) -> None:
    pytester.makeini(f"[pytest]\n{line}\n")
    with pytest.raises(SettingsError, match=message):
        resolve(pytester.parseconfig(), environ={})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dflash-ready-timeout", "abc"], "*--dflash-ready-timeout: expected a number*"),
        (["--dflash-min-pass-rate", "2"], "*--dflash-min-pass-rate: expected a fraction*"),
        (["--dflash-max-repetition", "1.5"], "*--dflash-max-repetition: expected a fraction*"),
        (["--dflash-max-repetition", "x"], "*--dflash-max-repetition: expected a fraction*"),
        (["--dflash-config", "budget=x"], "*budget*"),
        (["--dflash-config", "budgte=8"], "*budgte*"),
        (["--dflash-sweep", "budget="], "*--dflash-sweep*"),
        (["--dflash-search", "budget="], "*--dflash-search*"),
        (
            ["--dflash-search", "budget=4", "--dflash-sweep", "budget=8"],
            "*--dflash-sweep and --dflash-search are both given*",
        ),
        (["--dflash-search-seed", "3"], "*--dflash-search-seed needs --dflash-search SPACE*"),
        (["--dflash-search", "budget=4,8", "--dflash-search-restarts", "0"], "*expected an*"),
        (["--dflash-search-budget", "2h"], "*--dflash-search-budget needs --dflash-search SPACE*"),
        (
            ["--dflash-search", "budget=4,8", "--dflash-search-budget", "90"],
            "*--dflash-search-budget: expected a duration like 2h, 90m, 30s or 1h30m*",
        ),
        (
            [
                "--dflash-search",
                "budget=4,8",
                "--dflash-search-budget",
                "2h",
                "--dflash-search-restarts",
                "3",
            ],
            "*--dflash-search-restarts and --dflash-search-budget are both given*",
        ),
        (
            ["--dflash-search", "budget=4,8", "--dflash-search-metric", "speedup"],
            "*--dflash-search-metric speedup needs a baseline*",
        ),
        (["--dflash-host", "gpu1"], "*--dflash-host gpu1 needs a way to restart the server*"),
        (["--dflash-control", "systemd"], "*--dflash-control systemd needs --dflash-host*"),
        (["--dflash-compare", "9999"], "*--dflash-compare*9999*"),
        (
            ["--dflash-compare-fail", "tok_s:5%"],
            "*--dflash-compare-fail needs a saved run to compare with: --dflash-compare "
            "PATH|NNNN, or pytest-benchmark's --benchmark-compare*",
        ),
        (["--dflash-dialect", "template"], "*dflash_args*"),
        (["--dflash-launch", "python -m 'oops"], "*--dflash-launch: No closing quotation*"),
        (["--dflash-host", "a:b:c"], "*bad host 'a:b:c': use HOST, HOST:PORT*"),
        (["--dflash-host", "gpu1/x", "--dflash-restart", "never"], "*bad host 'gpu1/x'*"),
        (
            ["--dflash-host", "gpu1", "--dflash-unit", "u", "--dflash-restart-cmd", "/r {budget}"],
            "*--dflash-unit and --dflash-restart-cmd are both given*drop one*",
        ),
        (
            ["--dflash-host", "gpu1", "--dflash-restart", "never", "--dflash-restart-cmd", "/r"],
            "*--dflash-restart=never never restarts*--dflash-restart-cmd would never be used*",
        ),
        (
            ["--dflash-host", "127.0.0.1:31234", "--dflash-restart=never"],
            "*--dflash-host '127.0.0.1:31234': the port after the host is its SSH port, and "
            "--dflash-restart=never uses no SSH*give --dflash-host 127.0.0.1 --dflash-port 31234",
        ),
        (["--dflash-ready-timeout", "nan"], "*--dflash-ready-timeout: expected a finite number*"),
        (["--dflash-ready-timeout", "inf"], "*--dflash-ready-timeout: expected a finite number*"),
        (["--dflash-ready-timeout=-5"], "*--dflash-ready-timeout: expected a finite number > 0*"),
        (["--dflash-temperature", "nan"], "*from --dflash-temperature: expected a finite number*"),
        # A unit name that systemctl would read as its options (-H: another host).
        (
            ["--dflash-host", "127.0.0.1", "--dflash-unit=-H127.0.0.2"],
            "*Invalid value '-H127.0.0.2' from --dflash-unit: starts with '-': a unit name "
            "cannot be an option of systemctl*",
        ),
        (["--dflash-host", "127.0.0.1", "--dflash-unit", "a b"], "*expected a systemd unit*"),
        (["--dflash-draft-model=-rf"], "*from --dflash-draft-model: starts with '-'*"),
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


def test_resume_without_a_path_continues_the_configured_report(
    pytester: pytest.Pytester,
) -> None:
    bare = pytester.parseconfig("--dflash-report", "out/r.json", "--dflash-resume")
    assert resolve(bare, environ={}).resume == "out/r.json"
    assert resolve(pytester.parseconfig(), environ={}).resume is None
    pytester.makeini("[pytest]\ndflash_resume = true\n")
    assert resolve(pytester.parseconfig(), environ={}).resume == ".dflash/report.json"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dflash-start-retries", "-1"], "*--dflash-start-retries: expected an integer >= 0*"),
        (["--dflash-start-retry-pause", "0"], "*--dflash-start-retry-pause: expected a finite*"),
        (["--dflash-weight-cache", "maybe"], "*--dflash-weight-cache: expected off, on, keep*"),
        (["--dflash-weight-cache", "on,keep"], "*--dflash-weight-cache: on and keep exclude*"),
        (
            ["--dflash-weight-cache", "on", "--dflash-restart-cmd", "x", "--dflash-host", "h"],
            "*--dflash-weight-cache on starts its daemon with the launch command, which script*",
        ),
    ],
)
def test_bad_retry_options_are_one_line_usage_errors(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_help_shows_the_groups_in_order(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "dflash: target and control*",
            "*--dflash-host=HOST*",
            "dflash: configs*",
            "*--dflash-sweep=*",
            "dflash: coding correctness*",
            "*--dflash-problems=TOML*",
            "dflash: throughput*",
            "*--dflash-contexts=*",
            "dflash: gates and reports*",
            "*--dflash-min-pass-rate=*",
            "dflash: the bundled simulator*",
            "*--dflash-sim-time-scale=X*",
        ]
    )


class _Recorder:
    """Stands in for pytest's parser: records what the plugin declares, and where."""

    def __init__(self, group: str = "") -> None:
        self.options: dict[str, dict[str, object]] = {}
        self.groups: dict[str, str] = {}  # option -> the --help group it is in
        self.ini: dict[str, str] = {}
        self.aliases: list[str] = []
        self.group = group

    def getgroup(self, name: str, description: str = "") -> _Recorder:
        group = _Recorder(name)
        group.options, group.groups, group.ini = self.options, self.groups, self.ini
        group.aliases = self.aliases
        return group

    def addoption(self, *names: str, **kwargs: object) -> None:
        for name in names:  # an alias is an option of its own, with its own ini key
            self.options[name] = kwargs
            self.groups[name] = self.group
        self.aliases.extend(names[1:])

    def addini(self, name: str, help: str, type: str | None = None, default: object = None) -> None:
        self.ini[name] = type or "string"


def declared() -> _Recorder:
    recorder = _Recorder()
    add_options(recorder)  # type: ignore[arg-type]
    return recorder


# Per option: (command-line args, ini lines, args both runs need). The value must
# differ from the default, so an ini key that is declared but never read fails.
SAMPLES: dict[str, tuple[list[str], str, list[str]]] = {
    "--dflash-host": (
        ["--dflash-host", "gpu1", "--dflash-host", "gpu2:2222"],
        "gpu1\n  gpu2:2222",
        ["--dflash-restart", "always", "--dflash-unit", "u"],
    ),
    "--dflash-port": (["--dflash-port", "31000"], "31000", []),
    "--dflash-control": (["--dflash-control", "external"], "external", []),
    "--dflash-launch": (
        ["--dflash-launch", "python -m sglang.launch_server"],
        "python -m sglang.launch_server",
        [],
    ),
    "--dflash-unit": (
        ["--dflash-unit", "sglang.service"],
        "sglang.service",
        ["--dflash-host", "gpu1"],
    ),
    "--dflash-restart-cmd": (
        ["--dflash-restart-cmd", "/r {budget}"],
        "/r {budget}",
        ["--dflash-host", "gpu1"],
    ),
    "--dflash-logs-cmd": (["--dflash-logs-cmd", "tail -n 9 log"], "tail -n 9 log", []),
    "--dflash-log-cmd": (["--dflash-log-cmd", "tail -n 9 log"], "tail -n 9 log", []),
    "--dflash-sudo": (["--dflash-sudo"], "true", []),
    "--dflash-restart": (["--dflash-restart", "always"], "always", []),
    "--dflash-restore": (["--dflash-restore"], "yes", []),
    "--dflash-ready-timeout": (["--dflash-ready-timeout", "12.5"], "12.5", []),
    "--dflash-ssh-user": (["--dflash-ssh-user", "ops"], "ops", []),
    "--dflash-ssh-port": (["--dflash-ssh-port", "2222"], "2222", []),
    "--dflash-ssh-key": (["--dflash-ssh-key", "/k"], "/k", []),
    "--dflash-ssh-accept-new-host-key": (["--dflash-ssh-accept-new-host-key"], "1", []),
    "--dflash-dialect": (["--dflash-dialect", "ddtree"], "ddtree", []),
    "--dflash-draft-model": (["--dflash-draft-model", "/m/d"], "/m/d", []),
    "--dflash-sweep": (["--dflash-sweep", "budget=4,8"], "budget=4,8", []),
    "--dflash-search": (["--dflash-search", "budget=4,8"], "budget=4,8", []),
    "--dflash-search-restarts": (
        ["--dflash-search-restarts", "5"],
        "5",
        ["--dflash-search", "budget=4,8"],
    ),
    "--dflash-search-budget": (
        ["--dflash-search-budget", "90m"],
        "90m",
        ["--dflash-search", "budget=4,8"],
    ),
    "--dflash-search-metric": (
        ["--dflash-search-metric", "tok_s"],
        "tok_s",
        ["--dflash-search", "budget=4,8"],
    ),
    "--dflash-search-seed": (["--dflash-search-seed", "3"], "3", ["--dflash-search", "budget=4,8"]),
    "--dflash-min-pass-rate": (["--dflash-min-pass-rate", "80%"], "0.8", []),
    "--dflash-problems": (
        ["--dflash-problems", "/p/a.toml", "--dflash-problems", "/p/b.toml"],
        "/p/a.toml\n  /p/b.toml",
        [],
    ),
    "--dflash-dataset": (["--dflash-dataset", "humaneval"], "humaneval", []),
    "--dflash-samples": (["--dflash-samples", "4"], "4", ["--dflash-temperature", "0.5"]),
    "--dflash-temperature": (["--dflash-temperature", "0.7"], "0.7", []),
    "--dflash-answer-timeout": (["--dflash-answer-timeout", "3"], "3", []),
    "--dflash-max-tokens": (["--dflash-max-tokens", "99"], "99", []),
    "--dflash-api": (["--dflash-api", "completions"], "completions", []),
    "--dflash-contexts": (["--dflash-contexts", "60,99"], "60,99", []),
    "--dflash-concurrency": (["--dflash-concurrency", "2"], "2", []),
    "--dflash-output-tokens": (["--dflash-output-tokens", "64"], "64", []),
    "--dflash-rounds": (["--dflash-rounds", "5"], "5", []),
    "--dflash-domains": (["--dflash-domains", "code,math"], "code,math", []),
    "--dflash-request-rate": (["--dflash-request-rate", "4,8"], "4,8", []),
    "--dflash-max-concurrency": (["--dflash-max-concurrency", "8"], "8", []),
    "--dflash-rate-requests": (["--dflash-rate-requests", "32"], "32", []),
    "--dflash-load-mode": (["--dflash-load-mode", "continuous"], "continuous", []),
    "--dflash-continuous-requests": (["--dflash-continuous-requests", "64"], "64", []),
    "--dflash-slo": (["--dflash-slo", "ttft:500ms,tpot:30ms"], "ttft:500ms,tpot:30ms", []),
    "--dflash-baseline": (["--dflash-baseline", "0003"], "0003", []),
    "--dflash-compare": (["--dflash-compare", "0001"], "0001", []),
    "--dflash-compare-fail": (
        ["--dflash-compare-fail", "tok_s:5%", "--dflash-compare-fail", "accept_length:0.2"],
        "tok_s:5%\n  accept_length:0.2",
        [],
    ),
    "--dflash-min-accept-length": (["--dflash-min-accept-length", "2.5"], "2.5", []),
    "--dflash-max-repetition": (["--dflash-max-repetition", "30%"], "0.3", []),
    "--dflash-lossless-margin": (["--dflash-lossless-margin", "0.2"], "0.2", []),
    "--dflash-policy": (["--dflash-policy", "p.json"], "p.json", []),
    "--dflash-client-calibration": (["--dflash-client-calibration", "off"], "off", []),
    "--dflash-client-wait": (["--dflash-client-wait", "poll"], "poll", []),
    "--dflash-max-accept-drop": (["--dflash-max-accept-drop", "25%"], "0.25", []),
    "--dflash-report": (["--dflash-report", "out/r.json"], "out/r.json", []),
    "--dflash-plot": (["--dflash-plot", "plots"], "plots", []),
    "--dflash-html": (["--dflash-html", "out/r.html"], "out/r.html", []),
    "--dflash-resume": (["--dflash-resume", "old/r.json"], "old/r.json", []),
    "--dflash-dry-run": (["--dflash-dry-run"], "true", []),
    "--dflash-start-retries": (["--dflash-start-retries", "3"], "3", []),
    "--dflash-start-retry-pause": (["--dflash-start-retry-pause", "2.5"], "2.5", []),
    "--dflash-weight-cache": (["--dflash-weight-cache", "keep,fallback"], "keep,fallback", []),
    "--dflash-sim-time-scale": (["--dflash-sim-time-scale", "0.25"], "0.25", []),
    "--dflash-sim-quality": (["--dflash-sim-quality", "50%"], "0.5", []),
    "--dflash-sim-restart-noise": (["--dflash-sim-restart-noise", "0.06"], "0.06", []),
    "--dflash-sim-answers": (["--dflash-sim-answers", "answers.json"], "answers.json", []),
    "--dflash-sim-fault": (
        ["--dflash-sim-fault", "lossy", "--dflash-sim-fault", "die-after:3"],
        "lossy\n  die-after:3",
        [],
    ),
    "--dflash-sim-args": (["--dflash-sim-args", "--sim-seed 3"], "--sim-seed 3", []),
    # Options of branches merged after this table was written (unused until they are).
    "--dflash-sandbox": (["--dflash-sandbox", "fallback"], "fallback", []),
    "--dflash-check-workers": (["--dflash-check-workers", "3"], "3", []),
    "--dflash-sglang-version": (["--dflash-sglang-version", "0.5.23"], "0.5.23", []),
}
# Options whose ini key means something else than the option, and why.
OWN_INI_MEANING = {
    "--dflash-api-key": "a secret: the ini names the variable holding it (env:NAME), tested above",
    # The ini dflash_config is the default config (under markers); the option overrides them.
    "--dflash-config": "dflash_config has its own meaning, tested in test_collection.py",
}


def ini_key(recorder: _Recorder, option: str) -> str:
    key = "dflash_" + option.removeprefix("--dflash-").replace("-", "_")
    return "dflash_hosts" if option == "--dflash-host" else key


def test_every_option_has_an_ini_key() -> None:
    recorder = declared()
    assert all(name.startswith("--dflash-") for name in recorder.options)
    missing = [o for o in recorder.options if ini_key(recorder, o) not in recorder.ini]
    assert missing == [], missing
    for option, kwargs in recorder.options.items():
        many = kwargs.get("action") == "append"
        assert recorder.ini[ini_key(recorder, option)] == ("linelist" if many else "string")


def test_the_log_cmd_alias_has_its_ini_key(pytester: pytest.Pytester) -> None:
    assert "--dflash-log-cmd" in declared().aliases
    pytester.makeini("[pytest]\ndflash_log_cmd = tail -n 9 log\n")
    assert resolve(pytester.parseconfig(), environ={}).logs_cmd == "tail -n 9 log"
    alias = pytester.parseconfig("--dflash-log-cmd", "tail log")
    assert resolve(alias, environ={}).logs_cmd == "tail log"


def test_the_api_key_ini_names_its_variable(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ndflash_api_key = env:MY_TOKEN\n")
    settings = resolve(pytester.parseconfig(), environ={"MY_TOKEN": "s3cret"})
    assert settings.api_key == "s3cret"
    assert resolve(pytester.parseconfig(), environ={"DFLASH_API_KEY": "k"}).api_key == "k"
    with pytest.raises(SettingsError, match="names the environment variable MY_TOKEN, which is"):
        resolve(pytester.parseconfig(), environ={})
    pytester.makeini("[pytest]\ndflash_api_key = s3cret-literal\n")
    with pytest.raises(SettingsError, match="write env:VARIABLE") as refused:
        resolve(pytester.parseconfig(), environ={})
    assert "s3cret-literal" not in str(refused.value)  # a secret is never echoed
    pytester.makeini("[pytest]\ndflash_api_key = env:MY_TOKEN\n")
    with pytest.raises(SettingsError, match=r"from MY_TOKEN .*contains a control") as bad:
        resolve(pytester.parseconfig(), environ={"MY_TOKEN": "s3cret\rX"})
    assert "s3cret" not in str(bad.value)


# A few options per --help group: the groups are the parts a user looks in.
GROUP_OF = {
    "--dflash-host": "target",
    "--dflash-unit": "target",
    "--dflash-restore": "target",
    "--dflash-ssh-user": "target",
    "--dflash-resume": "target",
    "--dflash-config": "configs",
    "--dflash-sweep": "configs",
    "--dflash-dialect": "configs",
    "--dflash-problems": "coding",
    "--dflash-samples": "coding",
    "--dflash-contexts": "throughput",
    "--dflash-request-rate": "throughput",
    "--dflash-min-pass-rate": "gates",
    "--dflash-compare": "gates",
    "--dflash-report": "gates",
    "--dflash-sim-time-scale": "simulator",
}


def test_every_option_is_in_a_help_group() -> None:
    recorder = declared()
    named = {name: key for key, (name, _) in GROUPS.items()}
    assert set(recorder.groups.values()) == set(named), "an option outside GROUPS, or no option"
    where = {option: named[group] for option, group in recorder.groups.items()}
    assert {o: where[o] for o in GROUP_OF} == GROUP_OF


@pytest.mark.parametrize("option", sorted(set(declared().options) - set(OWN_INI_MEANING)))
def test_the_ini_key_sets_what_the_option_sets(pytester: pytest.Pytester, option: str) -> None:
    assert option in SAMPLES, f"add a sample value for {option} to SAMPLES"
    cli, ini_value, context = SAMPLES[option]
    try:
        default: Settings | None = resolve(pytester.parseconfig(*context), environ={})
    except SettingsError:  # the context alone is incomplete: the option is what completes it
        default = None
    from_cli = resolve(pytester.parseconfig(*cli, *context), environ={})
    pytester.makeini(f"[pytest]\n{ini_key(declared(), option)} = {ini_value}\n")
    from_ini = resolve(pytester.parseconfig(*context), environ={})
    assert from_cli != default
    assert from_ini == from_cli


def test_ini_problem_files_are_relative_to_the_ini_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\ndflash_problems = problems.toml\n")
    pytester.makefile(
        ".toml",
        problems="""
        [[problem]]
        name = "add_two"
        prompt = "Write add_two(a, b)."
        reference = "def add_two(a, b):\\n    return a + b\\n"
        args = ["int", "int"]
        cases = [[1, 2]]
        """,
    )
    pytester.makepyfile(test_p="def test_p(dflash_problem): pass")
    sub = pytester.mkdir("sub")
    monkeypatch.chdir(sub)  # a run started below the ini still finds the file
    settings = resolve(pytester.parseconfig(), environ={})
    assert settings.problem_files == (str(pytester.path / "problems.toml"),)
    result = pytester.runpytest(str(pytester.path), "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "test_p.py::test_p[add_two]" in result.stdout.lines


def test_the_header_says_whether_the_drop_in_stays_on_the_host() -> None:
    kept = Settings(hosts=(Host("gpu1"),), control="systemd", unit="sglang.service")
    assert header_lines(kept, "http://gpu1:30000")[-1] == (
        "dflash: the systemd drop-in of sglang.service (the last config) stays on the host "
        "after the run; --dflash-restore (ini dflash_restore = true) removes it"
    )
    restored = dataclasses.replace(kept, restore=True)
    assert header_lines(restored, "http://gpu1:30000")[-1] == (
        "dflash: the systemd drop-in of sglang.service is removed at the end (--dflash-restore)"
    )
    assert not any("drop-in" in line for line in header_lines(Settings(), "http://x"))
