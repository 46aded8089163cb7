"""Fixtures for the test-only protocol: ``firstfree.py`` registers itself when imported; the
fixture takes it out again afterwards, so no other test sees a fifth protocol."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def firstfree():
    """The ``firstfree`` module, its protocol registered for the test."""
    from engine import protocols

    mod = importlib.import_module("firstfree")
    if protocols.get(mod.NAME) is None:  # imported (and taken out) by an earlier test
        importlib.reload(mod)
    yield mod
    protocols.unregister(mod.NAME)
