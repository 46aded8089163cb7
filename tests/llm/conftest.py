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


def pytest_collection_modifyitems(config, items):
    """Tests marked ``realmodel`` (a real model on this CPU, minutes per game) run only when
    asked for with ``-m realmodel``; every other run leaves them out."""
    if "realmodel" in (config.getoption("-m") or ""):
        return
    keep = [it for it in items if it.get_closest_marker("realmodel") is None]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[it for it in items if it.get_closest_marker("realmodel")])
        items[:] = keep
