# LangGraph's saver (savepoint.langgraph, issue 13). Its tests are in the
# Python suite (make test-python): the conformance suite, real graphs,
# durability and several processes. Here is its benchmark against
# AsyncSqliteSaver, which `make bench` and `make bench-quick` run before the
# benchmark program, ending with langgraph_put_get_p50_vs_sqlite= and
# langgraph_16proc_vs_sqlite=.

# Recursive: PY_DIR is set by mk/python.mk, included after this file.
LANGGRAPH_BENCH = $(PY_DIR)/bench/langgraph_bench.py
LANGGRAPH_BENCH_FLAGS ?=

.PHONY: bench-langgraph
bench-langgraph: clients-python bench-build ## LangGraph savers: SavepointSaver against AsyncSqliteSaver (put+get p50, 16 processes)
	$(VENV)/bin/python $(LANGGRAPH_BENCH) --savepointd $(BIN)/savepointd $(LANGGRAPH_BENCH_FLAGS)

.PHONY: bench-langgraph-quick
bench-langgraph-quick: clients-python bench-build ## bench-langgraph's short form (about a minute)
	$(VENV)/bin/python $(LANGGRAPH_BENCH) --quick --savepointd $(BIN)/savepointd $(LANGGRAPH_BENCH_FLAGS)

bench: bench-langgraph
bench-quick: bench-langgraph-quick
