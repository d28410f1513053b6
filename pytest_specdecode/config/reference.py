"""The options reference, docs/options.md, written from the options table.

``python -m pytest_specdecode.config.reference > docs/options.md`` rewrites
it; a test checks the page equals :func:`markdown` (so the docs list every
option of the table, and nothing else).
"""

from __future__ import annotations

from pytest_specdecode.config.options import GROUPS, OPTIONS, Option

INTRO = """\
# Options

<!-- Generated from the options table (pytest_specdecode/config/options.py) by
`python -m pytest_specdecode.config.reference > docs/options.md`; do not edit. -->

Every setting is a `--dflash-*` option with an ini key `dflash_*`, so a CI job can pin
any of them in its `pytest.ini` (or `[tool.pytest.ini_options]`); a few also come from
an environment variable. Precedence: command line > environment > ini > default.
`pytest --help` shows the same options in the same groups.

```ini
[pytest]
dflash_ready_timeout = 600
dflash_sweep = budget=4,8;window=1024,2048
dflash_dry_run = false
dflash_sim_fault =
    slow-first-token:0.1
    lossy
```

- A switch takes `true`/`false` (also `yes`/`no`, `on`/`off`, `1`/`0`) in the ini.
- A repeatable option takes one value per line in the ini.
- Paths in `dflash_problems` and `dflash_sim_answers` are relative to the ini file's directory.
- A value that names an existing path outside the project (`--dflash-draft-model
  /models/d`) must be one word with its flag (`--dflash-draft-model=/models/d`): pytest
  chooses its rootdir and ini file before it knows a plugin's options, takes such a word
  for a test path and would not read the project's ini file, so the run stops with one
  line saying so (unless `--rootdir` and `-c` are given).
- The API key is a secret: its ini key only names the environment variable that holds it
  (`dflash_api_key = env:SGLANG_API_KEY`).
- The ini `dflash_config` is the *default* config of every test (under its markers), while
  `--dflash-config` overrides the markers.
- The `--dflash-sim-*` knobs apply only to runs that start the bundled simulator: given in an
  ini they wait for such a run, given on the command line of a host run they are a usage error.

A bad value is one line naming where it came from, with exit status 4: the same value is
read by the same parser from the command line, the ini file and the environment, e.g.
`Invalid value 'soon' from dflash_ready_timeout ini option: expected a number > 0`.
Floats are finite (`nan` and `inf` are refused).
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _flag(option: Option) -> str:
    if option.flag is None:
        return "(ini only)"
    value = "" if option.kind == "switch" else f" {option.value_name}"
    if option.kind == "optional":
        value = f" [{option.metavar}]"
    names = [f"`{name}{value}`" for name in (option.flag, *option.aliases)]
    return _cell(", ".join(names))


def _ini(option: Option) -> str:
    keys = ", ".join(f"`{key}`" for key in option.ini_names)
    return keys + (" (one per line)" if option.kind == "list" else "")


def _row(option: Option) -> str:
    env = f"`{option.env}`" if option.env else ""
    ini = option.ini_help
    help = option.help if ini is None else f"{option.help} In the ini: {ini[0].lower()}{ini[1:]}"
    cells = (_flag(option), _ini(option), env, _cell(option.default_text), _cell(help))
    return "| " + " | ".join(cells) + " |"


def markdown() -> str:
    """docs/options.md: the intro, then one table per ``--help`` group, in the table's order."""
    parts = [INTRO]
    for key, (_, title) in GROUPS.items():
        heading = title.removeprefix("dflash: ")
        parts.append(f"\n## {heading[0].upper()}{heading[1:]}\n\n")
        parts.append("| Option | ini key | Environment | Default | What it does |\n")
        parts.append("|---|---|---|---|---|\n")
        parts.extend(_row(option) + "\n" for option in OPTIONS if option.group == key)
    return "".join(parts)


if __name__ == "__main__":
    print(markdown(), end="")
