"""Markers become validated configs at collection; items are grouped per config."""

from __future__ import annotations

import pytest

TWO_CONFIGS = """
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
    swept = collected(pytester, "--dflash-sweep", "budget=4,8;window=2048,4096")
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
        ("budget=0", "*test_m.py::test_bad: bad dflash config: budget=0*"),
        ("budget=8, window=4", "*test_m.py::test_bad: bad dflash config: window=4 < budget=8*"),
        ("topk=4", "*topk=4 with DFLASH*use algorithm=DDTREE or drop topk*"),
        ("budgte=8", "*test_m.py::test_bad*budgte*"),
        ("algorithm='MEDUSA'", "*test_m.py::test_bad*MEDUSA*"),
    ],
)
def test_bad_marker_is_a_collection_error_naming_the_test(
    pytester: pytest.Pytester, marker: str, message: str
) -> None:
    pytester.makepyfile(
        test_m=f"""
        import pytest

        @pytest.mark.dflash({marker})
        def test_bad(dflash_service): pass
        """
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting test_m.py*", message])
    assert "INTERNALERROR" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str()


def test_marker_without_the_fixture_is_an_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_m="""
        import pytest

        @pytest.mark.dflash(budget=8)
        def test_forgot(): pass
        """
    )
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*test_m.py::test_forgot: has @pytest.mark.dflash but uses no*"])
    assert result.ret == pytest.ExitCode.INTERRUPTED


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
