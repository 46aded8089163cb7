"""Issue 20, item 4: the time on a step is summed over resumes — a game played for 700 s,
quit, and finished in 20 s more is recorded as 720 s in steps.csv and in ``study status``
(it was 20 s: only the time after the last resume)."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine.events import EventSink
from lab.study.export import study_rows
from lab.study.runner import StudyRunner
from lab.study.simulate import SimulatedDriver
from lab.study.status import study_status
from saves.store import Store


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class AtFirstEvent(EventSink):
    def __init__(self, fn) -> None:
        self.fn, self.done = fn, False

    async def emit(self, event):
        if not self.done:
            self.done = True
            self.fn()


class Driver(SimulatedDriver):
    """Plays game:1 for 700 (fake) seconds and quits; on the resumed run, 20 more seconds."""

    def __init__(self, study, pid, clock, task_box):
        super().__init__(study, pid)
        self.clock, self.box = clock, task_box

    def listeners(self, ctx):
        if ctx.game.index != 1:
            return []
        if ctx.resumed:
            return [AtFirstEvent(lambda: setattr(self.clock, "now", self.clock.now + 20))]

        def quit_():
            self.clock.now += 700
            self.box[0].cancel()
        return [AtFirstEvent(quit_)]


async def test_step_seconds_are_summed_over_resumes(scripted_study, tmp_path, monkeypatch):
    path, study = scripted_study
    clock = Clock()
    monkeypatch.setattr(time, "perf_counter", clock)
    box: list = [None]
    async with await Store.open(tmp_path / "s.db") as store:
        r1 = StudyRunner(study, store, "P1", Driver(study, "P1", clock, box))
        box[0] = asyncio.ensure_future(r1.run())
        with pytest.raises(asyncio.CancelledError):
            await box[0]
        st = await study_status(study, store)
        assert st["participants"][0]["step"] == "game:1"
        assert st["participants"][0]["step_minutes"] == pytest.approx(700 / 60, abs=0.05)
        await StudyRunner(study, store, "P1", Driver(study, "P1", clock, box)).run()
        rows = (await study_rows(study, store))["steps.csv"]
        st = await study_status(study, store)
    game1 = next(r for r in rows if r["name"] == "game:1")
    assert game1["seconds"] == pytest.approx(720.0)
    assert st["participants"][0]["seconds_per_step"]["game:1"] == pytest.approx(720.0)
