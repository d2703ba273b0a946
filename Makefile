# memofs: two commands do all the set-up on a fresh machine.
#   make eval   bootstrap .venv, install, run the default evaluation, write reports/
#   make test   bootstrap .venv, install, run the whole test suite
PYTHON ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml setup.py Makefile | sha256sum | cut -c1-16)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export NUMBA_CACHE_DIR := $(CURDIR)/.cache/numba
export MPLBACKEND := Agg
export TOKENIZERS_PARALLELISM := false

.PHONY: install inspector basic-memory test test-fast reports eval eval-locomo eval-longmemeval notebooks bench bench-lexical bench-vector bench-processes bench-rerank baseline clean

install: $(STAMP)

$(STAMP): pyproject.toml setup.py Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel
	# the CPU build of torch, pinned: an unpinned torch would pull a multi-GB CUDA build
	$(PIP) install -q "torch==$(TORCH_VERSION)"
	$(PIP) install -q "torch==$(TORCH_VERSION)" -e ".[dev]"
	rm -f $(VENV)/.installed-*
	touch $@

# the official MCP Inspector, an external client for tests/test_memofs/surfaces/test_mcp_surface.py (skipped without node)
INSPECTOR_VERSION ?= 0.15.0
INSPECTOR := .cache/node/node_modules/.bin/mcp-inspector
SERVER_MEMORY_VERSION ?= 2026.8.31
SERVER_MEMORY := .cache/node/node_modules/.bin/mcp-server-memory
inspector:
	@test -x $(INSPECTOR) || { command -v npm >/dev/null 2>&1 && npm install --silent --no-audit --no-fund --prefix .cache/node "@modelcontextprotocol/inspector@$(INSPECTOR_VERSION)"; } || echo "npm unavailable: the MCP Inspector test will be skipped"
	@# the official MCP memory server, a system under test (eval/specs/systems.toml, tests/test_eval/studies/test_systems_mcp.py)
	@test -x $(SERVER_MEMORY) || { command -v npm >/dev/null 2>&1 && npm install --silent --no-audit --no-fund --prefix .cache/node "@modelcontextprotocol/server-memory@$(SERVER_MEMORY_VERSION)"; } || echo "npm unavailable: the server-memory tests will be skipped"

# basic-memory (a system under test, eval/specs/systems.toml): it needs Python >= 3.12, so it gets
# its own virtual environment under .cache, apart from the project's
BASIC_MEMORY_VERSION ?= 0.24.1
BASIC_MEMORY := .cache/basic-memory/bin/basic-memory
PYTHON312 ?= python3.12
basic-memory:
	@test -x $(BASIC_MEMORY) || { command -v $(PYTHON312) >/dev/null 2>&1 && $(PYTHON312) -m venv .cache/basic-memory && .cache/basic-memory/bin/pip install -q "basic-memory==$(BASIC_MEMORY_VERSION)"; } || echo "no $(PYTHON312): the basic-memory test will be skipped"

test: install inspector
	$(PY) -m pytest -q

# the inner loop: everything but the tests marked slow (real models, whole benchmarks, notebooks,
# clusters, external clients), on two pytest-xdist workers with each test file kept on one worker
# (module fixtures built once); MEMOFS_TEST_FAST: the costliest Hypothesis tests run a third of
# their examples (tests/support.py examples). make test runs every test, every example, in one process
test-fast: install
	MEMOFS_TEST_FAST=1 $(PY) -m pytest -q -m "not slow" -x -n 2 --dist loadfile

# regenerate exactly the committed reports whose code or inputs changed (--dry-run says which)
reports: install
	$(PY) -m memofs_eval.regenerate --compare

eval: install
	$(PY) -m memofs_eval.cli run eval/specs/default.toml --quiet

LOCOMO ?= ../shared/datasets/locomo

eval-locomo: install
	$(PY) -m memofs_eval.cli run eval/specs/locomo.toml --dataset "$(LOCOMO)" --loader locomo --quiet --out reports/locomo --baseline reports/locomo/baseline.json

LONGMEMEVAL ?= ../shared/datasets/longmemeval-dev/longmemeval_dev.json

# turn and session granularity of one LongMemEval file; embeddings cached (resumable) under .cache
eval-longmemeval: install
	$(PY) -m memofs_eval.cli run eval/specs/longmemeval.toml --dataset "$(LONGMEMEVAL)" --loader longmemeval --quiet --out reports/longmemeval --no-gate

notebooks: install
	$(PY) -m memofs_eval.reporting.notebooks

bench-lexical: install
	$(PY) -m memofs_eval.bench.lexical

bench-vector: install
	$(PY) -m memofs_eval.bench.vector

# CLI and MCP processes, MiniLM (ONNX) beside lexical-only on the same store (issue 38)
bench-processes: install
	$(PY) -m memofs_eval.bench.processes

# the cross-encoder reranker's cost per candidate beside sentence-transformers' (reports/bench-rerank.md)
bench-rerank: install
	$(PY) -m memofs_eval.bench.rerank

bench: install
	$(PY) -m memofs_eval.bench.all

clean:
	rm -rf $(VENV) .cache
