# Quick start: `make demo` (main job on a generated graph) and `make test`.
# Each creates .venv if missing and installs torch==2.13.0 (CPU) + the package.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint install baselines docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/securefgl run

test: $(STAMP)
	$(BIN)/python -m pytest -q
	$(BIN)/ruff check .

lint: $(STAMP)
	$(BIN)/ruff check .

baselines: $(STAMP)
	$(BIN)/python -m benchmarks.baselines

# The documentation site, built offline into site/ (mkdocs is installed here only).
docs:
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q 'mkdocs==1.6.1'
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) results site .pytest_cache
