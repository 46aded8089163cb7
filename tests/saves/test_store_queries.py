"""The public queries other packages ask the store instead of reading ``Store._db``
(issue 23 step 5): a game's status, one seat's result row, the round a game is in."""

from __future__ import annotations

from doubles import PlanPersona
from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from engine.oracle import solve
from engine.trace import seat_results
from saves.store import Store


async def _start(store, t, gid):
    await store.create_game(gid, task_row=t.to_row(), config={"seed": t.seed}, agents="test,test,test,test,test",
                            settings_key="k", started_at="2026-01-01T00:00:00+00:00")


async def _play(t, sink, gid):
    plan = solve(t).assignments
    return await run_game(t, [PlanPersona(plan) for _ in range(t.num_agents)], GameConfig(deterministic=True),
                          sink, game_id=gid)


async def test_game_status_seat_result_and_last_round_follow_a_game():
    t = generate_scenario(5)
    async with await Store.open(":memory:") as store:
        assert await store.game_status("g") is None
        assert await store.seat_result("g", 0) is None
        assert await store.last_round("g") is None
        await _start(store, t, "g")
        assert await store.game_status("g") == "running"
        assert await store.last_round("g") is None  # no round played yet
        sink = store.sink("g", durable=True)
        res = await _play(t, sink, "g")
        await sink.aclose()
        rounds = [e["data"]["round"] for e in res.trace["events"] if isinstance(e["data"].get("round"), int)]
        assert rounds
        # while the events are rows (a game still running or stopped)
        assert await store.last_round("g") == max(rounds)
        assert await store.seat_result("g", 0) is None  # no result before the game ends
        await store.finish_game("g", res.trace)
        assert await store.game_status("g") == "completed"
        # a finished game's events are one compressed blob: the round is read from it
        assert await store.last_round("g") == max(rounds)
        want = {s["agent_id"]: s for s in seat_results(res.trace)}
        for seat in range(t.num_agents):
            got = await store.seat_result("g", seat)
            assert got["meetings_scheduled"] == want[seat]["meetings_scheduled"]
            assert got["cost_shown"] == want[seat]["cost_shown"]
        assert await store.seat_result("g", t.num_agents) is None
        await store.mark_status("g", "stopped")
        assert await store.game_status("g") == "stopped"
        assert await store.game_status("g-other") is None
