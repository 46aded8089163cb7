"""Shared helpers for the hardening tests."""

from __future__ import annotations

import asyncio
import json
import time

from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from personas.registry import make_personas


def run_async(coro):
    return asyncio.run(coro)


def our_trace(seed: int = 3, agents: str = "imap") -> dict:
    """A real game played by scripted seats, as a JSON trace."""
    task = generate_scenario(seed)
    res = asyncio.run(run_game(task, make_personas(agents, task.num_agents), GameConfig(deterministic=True)))
    return json.loads(json.dumps(res.trace))


def wait_until(pred, timeout: float, step: float = 0.05) -> bool:
    """Poll ``pred()`` every ``step`` seconds until it is true (True) or ``timeout`` passes (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return False
