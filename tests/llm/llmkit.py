"""Helpers shared by the LLM tests (imported by name: tests/llm is on sys.path)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from engine.generate import generate_scenario

_DOUBLES = Path(__file__).resolve().parents[1] / "engine" / "doubles.py"


def load_doubles():
    """tests/engine/doubles.py (PlanPersona, ScriptPersona), loaded by path."""
    spec = importlib.util.spec_from_file_location("calbench_test_doubles", _DOUBLES)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def small_task(seed: int = 3, **kw):
    """A small generated task: 4 agents, 8 slots, 3 two-person meetings."""
    args = dict(num_agents=4, num_slots=8, num_meetings=3, participants_per_meeting=2, blocked=1)
    args.update(kw)
    return generate_scenario(seed, **args)
