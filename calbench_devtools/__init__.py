"""Tools for developing and testing CalBench, not part of a game: the loopback
OpenAI-compatible mock endpoint (``mock_endpoint``) that tests, benchmarks,
``calbench mock-llm`` and ``calbench study check --mock`` talk to.  Nothing here leaves
the machine.  Personas never import this package; the program imports it only in the
commands that start the mock (tests/architecture/test_one_clisplit.py)."""
