# The two commands of the quick start: `make repro` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# dvc.yaml calls `zrodlo`: the venv's bin comes first on the PATH of every recipe.
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: repro test lint bench clean-venv

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

repro: $(STAMP)
	$(BIN)/dvc repro

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

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
