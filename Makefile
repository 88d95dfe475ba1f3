# The habits of this project, one target each. `make help` lists them.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PG_URI ?= postgresql://postgres@127.0.0.1:5432/test

.DEFAULT_GOAL := help
.PHONY: help install ui-bundler mcp-conformance test lint demo record bench docs clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP) ui-bundler mcp-conformance ## create .venv, install the project with its test extras, fetch the UI bundler and the MCP conformance suite

# `langgraph dev` bundles examples/chat_server/progress.tsx with `npx @langchain/langgraph-ui`:
# fetched into npm's cache here, once, so the tests serve it offline (without Node.js or npm,
# the one test of the served component skips, saying why; .ci/run requires it).
ui-bundler: ## fetch the bundler langgraph dev runs for the chat's UI component into npm's cache
	@if ! command -v npx >/dev/null 2>&1; then \
		echo "Node.js (npx) not found: the test of the chat's served UI component will skip"; \
	elif npx -y @langchain/langgraph-ui@latest --help >/dev/null 2>&1; then \
		echo "UI bundler @langchain/langgraph-ui is in npm's cache"; \
	else \
		echo "could not fetch @langchain/langgraph-ui: the test of the served UI component will skip"; \
	fi

# The official MCP conformance suite needs Node.js 22: npx fetches it as the `node` package,
# with the suite, into npm's cache, once (without npx, or offline, its test skips, saying why).
mcp-conformance: ## fetch Node.js 22 and the MCP conformance suite the MCP tests run into npm's cache
	@if ! command -v npx >/dev/null 2>&1; then \
		echo "Node.js (npx) not found: the MCP conformance test will skip"; \
	elif npx -y -p node@22 -p @modelcontextprotocol/conformance conformance --help >/dev/null 2>&1; then \
		echo "Node.js 22 and @modelcontextprotocol/conformance are in npm's cache"; \
	else \
		echo "could not fetch the MCP conformance suite: its test will skip"; \
	fi

# The suite runs on two workers more than the machine has cores (WORKERS=0 runs it in one
# process), a test module's tests on one worker; the tests of the llama.cpp model run one at
# a time (tests/conftest.py). A good part of a test's time is spent waiting on the processes
# and servers it starts; the extra workers use it. On 2 cores, side by side: 8 min 28 s on 2
# workers, 6 min 48 s on 3 (before the suite's cuts); after them, with the modules handed
# out longest first by their measured time, 5 min 43 s on 3 and 5 min 21 s on 4, the same
# CPU (10 minutes); a fresh clone with the local model built, 4 workers: 5 min 30 s.
# xdist would hand out the modules with the most tests first; the order
# tests/conftest.py gives them (the longest first) is kept instead.
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE): the
# suite starts hundreds of Python processes, each of which would compile the package again.
WORKERS ?= $(shell $(PYTHON) -c 'import os; print(len(os.sched_getaffinity(0)) + 2)')

test: $(STAMP) ## run the whole suite offline (cassettes replayed, loopback only)
	PYTHONDONTWRITEBYTECODE= LANGGRAPH_STRICT_MSGPACK=true \
	LANGGRAPH_REFINE_TEST_POSTGRES_URI=$${LANGGRAPH_REFINE_TEST_POSTGRES_URI:-$(PG_URI)} \
	$(BIN)/pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder \
		--disable-socket --allow-hosts=127.0.0.1,localhost,::1 --record-mode=none $(ARGS)

lint: $(STAMP) ## ruff and mypy (strict)
	$(BIN)/ruff check src tests examples tools
	$(BIN)/ruff format --check src tools
	$(BIN)/mypy

demo: $(STAMP) ## a real refinement loop on the local model (or OPENAI_API_KEY's model)
	$(BIN)/python -m tools.demo $(ARGS)

record: $(STAMP) ## re-record every cassette against a freshly started local model
	$(BIN)/python -m tools.local_model run -- \
		$(BIN)/pytest -m "not postgres and not server" --record-mode=rewrite tests/test_examples.py tests/test_recorded.py \
		tests/test_ladder_recorded.py

bench: $(STAMP) ## run the benchmarks and write benchmarks/RESULTS.md (BENCH=name for one)
	$(BIN)/python -m benchmarks $(BENCH)

docs: $(STAMP) ## build the documentation site, warnings as errors
	$(BIN)/mkdocs build --strict

clean: ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
