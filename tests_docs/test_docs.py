"""Every snippet of README.md and docs/*.md runs as written (``make docs-check``).

One test per fenced block, in document order; the blocks of one Markdown file
share a project directory (files they show are written there, commands run
there; ``make`` and ``.venv/...`` commands run in the repository). A block
fails with the file and line of the command that failed and its output.

What the check changes, and nothing else:

- every block runs in a network namespace of its own (``unshare -n``) where
  only loopback exists, so no snippet can reach 10.1.2.200 or any other host;
- the example hosts become the local simulator (:func:`snippets.substitute`);
- ``PYTEST_ADDOPTS`` carries :data:`FAST` (and :data:`FAST_SIM` on a run of
  the simulator) as ``-o`` ini values, each only where the project's pytest.ini
  does not set it: fewer throughput cases, no modelled GPU time, short
  start-up phases (figures are simulated either way);
- ``HOME`` is a fresh directory, ``GITHUB_STEP_SUMMARY`` and ``DFLASH_*`` are
  not inherited, and ``pytest``/``python`` are this virtualenv's.

Blocks marked ``<!-- docs-check: skip (why) -->`` are skipped with their
reason (pytest's ``-ra`` lists them).
"""

from __future__ import annotations

import configparser
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests_docs import snippets

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
TIMEOUT = 600.0  # seconds per block: a hung snippet fails, naming its line
# Ini defaults injected into every pytest a snippet runs (as ``-o`` in
# PYTEST_ADDOPTS), each only where the project's own pytest.ini does not set
# that key: fewer, shorter throughput cases and, on a run of the simulator, no
# modelled GPU time and short start-up phases (figures are simulated either
# way; what a snippet sets on its command line or in its ini runs as written).
FAST = {
    "dflash_contexts": "60,1024",
    "dflash_concurrency": "1,8",
    "dflash_rounds": "2",
}
FAST_SIM = {
    "dflash_sim_time_scale": "0",
    "dflash_sim_args": "--sim-load-seconds 0.2 --sim-warmup-seconds 0.1",
}
SERVER = ("python -m pytest_specdecode.sim",)

BLOCKS = [block for path in DOCS for block in snippets.parse(path)]


def _fast_opts(cwd: Path, command: str) -> str:
    ini = cwd / "pytest.ini"
    parser = configparser.ConfigParser(interpolation=None)
    if ini.exists():
        parser.read(ini, encoding="utf-8")
    own = dict(parser["pytest"]) if parser.has_section("pytest") else {}
    words = shlex.split(command, comments=True)
    launch = [w for i, w in enumerate(words) if i and words[i - 1] == "--dflash-launch"]
    launch += [w.split("=", 1)[1] for w in words if w.startswith("--dflash-launch=")]
    launch.append(own.get("dflash_launch", ""))
    remote = any(snippets.EXAMPLE_HOSTS.match(w.split("=", 1)[-1]) for w in words)
    remote = remote or "--dflash-restart=never" in words or "--dflash-control" in command
    # The simulator's knobs are refused on a run that does not start it.
    simulated = not remote and all(not x or "pytest_specdecode.sim" in x for x in launch)
    fast = {**FAST, **(FAST_SIM if simulated else {})}
    return " ".join(shlex.quote(f"-o{k}={v}") for k, v in fast.items() if k not in own)


def _env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DFLASH_", "PYTEST_", "GITHUB_")) and k != "VIRTUAL_ENV"
    }
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}",
        HOME=str(home),
        PYTHONDONTWRITEBYTECODE="1",
        COLUMNS="120",
    )
    return env


@pytest.fixture(scope="session")
def isolated() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.fail("the docs check runs snippets in a network namespace: run it as root")


@pytest.fixture(scope="session")
def projects(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Path]:
    return {path: tmp_path_factory.mktemp(path.stem) for path in DOCS}


@pytest.fixture(scope="session")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


def _script(lines: list[tuple[int, str, bool]], expect: int, cwd: Path) -> str:
    """A bash script running each command in turn, stopping at the first failure."""
    out = [
        "ip link set lo up",
        "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT",
        f"cd {shlex.quote(str(cwd))}",
    ]
    for index, (line, text, server) in enumerate(lines):
        want = expect if index == len(lines) - 1 else 0
        if server:
            # A server: start it, carry on when it answers (its own readiness
            # endpoint), stop it when the block ends.
            out.append(f"{text} > server-{line}.log 2>&1 &")
            out.append(
                f"{shlex.quote(sys.executable)} -m tests_docs.wait_ready {shlex.quote(text)}"
            )
            want = 0
        else:
            fast = "" if cwd == ROOT else _fast_opts(cwd, text)
            out.append(f"export PYTEST_ADDOPTS={shlex.quote(fast)}")
            out.append(text)
        out.append(
            f'rc=$?; if [ "$rc" -ne {want} ]; then echo "@@docs-check line {line}: exit $rc, '
            f'expected {want}" >&2; exit 97; fi'
        )
    return "\n".join(out) + "\n"


def _run(script: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = _env(home)
    env["PYTHONPATH"] = str(ROOT)  # tests_docs.wait_ready
    return subprocess.run(
        ["unshare", "-n", "bash", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def _fail(block: snippets.Block, result: subprocess.CompletedProcess[str]) -> None:
    marker = [ln for ln in result.stderr.splitlines() if ln.startswith("@@docs-check")]
    where = marker[-1].removeprefix("@@docs-check ") if marker else f"exit {result.returncode}"
    tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
    pytest.fail(f"{block.where}: {block.path.name} {where}\n{tail}", pytrace=False)


def _shell(block: snippets.Block, cwd: Path, home: Path) -> None:
    cmds = [snippets.substitute(c) for c in snippets.commands(block)]
    notes = sorted({n for c in cmds for n in c.substitutions})
    if notes:
        print(f"{block.where}: substituted: {'; '.join(notes)}")
    repo = [c.text.startswith(("make ", ".venv/", "bash .ci/")) for c in cmds]
    if any(repo) and not all(repo):
        pytest.fail(f"{block.where}: mixes repository and project commands; split the block")
    where = ROOT if any(repo) else cwd
    lines = [(c.line, c.text, c.text.startswith(SERVER)) for c in cmds]
    result = _run(_script(lines, block.exit_status, where), where, home)
    if result.returncode != 0:
        _fail(block, result)


def _file(block: snippets.Block, cwd: Path, home: Path) -> None:
    assert block.name is not None
    target = cwd / block.name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(block.text, encoding="utf-8")
    if block.lang != "python":
        return
    name = Path(block.name).name
    later = BLOCKS[BLOCKS.index(block) + 1 :]
    run_later = any(
        b.path == block.path and b.lang in ("sh", "bash") and block.name in b.text for b in later
    )
    if name.startswith("test_") and not run_later:
        # A test file no later command of the page runs: run it as the reader
        # would, in the project so far.
        command = f"pytest -q -p no:cacheprovider {shlex.quote(block.name)}"
    else:
        command = f"python -m py_compile {shlex.quote(block.name)}"
    result = _run(_script([(block.line, command, False)], block.exit_status, cwd), cwd, home)
    if result.returncode != 0:
        _fail(block, result)


def _ini_fragment(block: snippets.Block, cwd: Path, home: Path) -> None:
    # A pytest.ini fragment: the project so far with it as its ini must load
    # (every key known, every value valid) and collect the built-in suite.
    scratch = cwd.parent / f"{cwd.name}-ini-{block.line}"
    shutil.copytree(cwd, scratch)
    (scratch / "pytest.ini").write_text(block.text, encoding="utf-8")
    # Exit 1 alone is not a failure: a gate that needs measurements (the accept
    # length) fails a run that measured nothing, --collect-only included; a
    # bad key or value is an error line (collection error, usage error, warning).
    command = (
        "out=$(pytest -q -p no:cacheprovider --co -W error::pytest.PytestConfigWarning "
        '--pyargs pytest_specdecode.suite 2>&1); rc=$?; echo "$out"; '
        '[ "$rc" -le 1 ] && ! echo "$out" | grep -qiE "error|unknown config option"'
    )
    result = _run(
        _script([(block.line, command, False)], block.exit_status, scratch), scratch, home
    )
    if result.returncode != 0:
        _fail(block, result)


def _python(block: snippets.Block, cwd: Path, home: Path) -> None:
    script = cwd / f"snippet-{block.line}.py"
    script.write_text(block.text, encoding="utf-8")
    command = f"python {shlex.quote(script.name)}"
    result = _run(_script([(block.line, command, False)], block.exit_status, cwd), cwd, home)
    if result.returncode != 0:
        _fail(block, result)


RUNNABLE = [b for b in BLOCKS if b.lang in snippets.RUN_LANGS]


def _run_block(block: snippets.Block, projects: dict[Path, Path], home: Path) -> None:
    if block.skip is not None:
        pytest.skip(f"{block.where}: {block.skip}")
    cwd = projects[block.path]
    if block.lang in ("sh", "bash"):
        _shell(block, cwd, home)
    elif block.name is not None:
        _file(block, cwd, home)
    elif block.lang == "ini":
        _ini_fragment(block, cwd, home)
    elif block.lang == "python":
        _python(block, cwd, home)
    else:
        pytest.fail(f"{block.where}: a {block.lang} block must be named (# name.{block.lang})")


def _doc_class(path: Path) -> type:
    """``TestREADME``, ``TestConfigs``, ...: the blocks of one file, in order, in one
    class, so ``make docs-check`` (``-n 2 --dist loadscope``) runs files side by side
    while the blocks of a file, which share its project, run in turn on one worker."""
    blocks = [b for b in RUNNABLE if b.path == path]

    @pytest.mark.usefixtures("isolated")
    @pytest.mark.parametrize("block", blocks, ids=[b.where for b in blocks])
    def test_snippet(
        self: object, block: snippets.Block, projects: dict[Path, Path], home: Path
    ) -> None:
        _run_block(block, projects, home)

    name = "Test" + "".join(part.capitalize() for part in path.stem.split("-"))
    return type(name, (), {"test_snippet": test_snippet, "__doc__": f"The blocks of {path.name}."})


for _path in DOCS:
    _cls = _doc_class(_path)
    globals()[_cls.__name__] = _cls


def test_every_doc_has_snippets_and_few_are_skipped() -> None:
    # The check is only as good as what it runs: most blocks must run.
    skipped = [b for b in RUNNABLE if b.skip is not None]
    print(textwrap.indent("\n".join(f"{b.where}: {b.skip}" for b in skipped), "skipped: "))
    assert len(skipped) <= len(RUNNABLE) // 5, [b.where for b in skipped]
    assert {b.path for b in RUNNABLE} == set(DOCS)
