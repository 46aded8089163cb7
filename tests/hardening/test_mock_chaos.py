"""Issue 15 (7): the chaos mock gives every game the same faults on a long-lived server."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))

from llmkit import small_task  # noqa: E402


async def test_chaos_games_on_one_long_lived_server_are_identical(monkeypatch):
    from engine.game import GameConfig, run_game
    from personas.llm.factory import LLMSettings, make_llm_persona
    from calbench_devtools.mock_endpoint import MockLLMServer

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    task = small_task()
    runs = []
    async with MockLLMServer(policy="chaos", seed=11, retry_after=0.01) as server:
        for _ in range(3):
            settings = LLMSettings(base_url=server.base_url, backoff_base=0.01)
            seats = [make_llm_persona("llm:mock", settings) for _ in range(task.num_agents)]
            before = len(server.records)
            res = await run_game(task, seats, GameConfig(deterministic=True))
            faults = [r.fault for r in server.records[before:]]
            runs.append((faults, [(e["type"], e["data"].get("agent_id")) for e in res.trace["events"]],
                         res.metrics["meetings_scheduled"]))
            await settings.pool.aclose()
    assert sum(1 for f in runs[0][0] if f) >= 3  # chaos did strike
    assert runs[0] == runs[1] == runs[2]
