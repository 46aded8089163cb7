"""Notes about a seat (a served seat taken over) reach the trace, however late they come.

A front end hands the human persona a note (``HumanPersona.note``); it rides on the seat's
next answer, and what is left when the last round is over is recorded as the game ends
(``engine.game``: ``seat_events()``).  After that the persona refuses notes, so the host
never says a takeover is recorded when no trace will hold it.
"""

from __future__ import annotations

import asyncio

from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from engine.trace import fold_trace
from personas.human import HumanPersona
from personas.scripted.imap import IMAPPersona

SEAT = 2
LAST_ROUND = len(generate_scenario(7).meetings) - 1


def _note(where: str) -> dict:
    return {"type": "seat_takeover", "seat": SEAT, "status": "playing", "reason": where}


class _Table:
    """Answers the human seat's requests with an IMAP bot, as a served client would, and
    notes a takeover when the event named by ``at`` goes by."""

    def __init__(self, at) -> None:
        self.bot = IMAPPersona()
        self.human = HumanPersona(self.ask)
        self.at = at
        self.refused: list[bool] = []

    def ask(self, req) -> None:
        async def answer():
            if req.kind == "register":
                await self.bot.register(req.obs)
                return
            req.answer(await getattr(self.bot, req.kind)(req.obs))
        asyncio.ensure_future(answer())

    async def emit(self, event) -> None:  # the game's event sink
        if self.at(event):
            self.refused.append(not self.human.note(_note(f"after seq {event['seq']}")))


async def _play(table: _Table):
    task = generate_scenario(7)
    seats = [IMAPPersona() if i != SEAT else table.human for i in range(5)]
    return task, await run_game(task, seats, GameConfig(deterministic=True), table)


async def test_a_note_after_the_seats_last_answer_is_recorded_as_the_game_ends():
    table = _Table(lambda e: e["type"] == "resolution" and e["data"]["round"] == LAST_ROUND)
    task, result = await _play(table)
    events = result.trace["events"]
    notes = [e for e in events if e["type"] == "seat_takeover"]
    assert table.refused == [False]
    assert len(notes) == 1
    d = notes[0]["data"]
    assert (d["agent_id"], d["seat"], d["phase"], d["round"]) == (SEAT, SEAT, "GAME_END", len(task.meetings))
    assert [e["type"] for e in events[-2:]] == ["seat_takeover", "game_end"]
    assert not fold_trace(result.trace, task=task).problems
    # the game took its last notes: a later one is refused, and nothing more is recorded
    assert table.human.note(_note("after the game")) is False


async def test_a_note_during_play_goes_with_the_seats_next_answer():
    table = _Table(lambda e: e["type"] == "round_start" and e["data"]["round"] == 0)
    task, result = await _play(table)
    events = result.trace["events"]
    notes = [e for e in events if e["type"] == "seat_takeover"]
    assert table.refused == [False] and len(notes) == 1
    d = notes[0]["data"]
    assert d["agent_id"] == SEAT and d["round"] == 0 and d["phase"] != "GAME_END"
    # recorded just before the answer it came with
    after = events[events.index(notes[0]) + 1]
    assert after["data"]["agent_id"] == SEAT and after["type"] in ("turn_end", "human_input")


async def test_scripted_seats_have_no_notes_and_record_none():
    task = generate_scenario(7)
    result = await run_game(task, [IMAPPersona() for _ in range(5)], GameConfig(deterministic=True))
    assert [e for e in result.trace["events"] if e["type"] == "seat_takeover"] == []
    assert result.trace["events"][-1]["type"] == "game_end"
