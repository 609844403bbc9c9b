# sandbox-replayer: every target installs what it needs, from nothing.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PHOENIX_VENV ?= .venv-phoenix
MCP_SQLITE_VENV ?= .venv-mcp-sqlite
LANGGRAPH_MCP_VENV ?= .venv-langgraph-mcp
RUN    ?=
N      ?= 5
STORE  ?= snapshots
# make demo's own captures: a store of their own, so that the demo never changes what the
# repository ships in snapshots/ (and tests never see what a demo left there)
DEMO_STORE ?= demo-store
SHARD  ?=
SHARD_OPT = $(if $(SHARD),--shard $(SHARD))
# make ci-repro REPORTS=DIR: one HTML page per replayed run in DIR (what CI keeps on failure)
REPORTS ?=
REPORTS_OPT = $(if $(REPORTS),--report-dir $(REPORTS))

export TESTCONTAINERS_RYUK_DISABLED := true

.PHONY: setup test-deps engine test lint types pytest images demo replay export ci-repro bench bench-tools clean gc

setup: $(STAMP)

# What only the tests need (`make pytest` and `make test` install it; `make setup` does not):
# the trace viewer, and PyPI's mcp-server-sqlite in a venv of its own (it needs mcp<2), and
# LangGraph with langchain-mcp-adapters in another (they pin mcp<2 too).
test-deps: $(STAMP) $(PHOENIX_VENV)/.installed $(MCP_SQLITE_VENV)/.installed \
	$(LANGGRAPH_MCP_VENV)/.installed

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# Arize Phoenix, the trace viewer the OpenTelemetry tests export to, in a venv of its own:
# it is a server we talk to over HTTP, and its dependencies pin versions ours do not accept.
$(PHOENIX_VENV)/.installed:
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/pip install -q --upgrade pip
	$(PHOENIX_VENV)/bin/pip install -q 'arize-phoenix>=12'
	touch $@

# PyPI's mcp-server-sqlite, a real MCP server the wild-agent tests start, in a venv of its
# own (the way uvx runs it): it needs mcp<2, ours is 2.x.
$(MCP_SQLITE_VENV)/.installed:
	$(PYTHON) -m venv $(MCP_SQLITE_VENV)
	$(MCP_SQLITE_VENV)/bin/pip install -q 'mcp-server-sqlite==2025.4.25' 'mcp<2'
	touch $@

# A LangGraph agent on langchain-mcp-adapters, which pins mcp<2 (ours is 2.x): the wild-agent
# test captures it running on this venv's python, so this project is installed here too.
$(LANGGRAPH_MCP_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(LANGGRAPH_MCP_VENV)
	$(LANGGRAPH_MCP_VENV)/bin/pip install -q 'langgraph==1.2.*' 'langchain-openai==1.7.*' \
		'langchain-mcp-adapters==0.3.*' 'mcp<2' -e .
	touch $@

# A Docker engine that answers: provisioned (Debian's docker.io, dockerd started) when none
# does and we are root on a Debian-like system; otherwise one line saying how to start one.
engine:
	@images/provision-docker.sh

lint: setup
	$(BIN)/ruff check sandbox cli tests bench examples
	$(BIN)/ruff format --check sandbox cli tests bench examples

types: setup
	$(BIN)/mypy

# `make pytest` runs the suite as two pytest sessions at once, each on a part of tests/ (most
# tests wait on containers and child processes, so two sessions share two cores well; test
# sessions already share the Docker engine, ports are free ones, temporary folders their own).
# The second part's output follows the first's. With PYTEST_ARGS, one session runs those.
PYTEST_PART1 = tests/integration tests/unit/replay
PYTEST_PART2 = tests --ignore=tests/integration --ignore=tests/unit/replay

pytest: test-deps
	@if [ -n "$(PYTEST_ARGS)" ]; then exec $(BIN)/pytest $(PYTEST_ARGS); fi; \
	log=$$(mktemp); \
	$(BIN)/pytest $(PYTEST_PART2) >$$log 2>&1 & part2=$$!; \
	$(BIN)/pytest $(PYTEST_PART1); one=$$?; \
	wait $$part2; two=$$?; \
	echo "== the other part of the suite: $(PYTEST_PART2)"; cat $$log; rm -f $$log; \
	echo "make pytest: $(PYTEST_PART1) exited $$one, the rest $$two"; \
	[ $$one -eq 0 ] && [ $$two -eq 0 ]

test: engine lint types pytest

images: setup engine
	$(BIN)/sandbox images build

# The commands exit 1 when the failure reproduced, 0 when it is gone (every run judged),
# 2 when it could not be judged (or bad input), 3 on an internal error. Reproduced is the
# expected result here: `replay` succeeds on 1 and 0 (saying which) and fails on 2 and 3;
# `demo` and `ci-repro` succeed only when every captured failure reproduced (`ci-repro`: or,
# for one marked fixed, stayed gone; with SHARD=I/N also when its shard holds no captured
# failure).
VERDICT = rc=$$?; \
	if [ $$rc -eq 1 ]; then echo "make $@: the captured failure reproduced (as expected)"; \
	elif [ $$rc -eq 0 ]; then echo "make $@: the captured failure did NOT reproduce (gone)"; \
	elif [ $$rc -eq 2 ]; then echo "make $@: the replay could not be judged (see above)"; \
	else echo "make $@: internal error (exit $$rc; see the traceback file named above)"; fi

demo: setup engine images
	@$(BIN)/sandbox doctor --store $(DEMO_STORE) --quiet
	@$(BIN)/python -m examples.demo --store $(DEMO_STORE) --times $(N) --skip-images; $(VERDICT); \
	[ $$rc -eq 1 ]

replay: setup engine images
	@test -n "$(RUN)" || (echo "usage: make replay RUN=<run id>"; exit 2)
	@$(BIN)/sandbox replay $(RUN) --store $(STORE) --times $(N); $(VERDICT); \
	[ $$rc -le 1 ]

export: setup
	@test -n "$(RUN)" || (echo "usage: make export RUN=<run id>"; exit 2)
	$(BIN)/sandbox export $(RUN) --store $(STORE) -o $(RUN).tar.gz

ci-repro: setup engine images
	@$(BIN)/sandbox ci-repro --store $(STORE) --in-container $(SHARD_OPT) $(REPORTS_OPT); rc=$$?; \
	if [ $$rc -eq 0 ] && [ -n "$(SHARD)" ] && \
		[ -z "$$($(BIN)/sandbox ci-repro --store $(STORE) $(SHARD_OPT) --dry-run)" ]; then \
		echo "make $@: shard $(SHARD) holds no captured failure"; exit 0; fi; \
	(exit $$rc); $(VERDICT); [ $$rc -eq 1 ]

# The host tools some benchmarks compare against or drive: redis-cli (the RDB baseline),
# pgbench and pg_dump (the Postgres scale baseline) and Chromium (the report's load time),
# installed when missing and we are root on Debian.
bench-tools:
	@missing=""; command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	command -v pgbench >/dev/null 2>&1 || missing="$$missing postgresql-client"; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "bench: installing$$missing"; apt-get update -qq; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "bench: missing$$missing (apt-get install -y$$missing)"; fi; \
	fi

bench: setup engine images bench-tools
	$(BIN)/python -m bench.all

gc: setup
	$(BIN)/sandbox gc

clean:
	rm -rf $(VENV) $(PHOENIX_VENV) $(MCP_SQLITE_VENV) $(LANGGRAPH_MCP_VENV) .mypy_cache .ruff_cache .pytest_cache
