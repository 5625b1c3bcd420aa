# The commands of the quick start: `make repro`, `make test` (what CI runs) and `make check`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# dvc.yaml calls `zrodlo`: the venv's bin comes first on the PATH of every recipe.
export PATH := $(CURDIR)/$(BIN):$(PATH)

# Test files spread over every core; PARALLEL= runs them one after another.
PARALLEL ?= -n auto --dist loadfile

.PHONY: repro test check lint bench stage-code clean-venv

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

# The edit-test loop: ruff, the library's tests in this process and every family's parity matrix.
# The commands' tests (tests/stages/, real processes) and the slow ones run in `make test`.
check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q $(PARALLEL) -m "not slow" --ignore=tests/stages

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The code lines of each dvc.yaml stage, written from the imports of the commands it runs.
stage-code: $(STAMP)
	$(BIN)/python .ci/stage_code.py

bench: $(STAMP)
	$(BIN)/python benchmarks/prepare.py
	$(BIN)/python benchmarks/dropout.py
	$(BIN)/python benchmarks/train.py
	$(BIN)/python benchmarks/resume.py

clean-venv:
	rm -rf $(VENV)
