# LangGraph's saver (savepoint.langgraph, issue 13). Its tests are in the
# Python suite (make test-python): the conformance suite, real graphs,
# durability and several processes. Its benchmark against AsyncSqliteSaver
# (client/python/bench/langgraph_bench.py) is run by the benchmark program
# in `make bench` and `make bench-quick` (bench/langgraph.go), which adds
# its tables and the closing langgraph_put_get_p50_vs_sqlite= and
# langgraph_16proc_vs_sqlite= lines, and, on a PostgreSQL server it starts,
# langgraph_pg_put_get_p50_vs_postgressaver= and
# langgraph_pg_16proc_vs_postgressaver= (SavepointSaver on savepointd
# --store-url against LangGraph's PostgresSaver, from the bench extra);
# `make bench-langgraph` runs it alone, without PostgreSQL.

# Recursive: PY_DIR and VENV are set by mk/python.mk, included after this file.
LANGGRAPH_BENCH = $(PY_DIR)/bench/langgraph_bench.py
LANGGRAPH_BENCH_FLAGS ?=

BENCH_FLAGS += -langgraph-python $(VENV)/bin/python -langgraph-script $(LANGGRAPH_BENCH)
bench bench-quick: clients-python

.PHONY: bench-langgraph
bench-langgraph: clients-python bench-build ## LangGraph savers alone: SavepointSaver against AsyncSqliteSaver (put+get p50, 16 processes)
	$(VENV)/bin/python $(LANGGRAPH_BENCH) --savepointd $(BIN)/savepointd $(LANGGRAPH_BENCH_FLAGS)

.PHONY: bench-langgraph-quick
bench-langgraph-quick: clients-python bench-build ## bench-langgraph's short form (about a minute)
	$(VENV)/bin/python $(LANGGRAPH_BENCH) --quick --savepointd $(BIN)/savepointd $(LANGGRAPH_BENCH_FLAGS)
