"""The simulator's knobs as plugin options, and the lighter defaults a simulated run gets."""

from __future__ import annotations

import pytest

from pytest_specdecode.config.settings import resolve

GPU = ["--dflash-host", "gpu1", "--dflash-unit", "sglang.service"]


def test_a_simulated_run_gets_lighter_defaults_and_says_which(pytester: pytest.Pytester) -> None:
    simulated = resolve(pytester.parseconfig(), environ={})
    assert simulated.output_tokens == 128
    assert simulated.sim_args == ("--sim-time-scale", "0.5")
    notes = " | ".join(simulated.sim_defaults)
    assert "128 output tokens per throughput request (512 against a server" in notes
    assert "--sim-time-scale 0.5: the simulator runs twice as fast as the GPU it models" in notes
    server = resolve(pytester.parseconfig(*GPU), environ={})
    assert (server.output_tokens, server.sim_args, server.sim_defaults) == (512, (), ())


def test_a_setting_the_user_gives_replaces_the_simulator_default(
    pytester: pytest.Pytester,
) -> None:
    given = pytester.parseconfig("--dflash-sim-time-scale", "1", "--dflash-output-tokens", "512")
    settings = resolve(given, environ={})
    assert (settings.output_tokens, settings.sim_args, settings.sim_defaults) == (
        512,
        ("--sim-time-scale", "1"),
        (),
    )
    # A launch line of the user's that sets the time scale is theirs too.
    launch = "python -m pytest_specdecode.sim --sim-time-scale 0"
    settings = resolve(pytester.parseconfig("--dflash-launch", launch), environ={})
    assert "--sim-time-scale" not in settings.sim_args
    assert not any("time-scale" in note for note in settings.sim_defaults)


def test_the_knobs_become_the_simulators_flags(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ndflash_sim_answers = sim/answers.json\n")
    sub = pytester.mkdir("sub")
    args = ["--dflash-sim-quality", "0.6", "--dflash-sim-fault", "lossy"]
    args += ["--dflash-sim-args", "--sim-seed 3 --sim-load-seconds '0'"]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(sub)  # the ini's relative path is the ini's, wherever pytest runs
        settings = resolve(pytester.parseconfig(*args), environ={})
    assert settings.sim_args == (
        *("--sim-time-scale", "0.5", "--sim-quality", "0.6"),
        *("--sim-answers", str(pytester.path / "sim" / "answers.json")),
        *("--sim-fault", "lossy", "--sim-seed", "3", "--sim-load-seconds", "0"),
    )


def test_a_knob_without_the_simulator_is_a_one_line_usage_error(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest(*GPU, "--dflash-sim-quality", "0.5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--dflash-sim-quality sets the bundled simulator, but this run does not start it*"]
    )
    assert "Traceback" not in result.stderr.str()


def test_an_ini_s_knobs_wait_for_a_run_of_the_simulator(pytester: pytest.Pytester) -> None:
    # One CI ini serves simulator runs and host runs: on a host run its knobs do nothing.
    pytester.makeini("[pytest]\ndflash_sim_quality = 0.5\ndflash_sim_args = --sim-seed 3\n")
    settings = resolve(pytester.parseconfig(*GPU), environ={})
    assert settings.sim_args == ()
    assert resolve(pytester.parseconfig(), environ={}).sim_args[-4:] == (
        *("--sim-quality", "0.5", "--sim-seed", "3"),
    )


def test_the_launch_line_and_header_carry_the_knobs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\n@pytest.mark.dflash(budget=8)\ndef test_x(dflash_client): pass\n"
    )
    result = pytester.runpytest("--dflash-dry-run", "--dflash-sim-quality", "0.5")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "dflash: using the bundled SGLang simulator: figures are simulated, not GPU results",
            "dflash: simulator default: 128 output tokens per throughput request*",
            "dflash: simulator default: --sim-time-scale 0.5: *twice as fast as the GPU*",
            "*launch: * -m pytest_specdecode.sim * --sim-time-scale 0.5 --sim-quality 0.5 *",
        ]
    )


def test_restart_noise_passes_a_count_file_that_outlives_the_run(
    pytester: pytest.Pytester,
) -> None:
    settings = resolve(pytester.parseconfig("--dflash-sim-restart-noise", "0.06"), environ={})
    assert settings.sim_args[-4:] == (
        *("--sim-restart-noise", "0.06"),
        *("--sim-start-count-file", str(pytester.path / ".dflash" / "sim-starts")),
    )
    pytester.makeini("[pytest]\ndflash_sim_restart_noise = 0\n")
    assert "--sim-restart-noise" not in resolve(pytester.parseconfig(), environ={}).sim_args


@pytest.mark.parametrize("value", ["1", "-0.1", "x"])
def test_a_bad_restart_noise_is_a_one_line_usage_error(
    pytester: pytest.Pytester, value: str
) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest(f"--dflash-sim-restart-noise={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--dflash-sim-restart-noise*"])
    assert "Traceback" not in result.stderr.str()
