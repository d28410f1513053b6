"""SGLang 0.5.23's own launch parser, built from its wheel, against the plugin and the simulator.

Downloads ``sglang==0.5.23`` without dependencies (``pip download``; cached in
``$SPECDECODE_SGLANG_CACHE`` or ``~/.cache/pytest-specdecode``), builds the
real parser without torch in a subprocess
(:mod:`pytest_specdecode.facts.realparser`) and checks

- every config each dialect renders for the built-in suite and the example
  project parses (the ``sglang`` dialect's flags as they are; ``sglang-legacy``
  and ``ddtree`` without their known differences, which are not in 0.5.23);
- the simulator accepts exactly what the real parser accepts, with the same
  exit status and the same ``sglang serve: error:`` line, over every option
  in every spelling, abbreviations, bad types and choices, and unknown flags.

Skips with the reason when the package index cannot be reached. Run by
``make real-parser`` (and ``.ci/run``), not by the default ``make test``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_specdecode import facts
from pytest_specdecode.config.dialects import get_dialect
from pytest_specdecode.facts.regenerate import download_wheel
from pytest_specdecode.sim import options

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("corpus", ROOT / "tests/sim/corpus.py")
assert _spec is not None
assert _spec.loader is not None
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)


@pytest.fixture(scope="module")
def sglang_dir() -> Path:
    cache = Path(
        os.environ.get("SPECDECODE_SGLANG_CACHE")
        or Path.home() / ".cache" / "pytest-specdecode" / "sglang"
    )
    try:
        return download_wheel(facts.NEWEST, cache, timeout=240)
    except (subprocess.SubprocessError, OSError, StopIteration) as exc:
        reason = f"cannot download sglang=={facts.NEWEST} from the package index: {exc}"
        # .ci/run sets this: in CI the real parser must be checked, not skipped.
        if os.environ.get("SPECDECODE_REAL_PARSER_REQUIRED"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)


def real(sglang_dir: Path, cases: list[list[str]]) -> list[dict[str, Any]]:
    """What SGLang's own parser says to each command line (one subprocess)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest_specdecode.facts.realparser", str(sglang_dir), "parse"],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


def sim(argv: list[str]) -> dict[str, Any]:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            options.parse(argv)
    except SystemExit as exc:
        lines = [x for x in err.getvalue().splitlines() if "sglang serve: error:" in x]
        return {"status": int(exc.code or 0), "error": lines[-1] if lines else ""}
    except (AssertionError, ValueError) as exc:  # SGLang's own actions raise these too
        return {"status": 1, "error": type(exc).__name__}
    return {"status": 0, "error": ""}


def _normal(error: str) -> str:
    # --sampling-backend's choices are a set in SGLang: their order differs per process.
    if "--sampling-backend" in error and "(choose from" in error:
        head, _, tail = error.partition("(choose from")
        return head + "(choose from " + ",".join(sorted(tail.rstrip(")").split(","))) + ")"
    return error


MODEL = ["--model-path", "/m"]


def test_the_simulator_accepts_exactly_what_sglang_accepts(sglang_dir: Path) -> None:
    # SGLang requires --model-path; the simulator defaults it (its one deliberate difference).
    assert real(sglang_dir, [[]])[0]["error"].endswith(
        "the following arguments are required: --model-path/--model"
    )
    cases = [[*MODEL, *argv] for argv in corpus.cases(facts.load())]
    theirs = real(sglang_dir, cases)
    differ = []
    for argv, want in zip(cases, theirs, strict=True):
        got = sim(argv)
        if (got["status"], _normal(got["error"])) != (want["status"], _normal(want["error"])):
            differ.append(f"{argv}: simulator {got}, SGLang {want}")
    assert not differ, f"{len(differ)} of {len(cases)} differ:\n" + "\n".join(differ[:20])
    assert sum(1 for r in theirs if r["status"] == 0) > 1000  # the corpus has both kinds
    assert sum(1 for r in theirs if r["status"] == 2) > 300


def _collected_configs(args: list[str], rootdir: Path) -> list[Any]:
    found: list[Any] = []

    class Grab:
        @pytest.hookimpl(trylast=True)
        def pytest_collection_finish(self, session: pytest.Session) -> None:
            from pytest_specdecode.session.items import item_config

            found.extend(c for c in map(item_config, session.items) if c is not None)

    old = os.getcwd()
    os.chdir(rootdir)
    try:
        code = pytest.main(
            [*args, "--collect-only", "-q", "-p", "no:cacheprovider"], plugins=[Grab()]
        )
    finally:
        os.chdir(old)
    assert code == 0
    return list(dict.fromkeys(found))


EXTRA_DIALECT_FLAGS = {
    "sglang-legacy": ("--speculative-dflash-draft-window-size",),
    "ddtree": ("--speculative-ddtree-budget",),
}


def test_every_rendered_config_parses_in_sglang(sglang_dir: Path, tmp_path: Path) -> None:
    suite = _collected_configs(["--pyargs", "pytest_specdecode.suite"], tmp_path)
    example = _collected_configs([], ROOT / "conftest_examples")
    assert suite
    assert example
    cases: list[list[str]] = []
    names: list[str] = []
    for name in ("sglang", "sglang-legacy", "ddtree"):
        dialect = get_dialect(name)
        configs = [*suite, *example]
        if name == "ddtree":
            configs += [c.__class__("DDTREE", budget=16, topk=4, window=2048, draft_model="d")
                        for c in suite[:1]]  # fmt: skip
        for config in configs:
            if config.algorithm == "DDTREE" and name != "ddtree":
                continue
            argv = list(dialect.render(config).argv)
            # The simulator playing the dialect's build takes the whole rendering.
            build = {"sglang-legacy": "legacy", "ddtree": "ddtree"}.get(name, "release")
            assert sim(["--sim-build", build, *argv])["status"] == 0, (name, argv)
            skip = EXTRA_DIALECT_FLAGS.get(name, ())
            words = []
            i = 0
            while i < len(argv):
                if argv[i] in skip:
                    i += 2
                    continue
                words.append(argv[i])
                i += 1
            if "DDTREE" in words:  # not an algorithm of 0.5.23; argparse takes any string
                words[words.index("DDTREE")] = "DFLASH"
            cases.append([*MODEL, *words])
            names.append(f"{name}: {config.label()}")
    results = real(sglang_dir, cases)
    refused = [f"{n}: {r['error']}" for n, r in zip(names, results, strict=True) if r["status"]]
    assert not refused, "\n".join(refused)
