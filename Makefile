# Two commands: `make book` and `make test`. Both set everything up first.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
LOCK := requirements-lock.txt
STAMP := $(VENV)/.nnapprox-installed
# Chapter runs: NAME=<chapter stem>, PROFILE=auto|quick|full, DEVICE=auto|cpu|cuda|mps, SEED=<int>
NAME ?=
SEEDS ?= 0 1 2 3 4 5 6 7 8 9
PROFILE ?= quick
DEVICE ?= cpu
SEED ?= 0
BOOK_FLAGS ?= --keep-going
PYTEST_FLAGS ?=

export NNAPPROX_CLAIMS_DIR := $(CURDIR)/_build/reports/claims
export NNAPPROX_STATIC := 1
export MPLBACKEND := module://matplotlib_inline.backend_inline
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: help setup browser book test unit chapters chapter seeds checkpoints checkpoints-verify \
	notebooks assignments prose clean distclean

help:
	@echo "make book          set up, execute every chapter, build the HTML book (_build/html)"
	@echo "make test          set up, run the whole test suite (unit, chapters, book + browser)"
	@echo "make chapter NAME=intro PROFILE=quick DEVICE=cpu SEED=0   run one chapter with papermill"
	@echo "make chapters      run every chapter with papermill (PROFILE, DEVICE, SEED as above)"
	@echo "make seeds         every chapter, quick profile, on SEEDS=\"0 1 ... 9\" (NAME= for one chapter)"
	@echo "make seeds SEEDS=validation   each chapter once on its next fresh seed block (book/claims.lock)"
	@echo "make checkpoints   retrain the committed model checkpoints (NAME= for one); checkpoints-verify"
	@echo "make unit          library unit tests only"
	@echo "make notebooks     export every chapter to .ipynb under _build/notebooks"
	@echo "make assignments   build the otter-grader assignments under _build/assignments"
	@echo "make prose         words of main-text prose per chapter -> _build/reports/prose.md"
	@echo "make clean         remove _build (keeps the virtual environment)"

setup: $(STAMP)

$(STAMP): $(LOCK) pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -r $(LOCK)
	$(PY) -m pip install --disable-pip-version-check -q --no-deps --no-build-isolation -e .
	@touch $@
	@echo "environment ready: $(VENV) (activate with: source $(BIN)/activate)"

book: setup notebooks
	@mkdir -p _build/reports/claims
	$(BIN)/jupyter-book build . $(BOOK_FLAGS)
	@echo
	@echo "The book is at file://$(CURDIR)/_build/html/index.html"

# the browser tests need a Chromium: find one or install one before 20 minutes of tests
browser: setup
	$(PY) tests/browser.py

test: setup browser
	$(PY) -m pytest $(PYTEST_FLAGS)

unit: setup
	$(PY) -m pytest -m "not chapter and not book and not assignments" $(PYTEST_FLAGS)

chapter: setup
	@test -n "$(NAME)" || { echo "usage: make chapter NAME=<chapter> [PROFILE=quick|full|auto] [DEVICE=cpu|cuda|mps|auto] [SEED=0]"; exit 2; }
	$(PY) tests/harness.py $(NAME) --profile $(PROFILE) --device $(DEVICE) --seed $(SEED)

chapters: setup
	$(PY) tests/harness.py --profile $(PROFILE) --device $(DEVICE) --seed $(SEED)

seeds: setup
	$(PY) tests/seeds.py $(NAME) --seeds "$(SEEDS)"

checkpoints: setup
	$(PY) -m nnapprox.checkpoints build $(if $(NAME),--name $(NAME))

checkpoints-verify: setup
	$(PY) -m nnapprox.checkpoints verify

notebooks: setup
	$(PY) book/_ext/export_notebooks.py

assignments: setup
	$(PY) -m nnapprox.assignments build

# main-text words and the share about checking, per chapter (budget: 5,000 and 5 %; reports only)
prose: setup
	$(PY) tests/prose.py

clean:
	rm -rf _build

distclean: clean
	rm -rf $(VENV)
