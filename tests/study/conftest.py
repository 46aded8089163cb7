"""Fixtures for the study tests: the example study (LLM condition on the loopback mock)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from studykit import SCRIPTED_ONLY, example_text  # noqa: E402


@pytest.fixture
async def mock_llm(monkeypatch):
    from calbench_devtools.mock_endpoint import MockLLMServer

    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-stored")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    async with MockLLMServer(policy="cooperative") as server:
        yield server


@pytest.fixture
def scripted_study(tmp_path):
    """(path, Study) of the example with both conditions scripted."""
    from lab.study.model import load_study

    p = tmp_path / "study.toml"
    p.write_text(example_text(**SCRIPTED_ONLY))
    return p, load_study(p)


@pytest.fixture
def dry_db(tmp_path):
    """A study file (both conditions scripted) and a database with one dry-run cycle (4 simulated
    participants, 12 games)."""
    import asyncio

    from lab.study.check import dry_run
    from lab.study.model import load_study
    from saves.store import Store

    p = tmp_path / "study.toml"
    p.write_text(example_text(**SCRIPTED_ONLY))
    db = tmp_path / "s.db"

    async def go():
        async with await Store.open(db) as store:
            assert (await dry_run(load_study(p), store))["ok"]
    asyncio.run(go())
    return p, db
