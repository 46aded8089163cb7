"""Issue 30, study status: the "PARTNER ENDPOINT DOWN?" flag shows as soon as the LLM endpoint
of a game in play is killed (not only once a partner call has used up its retries), and the
columns stay aligned whatever the ids and the terminal's width."""

from __future__ import annotations

import asyncio

from calbench_devtools.mock_endpoint import MockLLMServer
from lab.study.model import load_study
from lab.study.runner import StudyRunner
from lab.study.simulate import SimulatedDriver
from lab.study.status import format_status, study_status
from saves.store import Store
from studykit import example_text


class StopInLLMGame(SimulatedDriver):
    """Leaves (the runner is cancelled) right after a partner's first turn in the LLM condition."""

    task: asyncio.Task | None = None

    def listeners(self, ctx):
        outer = self

        class Sink:
            async def emit(self, event):
                d = event.get("data") or {}
                if event.get("type") == "turn_end" and d.get("agent_id") != ctx.game.seat:
                    outer.task.cancel()
        return [Sink()] if ctx.condition.uses_llm else []


async def test_a_killed_endpoint_is_flagged_before_any_call_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    server = await MockLLMServer(policy="cooperative").start()
    p = tmp_path / "study.toml"
    p.write_text(example_text(server.base_url))
    study = load_study(p)
    try:
        async with await Store.open(tmp_path / "s.db") as store:
            drv = StopInLLMGame(study, "sim-001")
            runner = StudyRunner(study, store, "sim-001", drv)
            drv.task = asyncio.ensure_future(runner.run())
            try:
                await drv.task
            except asyncio.CancelledError:
                pass
            up = await study_status(study, store)
            game_id = next(st["game_id"] for st in await runner.db.steps("sim-001") if st["game_id"]
                           and not st["completed_at"])
            engine_round = await store.last_round(game_id)  # the engine counts rounds from 0
            await server.stop()  # the endpoint is killed while the participant is in the LLM game
            down = await study_status(study, store)
    finally:
        await server.stop()
    row = up["participants"][0]
    assert row["step"].startswith("game:") and row["endpoint"] == server.base_url
    assert not row["partner_down"] and row["partner_failures"] == 0  # it answered: nothing to flag
    assert row["round"] == engine_round + 1  # counted from 1, as the participant's screen says "Round N/5"
    row = down["participants"][0]
    assert row["partner_failures"] == 0  # no call has failed yet ...
    assert row["partner_down"] and row["endpoint_down"].startswith("no answer")  # ... and still it is flagged
    text = format_status(down, width=200)
    assert "PARTNER ENDPOINT DOWN?" in text and server.base_url in text


def _status(ids: list[str]) -> dict:
    rows = [{"participant": pid, "simulated": False, "slot": i, "state": "active",
             "step": "questionnaire:a_rather_long_questionnaire_id@3" if i % 2 else "consent", "step_index": 2,
             "steps": 14, "games_done": 1, "games": 3, "round": 4 if i % 2 else None, "idle_minutes": 0.4,
             "step_minutes": 1.5, "completion_code": None, "partner_failures": i % 2, "partner_down": False,
             "endpoint": None, "endpoint_down": None} for i, pid in enumerate(ids)]
    return {"study": "s", "participants": rows,
            "counts": {"active": len(ids), "stalled": 0, "completed": 0, "declined": 0, "screened_out": 0,
                       "timed_out": 0}, "cycle": None}


def test_status_columns_stay_aligned_at_any_width():
    st = _status(["P1", "a-participant-with-a-very-long-pool-given-identifier", "P003"])
    for width in (200, 100, 72, 60):
        lines = format_status(st, width=width).splitlines()
        head = lines[1]
        table = [ln for ln in lines[2:] if not ln.startswith("  ↳")]
        assert len(table) == 3
        for col, cell in (("state", "active"), ("step", ""), ("on step", "1.5m"), ("games", "1/3"),
                          ("idle min", "0.4")):
            at = head.index(col)
            # every row's cell of this column starts where its header does
            assert all(ln[at - 2:at] == "  " and ln[at:].startswith(cell) and ln[at] != " " for ln in table), \
                (width, col, lines)
        at = head.index("round")
        assert [ln[at:at + 1] for ln in table] == [" ", "4", " "] or [ln[at:at + 1] for ln in table] == ["", "4", ""]
        if width in (100, 72):  # narrower than the step and id columns' least (12 and 8): aligned, but wider
            assert all(len(ln) <= width for ln in [head, *table]), (width, lines)
            assert "a-participant-with-a-very-long-pool-given-identifier" not in "\n".join(lines)
