# The docs' code blocks (client/python/tests/test_docs_examples.py, part of
# test-python) run their JavaScript and TypeScript inside the package whose
# imports they name, so those packages are built (and their node_modules
# installed) before test-python runs.
test-python: clients-anthropic clients-langgraphjs clients-openai-agents
