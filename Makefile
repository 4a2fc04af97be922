# Two commands for everyone: `make book` (build the course) and `make test`.
# Each creates .venv when it is missing and installs the pinned dependencies;
# a re-run on an installed checkout only checks a stamp (seconds, not minutes).

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
# $(CURDIR), not $(abspath ...): make's path functions split a checkout path that holds spaces
# into words. Every use below is quoted, so "/tmp/with space/course" works.
BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.installed

# Tools run from the venv with its bin/ first on PATH: nbgrader shells out to
# `alembic` by name and fails without it.
export PATH := $(BIN):$(PATH)
export VIRTUAL_ENV := $(CURDIR)/$(VENV)

# Offline copies of the public corpora (see ../shared/data/README.md).
MIRROR := $(shell cd .. && test -f shared/data/SHA256SUMS && echo "$$PWD/shared/data")
ifneq ($(MIRROR),)
export LMCOURSE_DATA_MIRROR ?= $(MIRROR)
endif

.PHONY: book test setup system-deps assignments clean help

help:
	@echo "make book   build the course (book site + student assignments)"
	@echo "make test   run the whole test suite"

$(STAMP): pyproject.toml
	@test -x "$(BIN)/python" || "$(PYTHON)" -m venv $(VENV)
	"$(BIN)/python" -m pip install --quiet -e '.[test]'
	"$(BIN)/python" tools/install_weights.py
	@touch $(STAMP)

setup: $(STAMP)

# Debian packages (bubblewrap for the grader's sandbox, npm for MathJax,
# chromium for the browser test), installed when missing and we are root.
# Seconds when they are already there.
system-deps:
	@bash tools/ensure-system-deps.sh

book: setup system-deps
	"$(BIN)/lmcourse" book

assignments: setup
	"$(BIN)/lmcourse" assign

# Two pytest workers, one per core of the CI machine; --dist loadscope keeps a test class (a unit's
# contract, whose solution grade is shared by its variants) and a module on one worker.
test: setup system-deps
	"$(BIN)/python" -m pytest -n 2 --dist loadscope

clean:
	rm -rf book/_build
