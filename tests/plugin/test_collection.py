"""Markers become validated configs at collection; items are grouped per config."""

from __future__ import annotations

import json

import pytest

TWO_CONFIGS = """
import json

import pytest

@pytest.mark.dflash(budget=8, window=2048)
def test_a(dflash_config): pass

@pytest.mark.dflash(budget=4, window=2048)
def test_b(dflash_config): pass

@pytest.mark.dflash(budget=8, window=2048)
def test_c(dflash_config): pass

def test_plain(): pass
"""


def collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest("--collect-only", "-q", *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    return [line for line in result.stdout.lines if "::" in line]


def test_items_are_grouped_by_config_with_stable_ids(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_m=TWO_CONFIGS)
    assert collected(pytester) == [
        "test_m.py::test_plain",
        "test_m.py::test_a",
        "test_m.py::test_c",
        "test_m.py::test_b",
    ]


def test_dflash_config_option_keeps_ids(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_m=TWO_CONFIGS)
    ids = collected(pytester, "--dflash-config", "budget=16")
    assert "test_m.py::test_a" in ids
    assert not any("[" in i for i in ids)


def test_sweep_and_list_markers_put_the_config_in_ids(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_m="""
        import pytest

        def test_default(dflash_config): pass

        @pytest.mark.dflash(budget=[4, 16])
        def test_list(dflash_config): pass
        """
    )
    assert collected(pytester) == [
        "test_m.py::test_default",
        "test_m.py::test_list[DFLASH-b4]",
        "test_m.py::test_list[DFLASH-b16]",
    ]
    # test_list's marker overrides the swept budgets: a SweepOverrideWarning, shown.
    shown = "default::pytest_specdecode.errors.SweepOverrideWarning"
    swept = collected(pytester, "-W", shown, "--dflash-sweep", "budget=4,8;window=2048,4096")
    assert len([i for i in swept if i.startswith("test_m.py::test_default[")]) == 4
    assert "test_m.py::test_default[DFLASH-b8-w4096]" in swept


def test_ini_default_config(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ndflash_config = budget=16,window=4096\n")
    pytester.makepyfile(test_m="def test_x(dflash_config): assert dflash_config.budget == 16")
    result = pytester.runpytest("--collect-only", "-q")
    assert result.ret == 0


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("budget=0", "test_m.py::test_bad: bad dflash config: budget=0*"),
        ("budget=8, window=4", "test_m.py::test_bad: bad dflash config: window=4 < budget=8*"),
        ("topk=4", "test_m.py::test_bad: *topk=4 with DFLASH*use algorithm=DDTREE or drop topk*"),
        ("budgte=8", "test_m.py::test_bad: *budgte*"),
        ("algorithm='MEDUSA'", "test_m.py::test_bad: *MEDUSA*"),
        ("8", "test_m.py::test_bad: @pytest.mark.dflash takes keyword arguments only"),
    ],
)
def test_a_bad_marker_errors_only_its_own_test(
    pytester: pytest.Pytester, marker: str, message: str
) -> None:
    pytester.makepyfile(
        test_m=f"""
        import pytest

        def test_before(dflash_config): pass

        @pytest.mark.dflash({marker})
        def test_bad(dflash_service): pass

        def test_after(dflash_config): pass
        """
    )
    result = pytester.runpytest()
    # The rest of the module is collected and runs; the bad test errors, named.
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            f"dflash: collection error: {message}",
            "*ERROR at setup of test_bad*",
            f"collection error: {message}",
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str()
    # --collect-only lists every test and still names the bad one.
    listed = pytester.runpytest("--collect-only", "-q")
    listed.stdout.fnmatch_lines([f"dflash: collection error: {message}"])
    assert {"test_m.py::test_before", "test_m.py::test_after"} <= set(listed.stdout.lines)


def test_marker_without_the_fixture_is_an_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_m="""
        import pytest

        @pytest.mark.dflash(budget=8)
        def test_forgot(): pass

        class TestK:
            def test_fine(self): pass
        """
    )
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*test_m.py::test_forgot: has @pytest.mark.dflash but uses no*"])
    result.assert_outcomes(passed=1, errors=1)


def test_a_bad_throughput_marker_errors_only_its_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_m="""
        import pytest

        @pytest.mark.throughput(contexts=[0])
        def test_bad(dflash_case): pass

        def test_fine(): pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["collection error: test_m.py::test_bad: *"])


def test_dialect_rejects_what_it_cannot_render(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ndflash_dialect = template\ndflash_args = --my-budget {budget}\n")
    pytester.makepyfile(
        test_m="""
        import pytest

        @pytest.mark.dflash(budget=8, window=2048)
        def test_w(dflash_service): pass
        """
    )
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*test_m.py::test_w: bad dflash config:*window*"])


def test_a_sweep_over_draft_models_gives_each_its_own_id(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_m="def test_x(dflash_config): pass")
    ids = collected(pytester, "--dflash-sweep", "draft_model=/m/a,/m/b")
    assert ids == ["test_m.py::test_x[DFLASH-d/m/a]", "test_m.py::test_x[DFLASH-d/m/b]"]


def test_configs_differing_only_in_draft_model_stay_apart_in_the_report(
    sim_ini: pytest.Pytester,
) -> None:
    sim_ini.makepyfile(
        test_m="""
        def test_x(dflash_service, record_property):
            record_property("drafter", dflash_service.config.draft_model)
        """
    )
    result = sim_ini.runpytest("--dflash-sweep", "draft_model=/m/a,/m/b")
    result.assert_outcomes(passed=2)
    report = json.loads((sim_ini.path / "report.json").read_text())
    labels = [c["label"] for c in report["configs"]]
    assert labels == ["DFLASH draft_model=/m/a", "DFLASH draft_model=/m/b"]
    assert len({c["key"] for c in report["configs"]}) == 2
    assert [c["config"]["draft_model"] for c in report["configs"]] == ["/m/a", "/m/b"]
    # Each config's own server facts (recorded after its test's setup).
    assert [c["service"]["restarted"] for c in report["configs"]] == [True, True]
    result.stdout.fnmatch_lines(["DFLASH draft_model=/m/a *", "DFLASH draft_model=/m/b *"])


def test_the_default_drafter_stays_out_of_labels(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_m="""
        import pytest

        def test_default(dflash_config):
            assert dflash_config.label() == "DFLASH"

        @pytest.mark.dflash(draft_model="/m/other")
        def test_other(dflash_config):
            assert dflash_config.label() == "DFLASH draft_model=/m/other"
        """
    )
    # Config-only tests: nothing starts a server (dflash_config alone restarts nothing).
    pytester.runpytest().assert_outcomes(passed=2)


def test_a_marker_overriding_sweep_points_warns_once_per_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_m="""
        import pytest

        @pytest.mark.dflash(budget=16)
        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_pinned(dflash_config, n): pass

        @pytest.mark.dflash(topk=4)
        def test_other_key(dflash_config): pass

        def test_swept(dflash_config): pass
        """
    )
    # Shown, not raised: this suite's own filterwarnings=error reaches in-process runs.
    shown = "default::pytest_specdecode.errors.SweepOverrideWarning"
    result = pytester.runpytest("--collect-only", "-q", "-W", shown, "--dflash-sweep", "budget=4,8")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    out = result.stdout.str()
    assert out.count("SweepOverrideWarning") == 1, out
    result.stdout.fnmatch_lines(
        [
            "*SweepOverrideWarning: test_m.py::test_pinned: its dflash marker sets budget=16, "
            "which --dflash-sweep also varies: the marker wins*drop it from the marker*"
        ]
    )
    assert "test_other_key: its dflash marker" not in out


def test_a_baseline_test_under_a_sweep_of_algorithms_does_not_warn(
    pytester: pytest.Pytester,
) -> None:
    # algorithm=NONE is a baseline test's purpose, in the built-in suite or a user's own.
    pytester.makepyfile(
        test_b="""
        import pytest

        @pytest.mark.dflash(algorithm="NONE")
        def test_my_baseline(dflash_config): pass
        """
    )
    sweep = "algorithm=NONE,DFLASH;budget=4,8"
    args = [
        "--collect-only",
        "-q",
        "--dflash-sweep",
        sweep,
        "-W",
        "error::pytest_specdecode.errors.SweepOverrideWarning",
    ]
    assert pytester.runpytest(*args).ret == pytest.ExitCode.OK
    suite = pytester.runpytest(*args, "--pyargs", "pytest_specdecode.suite", "-k", "lossless")
    assert suite.ret == pytest.ExitCode.OK, suite.stdout.str()


def test_the_parametrized_fixtures_show_in_fixtures_help(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--fixtures")
    result.stdout.fnmatch_lines(
        ["dflash_problem*", "*One coding problem*", "dflash_case*", "*One throughput case*"]
    )
