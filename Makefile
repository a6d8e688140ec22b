# Quick start: `make demo` (main job on a generated graph) and `make test`.
# Each creates .venv if missing and installs, at the exact versions of constraints.txt (the
# lock), torch==2.13.0 (CPU build, installed first so nothing pulls a CUDA build), then the
# package with its extras: dev (pytest, ruff), docs (mkdocs), plots (matplotlib), ray.
# `make lock` regenerates constraints.txt from a fresh install of the newest releases that
# pyproject.toml allows (tests/test_lock.py checks the two agree).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK := constraints.txt
EXTRAS := dev,docs,plots,ray
TORCH := torch==2.13.0
PIP := $(BIN)/python -m pip install -q -c $(LOCK)

.PHONY: demo test lint install baselines docs lock clean

# --no-build-isolation: the package is built with the locked setuptools, not the newest one
$(STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(PIP) --upgrade pip setuptools
	$(PIP) $(TORCH)
	$(PIP) --no-build-isolation -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/securefgl run

# pytest, ruff, then the documentation site (strict build, every relative link checked)
test: $(STAMP)
	$(BIN)/python -m pytest -q
	$(BIN)/ruff check .
	$(MAKE) --no-print-directory docs

lint: $(STAMP)
	$(BIN)/ruff check .

baselines: $(STAMP)
	$(BIN)/python -m benchmarks.baselines

# The documentation site, built offline into site/ (API reference included): any warning
# fails the build, and so does a relative link that leads nowhere in the built site.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict
	$(BIN)/python -m tests.site_links site

# A fresh venv with the newest releases pyproject.toml allows (torch stays 2.13.0, CPU),
# frozen into constraints.txt. Run `make test` after it and commit the two together.
LOCK_VENV := .venv-lock
lock:
	rm -rf $(LOCK_VENV)
	$(PY) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q --upgrade pip setuptools
	$(LOCK_VENV)/bin/python -m pip install -q $(TORCH)
	$(LOCK_VENV)/bin/python -m pip install -q -e '.[$(EXTRAS)]'
	$(LOCK_VENV)/bin/python -m pip check
	{ \
	  echo "# securefgl's lock: the exact version of every package that \`make install\` (and so"; \
	  echo "# \`make demo\`, \`make test\`, \`make docs\`) installs, transitive ones included: pip reads"; \
	  echo "# it as constraints (pip install -c constraints.txt ...). Made by \`make lock\` from a"; \
	  echo "# fresh install of '.[$(EXTRAS)]' on CPython $$($(LOCK_VENV)/bin/python -c 'import platform; print(platform.python_version(), platform.system(), platform.machine())')"; \
	  echo "# (torch==2.13.0+cpu: pip takes the CPU build or nothing, never a CUDA build)."; \
	  echo "# tests/test_lock.py checks it against pyproject.toml."; \
	  $(LOCK_VENV)/bin/python -m pip freeze --all --exclude-editable | LC_ALL=C sort -f -t= -k1,1; \
	} > $(LOCK).tmp
	mv $(LOCK).tmp $(LOCK)
	rm -rf $(LOCK_VENV)

clean:
	rm -rf $(VENV) $(LOCK_VENV) results site .pytest_cache
