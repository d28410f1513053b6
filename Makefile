# Two commands on a fresh machine with Python 3 and make: `make demo`, `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: venv demo test lint typecheck unit slow docs-check real-parser extras-check real-server bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

## The venv with the package and its dev tools (every target below makes it first).
venv: $(STAMP)

## The main job against the embedded simulator (not a GPU: its figures are simulated).
demo: $(STAMP)
	cd conftest_examples && ../$(BIN)/python -m pytest -p no:cacheprovider

## ruff (lint + format check), mypy --strict, then the test suite.
test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set: every worker, nested
# pytest run and simulator imports the package again, compiled once instead of each time.
# `make test` is the suite without its slowest end-to-end runs (marker `slow`); `make slow`
# runs those, and `.ci/run` runs both.
unit: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 4 -m "not slow"

## The slowest end-to-end runs (marker `slow`: tens of seconds each under load).
slow: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 4 -m slow

## Every command and snippet of README.md and docs/*.md, run as written against the simulator.
docs-check: $(STAMP)
	$(BIN)/python -m pytest tests_docs -p no:cacheprovider -ra -n 2 --dist loadscope

## SGLang 0.5.23's own parser (from its wheel, downloaded once) against the plugin and simulator.
real-parser: $(STAMP)
	$(BIN)/python -m pytest tests_real -q -p no:cacheprovider

## `pip install .` without extras into a fresh venv: a pass-rate gate imports no extra.
extras-check: $(STAMP)
	$(BIN)/python -m pytest tests_install -q -p no:cacheprovider

## The plugin against the real SGLang 0.5.23 on the CPU (a tiny local model; its venv,
## ~7 GB, is installed once into ~/.cache/pytest-specdecode by tests_real_server/install.sh).
real-server: $(STAMP)
	$(BIN)/python -m pytest tests_real_server -p no:cacheprovider -p no:randomly -ra

bench: $(STAMP)
	for f in benchmarks/*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .benchmarks .dflash
