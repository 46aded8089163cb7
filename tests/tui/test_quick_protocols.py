"""Quick actions speak each scripted protocol: a game as seat 2 against SD-MAP seats, by keys
(the DSM-Welfare game is played through the seat model: tests/personas/test_seat_model.py).

The human plays by keys only (``p`` propose, ``a`` accept, ``d`` decline, ``r`` ask, ``c``
costs); the saved trace must show the typed payloads of the bots' own protocol and the bots
acting on them — the meeting lands on the slot the human proposed or accepted.
"""

from __future__ import annotations

import asyncio
import time

from calbench_tui.app import make_app, screen_text
from calbench_tui.screens.decision import DecisionScreen
from calbench_tui.screens.end import EndScreen
from calbench_tui.settings import Settings
from engine.generate import generate_scenario
from engine.model import Errand

from .helpers import decide, human_waiting, press_to_slot, wait_for

SIZE = (100, 30)


def _usable(cal, s: int) -> bool:
    it = cal[s]
    return it is None or (isinstance(it, Errand) and not it.blocked)


def _slot_of(ev_data: dict, meeting_id: int, seat: int) -> int | None:
    cal = (ev_data.get("calendars") or [])[seat]
    return next((s for s, it in enumerate(cal) if isinstance(it, dict) and it.get("meeting_id") == meeting_id), None)


async def _play(pilot, app, speak, timeout: float = 60.0) -> None:
    t0 = time.monotonic()
    while not isinstance(app.screen, EndScreen):
        assert time.monotonic() - t0 < timeout, f"the game did not finish; screen:\n{screen_text(app)}"
        await wait_for(pilot, lambda: human_waiting(app), what="the human's turn")
        if app.status in ("failed", "stopped"):
            raise AssertionError(f"game {app.status}: {app.error}")
        if isinstance(app.screen, DecisionScreen):
            await decide(pilot, app)
        elif app.game_screen is not None and app.game_screen.pending is not None:
            await speak(app.game_screen)
            await pilot.press("e")
        await asyncio.sleep(0)


def _human_sent(trace, kind: str) -> list[dict]:
    return [e["data"] for e in trace["events"] if e["type"] == "dm_sent" and e["data"]["from_agent"] == 2
            and (e["data"].get("payload") or {}).get("kind") == kind]


async def test_quick_actions_speak_sdmap_and_the_bots_act_on_them():
    task = generate_scenario(7)
    # M1 (seats 2, 3, 4): the human opens it and proposes its *highest* usable slot — SD-MAP
    # bots walk slots from 0 upwards, so landing there means they read the typed propose.
    m1 = task.meetings[0]
    assert min(m1.participants) == 2
    target = max(s for s in range(task.num_slots) if task.calendars[2][s] is None
                 and all(_usable(task.calendars[a], s) for a in m1.participants if a != 2))
    declined: dict[int, int] = {}  # meeting id -> first slot the human declined
    accepted: dict[int, int] = {}
    app = make_app(settings=Settings(seat=2, seed=7, agents="sdmap", deterministic=True), task=task)
    async with app.run_test(size=SIZE) as pilot:
        async def speak(gs):
            obs = gs.pending.obs
            m = obs.meeting
            if not obs.is_participant:
                return
            if min(m.participants) == 2:
                if not gs.model.my_proposal:
                    await press_to_slot(pilot, gs.calendar, target)
                    await pilot.press("p")
                elif gs.model.proposal_kind == "reply" and m.id not in accepted:
                    accepted[m.id] = gs.model.proposal[1][0]
                    await pilot.press("a")  # confirm
            elif gs.model.proposal and gs.model.proposal_kind == "propose":
                slot = gs.model.proposal[1][0]
                if m.id not in declined:
                    declined[m.id] = slot
                    await pilot.press("d")  # IMPOSSIBLE: the bot must propose another slot
                elif slot != declined[m.id] and m.id not in accepted:
                    accepted[m.id] = slot
                    await pilot.press("a")  # PENDING

        await _play(pilot, app, speak)
        trace = app.result.trace
    assert [a["model"] for a in trace["config"]["agents"]] == ["sdmap", "sdmap", "human", "sdmap", "sdmap"]
    [prop] = {(d["payload"]["protocol"], d["payload"]["slot"]) for d in _human_sent(trace, "propose")}
    assert prop == ("sdmap", target)
    confirms = _human_sent(trace, "confirm")
    assert confirms and {d["to_agent"] for d in confirms} == {3, 4} and confirms[0]["payload"]["slot"] == target
    replies = _human_sent(trace, "reply")
    assert {d["payload"]["status"] for d in replies} == {"PENDING", "IMPOSSIBLE"}
    assert declined, "no bot ever proposed to the human"
    resolutions = {e["data"]["meeting_id"]: e["data"] for e in trace["events"] if e["type"] == "resolution"}
    # The meeting the human opened sits where the human proposed, on every participant's calendar.
    assert {_slot_of(resolutions[m1.id], m1.id, a) for a in m1.participants} == {target}
    assert accepted[m1.id] == target
    # Where a bot opened: the human's typed IMPOSSIBLE made it move on from a slot the other
    # responder had accepted, and the meeting went to a later proposal the human accepted.
    moved_on_by_the_human = 0
    for mid, first in declined.items():
        parts = next(m.participants for m in task.meetings if m.id == mid)
        final = {_slot_of(resolutions[mid], mid, a) for a in parts}
        assert len(final) == 1 and first not in final and mid in accepted
        others_ok = [e["data"]["payload"]["status"] for e in trace["events"]
                     if e["type"] == "dm_sent" and e["data"]["from_agent"] not in (2, min(parts))
                     and (e["data"].get("payload") or {}).get("kind") == "reply"
                     and e["data"]["payload"].get("meeting_id") == mid and e["data"]["payload"]["slot"] == first]
        moved_on_by_the_human += others_ok == ["PENDING"]
    assert moved_on_by_the_human, "every declined slot was also refused by another bot: the test proves nothing"


# The DSM game (typed proposals / scores / decision from the human, the bots acting on them) is
# played through the seat model alone: tests/personas/test_seat_model.py
# ::test_the_models_quick_actions_speak_dsm_and_the_bots_act_on_them.


async def test_propose_on_a_blocked_errand_warns_and_sends_nothing():
    task = generate_scenario(7)
    blocked = next(s for s, it in enumerate(task.calendars[2]) if isinstance(it, Errand) and it.blocked)
    free = next(s for s, it in enumerate(task.calendars[2]) if it is None)
    app = make_app(settings=Settings(seat=2, seed=7, deterministic=True), task=task)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.game_screen is not None and app.game_screen.pending is not None,
                       what="the first turn")
        gs = app.game_screen
        await press_to_slot(pilot, gs.calendar, blocked)
        await pilot.press("p")
        await pilot.pause()
        assert gs.model.outbox == [] and gs.model.my_proposal == []
        notes = [n.message for n in app._notifications]
        assert any(f"slot {blocked}" in n and "can't hold" in n for n in notes), notes
        # A free slot is proposed as usual.
        await press_to_slot(pilot, gs.calendar, free)
        await pilot.press("p")
        assert [m.payload["slot"] for m in gs.model.outbox] == [free, free]


async def test_an_uncoordinated_meeting_without_a_copy_is_worded():
    app = make_app(settings=Settings(seat=2, seed=7, deterministic=True), task=generate_scenario(7))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.game_screen is not None and app.game_screen.pending is not None,
                       what="the first turn")
        gs = app.game_screen
        gs._resolution({"type": "resolution", "participant": True, "meeting_id": 1, "coordinated": False,
                        "my_slot": None})
        gs._resolution({"type": "resolution", "participant": True, "meeting_id": 1, "coordinated": False,
                        "my_slot": 4})
        feed = "\n".join(line.text for line in gs.chat.log_for("feed").lines)
        assert "M1 was not coordinated (you have no copy)" in feed and "slot None" not in feed
        assert "M1 was not coordinated (your copy: slot 4)" in feed
