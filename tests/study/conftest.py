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
