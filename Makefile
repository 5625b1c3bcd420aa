# The commands of the quick start: `make repro`, `make test` (what CI runs) and `make check`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# dvc.yaml calls `zrodlo`: the venv's bin comes first on the PATH of every recipe.
export PATH := $(CURDIR)/$(BIN):$(PATH)

# Test files spread over every core; PARALLEL= runs them one after another.
PARALLEL ?= -n auto --dist loadfile

.PHONY: repro test check lint bench clean-venv

$(STAMP): pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

repro: $(STAMP)
	$(BIN)/dvc repro

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q $(PARALLEL)

# The edit-test loop: ruff and every test not marked slow (the slow ones run in `make test`).
check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q $(PARALLEL) -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(STAMP)
	$(BIN)/python benchmarks/prepare.py
	$(BIN)/python benchmarks/dropout.py
	$(BIN)/python benchmarks/train.py
	$(BIN)/python benchmarks/resume.py

clean-venv:
	rm -rf $(VENV)
