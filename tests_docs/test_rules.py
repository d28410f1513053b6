"""The docs check's own rules: what is a snippet, how it is changed, how a failure reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests_docs import snippets, test_docs


def _doc(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_blocks_carry_their_line_name_and_directives(tmp_path: Path) -> None:
    page = _doc(
        tmp_path,
        "Intro\n\n```python\n# conftest.py\nX = 1\n```\n\n"
        "<!-- docs-check: skip (needs a GPU host) -->\n\n```sh\npytest --x \\\n  --y\n```\n"
        "<!-- docs-check: exit 1 -->\n```sh\n# a comment\npytest -q\n```\n```text\nout\n```\n",
    )
    blocks = snippets.parse(page)
    assert [(b.line, b.lang, b.name, b.skip, b.exit_status) for b in blocks] == [
        (3, "python", "conftest.py", None, 0),
        (10, "sh", None, "needs a GPU host", 0),
        (15, "sh", None, None, 1),
        (19, "text", None, None, 0),
    ]
    assert [(c.line, c.text) for c in snippets.commands(blocks[1])] == [(11, "pytest --x --y")]
    assert [c.line for c in snippets.commands(blocks[2])] == [17]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a\n\n    pytest -q --dflash-host x\n", "page.md:3: an indented code block"),
        ("```\npytest -q\n```\n", "page.md:1: a block without a language"),
        ("<!-- docs-check: skip -->\n```sh\nls\n```\n", "say why"),
        ("<!-- docs-check: skip (x) -->\ntext\n```sh\nls\n```\n", "right before a block"),
        ("```sh\nls\n", "never closed"),
    ],
)
def test_broken_rules_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(snippets.DocsError, match=message.replace("(", r"\(")):
        snippets.parse(_doc(tmp_path, text))


def test_example_hosts_become_the_local_simulator() -> None:
    cmd = snippets.Command(
        7,
        "pytest -m coding --dflash-host 10.1.2.200 --dflash-unit sglang.service --dflash-restore "
        '--dflash-launch "python -m sglang.launch_server --tp-size 8" --dflash-draft-model /m/d',
    )
    out = snippets.substitute(cmd)
    assert out.text == (
        "pytest -m coding --dflash-launch 'python -m pytest_specdecode.sim --tp-size 8' "
        "--dflash-draft-model /m/d"
    )
    assert "10.1.2.200" not in out.text
    assert len(out.substitutions) == 2
    dry = snippets.Command(1, "pytest --dflash-host gpu1 --dflash-unit u --dflash-dry-run")
    assert snippets.substitute(dry).text == dry.text  # a dry run contacts no host


def test_a_command_still_naming_a_host_is_refused() -> None:
    cmd = snippets.Command(3, "ssh 10.1.2.200 journalctl -u sglang")
    with pytest.raises(snippets.DocsError, match=r"line 3: .*names host '10\.1\.2\.200'"):
        snippets.substitute(cmd)


def test_a_failing_command_is_named_by_its_line(tmp_path: Path) -> None:
    script = test_docs._script([(4, "true", False), (5, "sh -c 'exit 3'", False)], 0, tmp_path)
    result = test_docs._run(script, tmp_path, tmp_path)
    assert result.returncode == 97
    assert "@@docs-check line 5: exit 3, expected 0" in result.stderr
    expected = test_docs._script([(5, "sh -c 'exit 3'", False)], 3, tmp_path)
    assert test_docs._run(expected, tmp_path, tmp_path).returncode == 0
