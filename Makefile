# sandbox-replayer: every target installs what it needs, from nothing.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUN    ?=
N      ?= 5
STORE  ?= snapshots

export TESTCONTAINERS_RYUK_DISABLED := true

.PHONY: setup test lint types pytest images demo replay export ci-repro bench clean gc

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

lint: setup
	$(BIN)/ruff check sandbox cli tests bench
	$(BIN)/ruff format --check sandbox cli tests bench

types: setup
	$(BIN)/mypy

pytest: setup
	$(BIN)/pytest $(PYTEST_ARGS)

test: lint types pytest

images: setup
	$(BIN)/sandbox images build

demo: setup  # examples/demo.py builds the missing images itself, with progress
	$(BIN)/python -m examples.demo --store $(STORE) --times $(N)

replay: setup images
	@test -n "$(RUN)" || (echo "usage: make replay RUN=<run id>"; exit 2)
	$(BIN)/sandbox replay $(RUN) --store $(STORE) --times $(N)

export: setup
	@test -n "$(RUN)" || (echo "usage: make export RUN=<run id>"; exit 2)
	$(BIN)/sandbox export $(RUN) --store $(STORE) -o $(RUN).tar.gz

ci-repro: setup images
	$(BIN)/sandbox ci-repro --store $(STORE)

bench: setup
	$(BIN)/python -m bench.all

gc: setup
	$(BIN)/sandbox gc

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
