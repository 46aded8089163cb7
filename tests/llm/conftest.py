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
