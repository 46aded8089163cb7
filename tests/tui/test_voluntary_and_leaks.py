"""Contacted as a non-participant: the VOLUNTARY panel; and a label leak on the end screen."""

from __future__ import annotations

import re

from textual.app import App

from calbench_tui.app import make_app, screen_text
from calbench_tui.screens.decision import DecisionScreen
from calbench_tui.screens.end import EndScreen
from calbench_tui.settings import Settings
from engine.actions import Message
from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from engine.model import Errand
from engine.seats import Reply
from personas.scripted.imap import IMAPPersona

from .helpers import play_to_end, wait_for, wait_painted

SIZE = (80, 24)


class AsksAgent2(IMAPPersona):
    """IMAP, plus one DM to agent 2 at the start of round ``round`` (agent 2 is not in that meeting)."""

    def __init__(self, round_: int) -> None:
        super().__init__()
        self.round_ = round_

    async def speak(self, obs):
        reply = await super().speak(obs)
        if obs.round == self.round_ and obs.turn == 0:
            ask = Message("dm", "Agent 2, could you keep slot 6 free for us?", 2)
            return Reply(actions=tuple(reply.actions) + (ask,))
        return reply


async def test_a_contacted_non_participant_may_move_its_own_items():
    task = generate_scenario(7)
    m4 = task.meetings[3]
    assert 2 not in m4.participants and 0 in m4.participants

    def seats(t, human):
        return [AsksAgent2(3) if i == 0 else human if i == 2 else IMAPPersona() for i in range(t.num_agents)]

    app = make_app(settings=Settings(seat=2, deterministic=True), task=task, seats=seats)
    async with app.run_test(size=SIZE) as pilot:
        await play_to_end(pilot, app, stop_after_rounds=3)
        # Round 4: agent 0 writes to us; we get a turn although we are not in M4.
        await wait_for(pilot, lambda: app.game_screen.pending is not None, what="our turn in round 4")
        obs = app.game_screen.pending.obs
        assert obs.round == 3 and not obs.is_participant and obs.inbox[0].sender == 0
        await wait_painted(pilot, "not you")
        await pilot.press("i", *"ok", "enter", "escape", "e")  # the reply goes to agent 0, who wrote
        await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen), what="the voluntary panel")
        ds = app.screen
        await wait_painted(pilot, "VOLUNTARY")
        assert not ds.decision
        assert "Meet here" not in screen_text(app) and "Do nothing" in screen_text(app)
        src = next(s for s, it in enumerate(ds.plan.calendar) if isinstance(it, Errand) and not it.blocked)
        while ds.builder.cursor != src:
            await pilot.press("down")
        await pilot.press("m")
        assert src in ds.plan.moves
        await wait_for(pilot, lambda: "✓ valid" in screen_text(app), what="the engine's verdict")
        await pilot.press("s")
        await play_to_end(pilot, app)
        trace = app.result.trace
    replies = [e for e in trace["events"] if e["type"] == "dm_sent" and e["data"]["from_agent"] == 2
               and e["data"]["round"] == 3]
    assert [(e["data"]["to_agent"], e["data"]["content"]) for e in replies] == [(0, "ok")]
    vol = [e for e in trace["events"] if e["type"] == "batch_applied" and e["data"]["phase"] == "VOLUNTARY"]
    assert len(vol) == 1 and vol[0]["data"]["agent_id"] == 2 and vol[0]["data"]["actions"][0]["from_slot"] == src


class TellsItsLabel(IMAPPersona):
    """IMAP, plus ``text`` by DM to the other participants of its first meeting, on its first
    turn: what the person at seat 2 typed into the composer in this test's end-to-end form."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.said = False

    async def speak(self, obs):
        reply = await super().speak(obs)
        if self.said or not obs.is_participant:
            return reply
        self.said = True
        told = tuple(Message("dm", self.text, p) for p in obs.meeting.participants if p != obs.view.seat)
        return Reply(actions=told + tuple(reply.actions))


class EndHost(App):
    def __init__(self, trace: dict) -> None:
        super().__init__()
        self.trace = trace

    def on_mount(self) -> None:
        self.push_screen(EndScreen(self.trace, seat=2))


async def test_a_sensitive_label_leak_is_flagged_on_the_end_screen():
    """Seat 2 names its sensitive errand in a DM; the game's leak metric counts it and the end
    screen flags it.  (The game is played by scripted seats, seat 2 saying what the person typed
    in this test's earlier form: typing into the composer is tested in test_play.py, and a
    whole game by keys only to reach the end screen is in test_play.py's first test.)"""
    task = generate_scenario(7)
    sensitive = [(e, lab.text) for (a, e), lab in task.labels.errands.items() if a == 2 and lab.tier == "sensitive"]
    assert sensitive
    _, label = sensitive[0]
    seats = [TellsItsLabel(f"Sorry, slot 7 is my {label.lower()}.") if i == 2 else IMAPPersona()
             for i in range(task.num_agents)]
    result = await run_game(task, seats, GameConfig(deterministic=True, max_turns_per_round=3))
    told = [e for e in result.trace["events"] if e["type"] == "dm_sent" and e["data"]["from_agent"] == 2
            and label.lower() in e["data"]["content"]]
    assert told and told[0]["data"]["round"] == 0
    leaks = result.metrics["semantic_leaks"]
    assert leaks["by_tier"]["sensitive"] >= 1
    app = EndHost(result.trace)
    async with app.run_test(size=SIZE) as pilot:
        text = await wait_painted(pilot, "!! Agent 2 →", "sensitive")
        assert re.search(r"0/0/[1-9]\d*!", text)  # agent 2's sensitive leak count is flagged
