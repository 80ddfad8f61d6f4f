# The SIGKILL crash matrices' long form. make test's Python suite runs one
# case of each reconcile branch of savepoint.anthropic's crash matrix
# (client/python/tests/test_anthropic.py: nothing saved yet, a read-only
# call re-run, a side-effecting call never begun, begun and in doubt,
# recorded and reused, after Point B, the final answer saved) in each of its
# modes; every other crash moment is marked crash_matrix, deselected by
# default, and run here (pytest --crash-matrix -m crash_matrix); then the
# TypeScript agent's whole matrix (test-anthropic-matrix, mk/anthropic.mk).
# The Go, Python and TypeScript demos' matrices (cmd/savepoint-demo/testdata/
# crash-matrix.txt) run in full in make test. Recursive: PY_DIR and VENV
# come from mk/python.mk, included after this file.

.PHONY: crash-matrix
crash-matrix: clients-python clients-typescript clients-anthropic ## The crash-matrix moments make test leaves out: savepoint.anthropic's agent (sync, async, tool runner), then test-anthropic-matrix
	go build -o $(BIN)/ ./cmd/savepointd ./cmd/savepoint-demo
	cd $(PY_DIR) && SAVEPOINTD=$(abspath $(BIN))/savepointd SAVEPOINT_DEMO=$(abspath $(BIN))/savepoint-demo \
		SAVEPOINT_TS_DEMO=$(abspath client/typescript/dist/demo.js) \
		../../$(VENV)/bin/python -m pytest --crash-matrix -m crash_matrix $(PYTEST_FLAGS)
	$(MAKE) --no-print-directory test-anthropic-matrix
