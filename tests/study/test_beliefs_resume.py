"""Issue 20, item 2: quitting on a belief grid does not skip it — the same command again
asks that grid first (the game resumes on it), then goes on."""

from __future__ import annotations

import asyncio

import pytest

from lab.study.runner import StudyRunner
from lab.study.simulate import SimulatedDriver
from saves.store import Store


class QuitsOnTheGrid(SimulatedDriver):
    """Quits (like ctrl+q) when the first grid of the first real game comes up."""

    async def beliefs(self, ctx, req):
        if ctx.game.index == 1:
            raise asyncio.CancelledError
        return await super().beliefs(ctx, req)


class Records(SimulatedDriver):
    def __init__(self, study, pid):
        super().__init__(study, pid)
        self.grids: list[tuple[int, int, bool]] = []

    async def beliefs(self, ctx, req):
        self.grids.append((ctx.game.index, req.round, ctx.resumed))
        return await super().beliefs(ctx, req)


async def test_quitting_on_the_grid_resumes_on_the_grid(scripted_study, tmp_path):
    path, study = scripted_study
    # the last round's grid whether or not the participant is in its meeting (watched_rounds)
    study = study.model_copy(update={"beliefs": study.beliefs.model_copy(update={"watched_rounds": True})})
    async with await Store.open(tmp_path / "s.db") as store:
        with pytest.raises(asyncio.CancelledError):
            await StudyRunner(study, store, "P1", QuitsOnTheGrid(study, "P1")).run()
        r2 = StudyRunner(study, store, "P1", drv := Records(study, "P1"))
        await r2.enroll()
        assert r2.steps[r2.next_step()]["name"] == "game:1"
        gid = r2.steps[r2.next_step()]["game_id"]
        last = len(r2.task_of(r2.games[1]).meetings) - 1
        results = await r2.run()
        assert results[0].name == "game:1" and results[0].status == "completed"
        # the first thing asked on the way back is the grid that was cut short, in the resumed game
        assert drv.grids[0] == (1, last, True)
        async with store._db.execute("SELECT DISTINCT round FROM study_beliefs WHERE game_id = ?", (gid,)) as cur:
            assert [r[0] for r in await cur.fetchall()] == [last]
        # asked once only: a grid already stored is not asked again on a later resume
        assert sum(1 for g in drv.grids if g[0] == 1) == 1
        trace = await store.load_trace(gid)
    assert [e["data"]["round"] for e in trace["events"] if e["type"] == "resolution"] == list(range(last + 1))


def test_a_grid_already_stored_is_not_owed():
    from lab.study.seat import StudySeat

    async def ask(req):
        return {}

    seat = StudySeat(None, model="human", talk_seconds=None, decision_seconds=None, rounds={1, 4},
                     ask_beliefs=ask, answered={1})
    assert seat.owes_reflection(4) and not seat.owes_reflection(1) and not seat.owes_reflection(2)
