# The Python client (client/python): its generated stubs, its virtual
# environment (./.venv) and its test suite.
#
# The stubs are made by a pinned grpcio-tools installed in its own virtual
# environment under ./bin (bin/pygen), never in the client's, so that the
# generated code depends only on GRPCIO_TOOLS_VERSION.

PYTHON ?= python3
GRPCIO_TOOLS_VERSION := 1.85.1
PYGEN := $(BIN)/pygen
PY_DIR := client/python
PY_GEN_DIR := $(PY_DIR)/src/savepoint/v1
VENV := .venv
PYTEST_FLAGS ?=
# test-python's worker processes (pytest-xdist), one per core of a CI
# machine; the suite is mostly CPU-bound, so two took 257 s against
# 291-325 s with one.
PYTEST_WORKERS ?= 2

GENERATE_TARGETS += generate-python
GENERATED_PATHS += $(PY_GEN_DIR)
CLIENT_TARGETS += clients-python
TEST_TARGETS += test-python

# The stamp names the version, so changing GRPCIO_TOOLS_VERSION reinstalls it.
$(PYGEN)/.grpcio-tools-$(GRPCIO_TOOLS_VERSION):
	rm -rf $(PYGEN)
	$(PYTHON) -m venv $(PYGEN)
	$(PYGEN)/bin/pip install --quiet --disable-pip-version-check 'grpcio-tools==$(GRPCIO_TOOLS_VERSION)'
	@touch $@

.PHONY: generate-python
generate-python: $(PYGEN)/.grpcio-tools-$(GRPCIO_TOOLS_VERSION) ## Regenerate the Python stubs (client/python/src/savepoint/v1)
	@# Only the public API (savepoint/v1), not the store's records. Remove the
	@# old output first so a deleted .proto leaves nothing behind;
	@# __init__.py is not generated and stays.
	find $(PY_GEN_DIR) -name '*_pb2*.py*' -delete
	cd proto && ../$(PYGEN)/bin/python -m grpc_tools.protoc -I. \
		--python_out=../$(PY_DIR)/src --pyi_out=../$(PY_DIR)/src --grpc_python_out=../$(PY_DIR)/src \
		savepoint/v1/*.proto

# ./.venv with the client installed in editable mode, and beside it the
# demo (client/python/demo, python -m savepoint_demo), which is not part of
# the client's wheel; rebuilt only when either pyproject.toml changes. The
# demo is built with the setuptools the test extra installed, as a path in a
# .pth file (compat mode) rather than an import hook every interpreter loads.
$(VENV)/.savepoint-stamp: $(PY_DIR)/pyproject.toml $(PY_DIR)/demo/pyproject.toml
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -e './$(PY_DIR)[langgraph,openai-agents,anthropic,test,bench]'
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps --config-settings editable_mode=compat -e './$(PY_DIR)/demo'
	@touch $@

.PHONY: clients-python
clients-python: $(VENV)/.savepoint-stamp ## Create ./.venv with the Python client installed (editable, with its langgraph, openai-agents, test and bench extras) and its demo

# pytest exits 5 when it collected no test: that fails the build like any
# other non-zero status, with a word saying why.
.PHONY: test-python
# The cross-language tests hand sessions between the Python, Go and
# TypeScript demos, so the TypeScript client is built first.
test-python: clients-python clients-typescript clients-anthropic ## Python client tests against a real savepointd (and the cross-language resumes)
	go build -o $(BIN)/ ./cmd/savepointd ./cmd/savepoint-demo
	rc=0; cd $(PY_DIR) && SAVEPOINTD=$(abspath $(BIN))/savepointd SAVEPOINT_DEMO=$(abspath $(BIN))/savepoint-demo \
		SAVEPOINT_TS_DEMO=$(abspath client/typescript/dist/demo.js) \
		../../$(VENV)/bin/python -m pytest -n $(PYTEST_WORKERS) $(PYTEST_FLAGS) || rc=$$?; \
	if (( rc == 5 )); then echo "test-python: pytest collected no tests" >&2; fi; \
	exit $$rc
