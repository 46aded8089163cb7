"""Fixtures for the LLM tests: a loopback mock endpoint (real HTTP) and small tasks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `import llmkit` in the tests

from llmkit import small_task  # noqa: E402


@pytest.fixture
def task():
    return small_task()


@pytest.fixture
async def mock():
    from personas.llm.mock_server import MockLLMServer

    async with MockLLMServer(policy="cooperative") as server:
        yield server


@pytest.fixture
async def make_settings(monkeypatch):
    """``make_settings(server, **overrides)`` -> LLMSettings for the mock; pools closed afterwards."""
    from personas.llm.factory import LLMSettings

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    made = []

    def make(server, **kw):
        kw.setdefault("backoff_base", 0.01)
        s = LLMSettings(base_url=server.base_url, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        await s.pool.aclose()
