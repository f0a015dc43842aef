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
# Parallel runs: JOBS chapters (seed runs, checkpoint builds, test workers) at a time on this
# machine, each with OMP_NUM_THREADS=cores/JOBS; one at a time with DEVICE=cuda (one GPU).
# EXECUTOR=slurm submits one Slurm job each (make chapters, seeds, checkpoints) through submitit.
CORES := $(shell nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
JOBS ?= $(if $(filter cuda%,$(DEVICE)),1,$(CORES))
EXECUTOR ?= local
# Slurm resources of each job (EXECUTOR=slurm; see book/how-to-use.md)
SLURM_PARTITION ?=
SLURM_TIME ?= 60
SLURM_GPUS ?=
SLURM_CPUS ?= 4
SLURM_MEM_GB ?=
SLURM_ARGS ?=

# bad values stop here, before anything is set up or run
ifeq ($(shell echo '$(JOBS)' | grep -Ex '[1-9][0-9]*'),)
$(error JOBS='$(JOBS)' is not valid: JOBS is how many run at once, a positive integer (this machine has $(CORES) cores))
endif
ifneq ($(words $(EXECUTOR)) $(filter $(EXECUTOR),local slurm submitit-local),1 $(EXECUTOR))
$(error EXECUTOR='$(EXECUTOR)' is not valid: use local (this machine), slurm (a Slurm cluster, through submitit) or submitit-local)
endif
THREADS := $(shell echo $$(( $(CORES) / $(JOBS) > 0 ? $(CORES) / $(JOBS) : 1 )))
RUN_FLAGS = --jobs $(JOBS) --executor $(EXECUTOR) --time-min $(SLURM_TIME) --cpus $(SLURM_CPUS) \
	$(if $(SLURM_PARTITION),--partition $(SLURM_PARTITION)) $(if $(SLURM_GPUS),--gpus $(SLURM_GPUS)) \
	$(if $(SLURM_MEM_GB),--mem-gb $(SLURM_MEM_GB)) $(foreach a,$(SLURM_ARGS),--sbatch $(a))
# pytest-xdist: JOBS workers; the assignments' shared build stays on one worker (conftest.py)
XDIST = $(if $(filter 1,$(JOBS)),-p no:xdist,-n $(JOBS) --dist loadgroup)

export NNAPPROX_CLAIMS_DIR := $(CURDIR)/_build/reports/claims
export NNAPPROX_STATIC := 1
export MPLBACKEND := module://matplotlib_inline.backend_inline
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: help setup browser book test unit chapters chapter seeds checkpoints checkpoints-verify \
	cuda-smoke seeds-report notebooks assignments prose clean distclean

help:
	@echo "make book          set up, execute every chapter (JOBS at a time), build the HTML book (_build/html)"
	@echo "make test          set up, run the whole test suite (unit, chapters, book + browser), JOBS workers"
	@echo "make chapter NAME=intro PROFILE=quick DEVICE=cpu SEED=0   run one chapter with papermill"
	@echo "make chapters      run every chapter with papermill (PROFILE, DEVICE, SEED as above)"
	@echo "make seeds         every chapter, quick profile, on SEEDS=\"0 1 ... 9\" (NAME= for one chapter)"
	@echo "make seeds SEEDS=validation   each chapter once on its next fresh seed block (book/claims.lock)"
	@echo "make seeds-report [MERGE=dir]  the sweep's report from stored runs (MERGE: runs made elsewhere)"
	@echo "make checkpoints   retrain the committed model checkpoints (NAME= for one); checkpoints-verify"
	@echo "make cuda-smoke    every chapter, quick profile, DEVICE=cuda -> _build/reports/cuda-smoke.md"
	@echo "  JOBS=$(JOBS) (default: the cores, 1 with DEVICE=cuda); EXECUTOR=local|slurm for chapters,"
	@echo "  seeds, checkpoints, cuda-smoke (SLURM_PARTITION, SLURM_TIME, SLURM_GPUS, SLURM_CPUS, SLURM_ARGS)"
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

# the chapters run through the harness, JOBS at a time, into the book's execution cache (only
# those whose execution is stale); the build then takes every chapter from that cache
book: setup notebooks
	@mkdir -p _build/reports/claims
	$(PY) tests/harness.py --book --jobs $(JOBS)
	$(BIN)/jupyter-book build . $(BOOK_FLAGS)
	@echo
	@echo "The book is at file://$(CURDIR)/_build/html/index.html"

# the browser tests need a Chromium: find one or install one before 20 minutes of tests
browser: setup
	$(PY) tests/browser.py

# two runs: unit tests, chapters (each stored in the book's cache) and assignments on JOBS
# workers, then the book build from those executions and the browser checks; pytest's
# "no tests ran" (5, e.g. a -k that selects none of one run) is not a failure unless both say it
test: setup browser
	@rc1=0; rc2=0; \
	OMP_NUM_THREADS=$(THREADS) MKL_NUM_THREADS=$(THREADS) $(PY) -m pytest $(XDIST) $(PYTEST_FLAGS) -m "not book" || rc1=$$?; \
	$(PY) -m pytest $(PYTEST_FLAGS) -m book || rc2=$$?; \
	if [ $$rc1 -eq 5 ] && [ $$rc2 -eq 5 ]; then exit 5; fi; \
	for rc in $$rc1 $$rc2; do if [ $$rc -ne 0 ] && [ $$rc -ne 5 ]; then echo "make test: failed (pytest exit codes $$rc1, $$rc2)"; exit 1; fi; done

unit: setup
	OMP_NUM_THREADS=$(THREADS) MKL_NUM_THREADS=$(THREADS) \
	$(PY) -m pytest $(XDIST) -m "not chapter and not book and not assignments" $(PYTEST_FLAGS)

chapter: setup
	@test -n "$(NAME)" || { echo "usage: make chapter NAME=<chapter> [PROFILE=quick|full|auto] [DEVICE=cpu|cuda|mps|auto] [SEED=0]"; exit 2; }
	$(PY) tests/harness.py $(NAME) --profile $(PROFILE) --device $(DEVICE) --seed $(SEED)

chapters: setup
	$(PY) tests/harness.py --profile $(PROFILE) --device $(DEVICE) --seed $(SEED) $(RUN_FLAGS)

seeds: setup
	$(PY) tests/seeds.py $(NAME) --seeds "$(SEEDS)" $(RUN_FLAGS)

# the report of the stored runs, running nothing; MERGE=<folder> first files the runs found
# there (e.g. the artifacts of the CI matrix's jobs) into _build/seeds
seeds-report: setup
	$(PY) tests/seeds.py $(NAME) --report-only $(if $(MERGE),--merge $(MERGE))

checkpoints: setup
	$(PY) -m nnapprox.checkpoints build $(if $(NAME),--name $(NAME)) $(RUN_FLAGS)

# every chapter at the quick profile on CUDA, its own records (_build/cuda-smoke) and one
# report (_build/reports/cuda-smoke.{md,json}); fails on a failed claim, a device or dtype error
cuda-smoke: DEVICE = cuda
cuda-smoke: setup
	$(PY) tests/harness.py $(NAME) --profile quick --device cuda --report cuda-smoke $(RUN_FLAGS)

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
