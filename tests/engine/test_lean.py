"""Lean traces: what folding rebuilds is left out, and put back exactly (engine/lean.py)."""

from __future__ import annotations

import copy
import json

import pytest

from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from engine.lean import DERIVED, fatten_events, slim_events
from engine.suite import canonical_task
from personas.registry import make_personas


def roundtrip(task, events):
    slim = slim_events(task, events)
    back = fatten_events(task, [(e["type"], d, k) for e, (d, k) in zip(events, slim)])
    return slim, back


def dropped_keys(slim):
    return [k for _, ks in slim if ks for k, _ in ks]


@pytest.mark.parametrize("protocol", ["imap", "sdmap", "dsm-welfare", "dsm-private"])
async def test_every_protocol_roundtrips_byte_for_byte(protocol):
    for task in [canonical_task(i) for i in (0, 7, 45, 89)]:
        res = await run_game(task, make_personas(protocol, task.num_agents), GameConfig(deterministic=True))
        events = res.trace["events"]
        before = json.dumps([e["data"] for e in events])  # key order included
        slim, back = roundtrip(task, events)
        assert json.dumps(back) == before
        assert json.dumps([e["data"] for e in events]) == before  # slimming never touches its input
        # every render and calendar copy of our own traces is rebuilt, none is kept
        kept = [(e["type"], k) for e, (d, _) in zip(events, slim) for k in DERIVED.get(e["type"], ()) if k in d]
        assert kept == []
        assert len(json.dumps([d for d, _ in slim])) < len(before) / 2


async def test_a_value_folding_does_not_give_is_kept_and_still_roundtrips():
    task = generate_scenario(11)
    res = await run_game(task, make_personas("imap", task.num_agents), GameConfig(deterministic=True))
    events = copy.deepcopy(res.trace["events"])
    turn = next(e for e in events if e["type"] == "turn_start")
    turn["data"]["calendar_render"] += "\n(edited by hand)"
    res_ev = next(e for e in events if e["type"] == "resolution")
    res_ev["data"]["calendars"][0][0] = {"errand_id": 999, "cost": 7}  # a calendar the batches never made
    slim, back = roundtrip(task, events)
    assert back == [e["data"] for e in events]
    i = events.index(turn)
    assert slim[i][0]["calendar_render"].endswith("(edited by hand)")  # kept, not rebuilt
    j = events.index(res_ev)
    assert "calendars" in slim[j][0]  # kept, and the fold continued from it


async def test_events_without_agent_or_calendar_are_left_alone():
    task = generate_scenario(3)
    events = [{"type": "turn_start", "data": {"round": 0, "agent_id": None, "calendar_render": "x"}},
              {"type": "batch_applied", "data": {"agent_id": 0, "calendar_render_after": "y"}},
              {"type": "something_else", "data": {"calendar_render": "z"}}]
    slim, back = roundtrip(task, events)
    assert back == [e["data"] for e in events]
    assert dropped_keys(slim) == []
    assert dropped_keys(slim_events(task, events, trusted=True)) == []  # nothing to rebuild from: kept


def _compared_and_trusted(task, events):
    return slim_events(task, events), slim_events(task, events, trusted=True)


@pytest.mark.parametrize("protocol", ["imap", "sdmap", "dsm-welfare", "dsm-private",
                                      "imap,sdmap,dsm-welfare,dsm-private,imap"])
@pytest.mark.parametrize("channels", [("dm",), ("dm", "participant_groupchat", "all_groupchat")])
async def test_trusted_slimming_drops_exactly_what_comparing_drops(protocol, channels):
    """The engine's own events are slimmed without rebuilding each render to compare
    (``trusted``); over these games that gives the very same result as comparing."""
    for i in (0, 3, 17, 45, 70, 89):
        task = canonical_task(i)
        cfg = GameConfig(deterministic=True, channels=channels, max_turns_per_round=4)
        res = await run_game(task, make_personas(protocol, task.num_agents), cfg)
        compared, trusted = _compared_and_trusted(task, res.trace["events"])
        assert trusted == compared


async def test_trusted_slimming_holds_for_llm_seats_that_fail_and_time_out(mock, make_settings):
    """LLM seats on the loopback mock, sloppy answers (failures, retries, rejected batches),
    one seat that never answers in time: still exactly what comparing drops."""
    import asyncio

    from engine.seats import PassivePersona, Reply

    class Stuck(PassivePersona):
        async def speak(self, obs):
            await asyncio.sleep(5)
            return Reply()

        decide = volunteer = speak

    mock.policy = "sloppy"
    settings = make_settings(mock, model="mock", structured="off", retries=0)
    for i in (2, 9):
        task = canonical_task(i)
        seats = make_personas("llm:mock,imap,sdmap,imap,dsm-welfare", task.num_agents, llm=settings)
        seats[3] = Stuck()
        res = await run_game(task, seats, GameConfig(deterministic=True, seat_timeout=0.05, max_turns_per_round=3))
        assert any(e["type"] == "seat_timeout" for e in res.trace["events"])
        compared, trusted = _compared_and_trusted(task, res.trace["events"])
        assert trusted == compared


@pytest.mark.parametrize("protocol", ["imap", "sdmap", "dsm-welfare", "dsm-private", "imap,dsm-private,sdmap,imap,dsm-welfare"])
async def test_a_game_played_without_renders_packs_and_reads_back_the_same(protocol):
    """``play_game(renders=False)`` (a suite's batch save): the renders are left UNWRITTEN,
    the game is otherwise the same, its packed blob is byte for byte the one of the game
    with renders, and ``fill_unwritten`` writes exactly the renders the full game has."""
    from engine.events import UNWRITTEN, ListSink
    from engine.game import play_game
    from engine.lean import fill_unwritten
    from saves.codec import decode_events, encode_events

    for i in (0, 17, 45, 89):
        task = canonical_task(i)
        cfg = GameConfig(deterministic=True, channels=("dm", "participant_groupchat", "all_groupchat"))
        games = [await play_game(task, make_personas(protocol, task.num_agents), cfg, ListSink(), renders=r)
                 for r in (True, False)]
        full, lazy = (g.events for g in games)
        gaps = [(e["type"], k) for e in lazy for k, v in e["data"].items() if v is UNWRITTEN]
        assert {t for t, _ in gaps} == {"agent_registered", "turn_start", "decide_start", "batch_applied"}
        assert not any(isinstance(v, str) and k.startswith("calendar_") and k.endswith(("render", "render_after"))
                       for e in lazy for k, v in e["data"].items())
        assert fill_unwritten(task, lazy) == full
        assert [e["data"].get(k) for e in lazy for k in ("content", "calendar_after", "state_hash")] == \
               [e["data"].get(k) for e in full for k in ("content", "calendar_after", "state_hash")]
        packed = [encode_events(ev, task=task, trusted=True) for ev in (full, lazy)]
        assert packed[0] == packed[1]
        assert decode_events(packed[1][0], packed[1][3], task.to_row()) == full
        # compared, not trusted (an imported trace's path): UNWRITTEN is dropped too
        assert slim_events(task, lazy) == slim_events(task, full)
        # the whole form (a trace slimming gave up on) writes the renders out
        task_less = encode_events(fill_unwritten(task, lazy))
        assert decode_events(task_less[0], task_less[3]) == full
