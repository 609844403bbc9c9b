# sandbox-replayer: every target installs what it needs, from nothing.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUN    ?=
N      ?= 5
STORE  ?= snapshots

export TESTCONTAINERS_RYUK_DISABLED := true

.PHONY: setup engine test lint types pytest images demo replay export ci-repro bench clean gc

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# A Docker engine that answers: provisioned (Debian's docker.io, dockerd started) when none
# does and we are root on a Debian-like system; otherwise one line saying how to start one.
engine:
	@images/provision-docker.sh

lint: setup
	$(BIN)/ruff check sandbox cli tests bench examples
	$(BIN)/ruff format --check sandbox cli tests bench examples

types: setup
	$(BIN)/mypy

pytest: setup
	$(BIN)/pytest $(PYTEST_ARGS)

test: engine lint types pytest

images: setup engine
	$(BIN)/sandbox images build

demo: setup engine images
	@$(BIN)/sandbox doctor --store $(STORE) --quiet
	$(BIN)/python -m examples.demo --store $(STORE) --times $(N) --skip-images

# `sandbox replay` exits 1 when the failure reproduced: the expected result here, so the
# target succeeds on 0 and 1 (with a message saying which) and fails on 2 (could not judge).
replay: setup engine images
	@test -n "$(RUN)" || (echo "usage: make replay RUN=<run id>"; exit 2)
	@$(BIN)/sandbox replay $(RUN) --store $(STORE) --times $(N); rc=$$?; \
	if [ $$rc -eq 1 ]; then echo "make replay: the captured failure reproduced (as expected)"; \
	elif [ $$rc -eq 0 ]; then echo "make replay: the captured failure did NOT reproduce"; fi; \
	[ $$rc -le 1 ]

export: setup
	@test -n "$(RUN)" || (echo "usage: make export RUN=<run id>"; exit 2)
	$(BIN)/sandbox export $(RUN) --store $(STORE) -o $(RUN).tar.gz

ci-repro: setup engine images
	$(BIN)/sandbox ci-repro --store $(STORE) --in-container

bench: setup
	$(BIN)/python -m bench.all

gc: setup
	$(BIN)/sandbox gc

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
