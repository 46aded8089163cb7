"""The pieces under the screens: the human persona's futures, the batch plan, the seat projection,
quick actions, settings and the key map."""

from __future__ import annotations

import asyncio
import threading

import pytest

from engine.observe import seat_event
from calbench_tui.settings import SettingsError, load_keymap, parse_channels
from calbench_tui.widgets.batch import BatchPlan
from engine.actions import Reschedule, Schedule
from engine.events import ListSink
from engine.game import GameConfig, resume_point, run_game
from engine.generate import generate_scenario
from engine.model import Errand, MeetingCopy
from engine.rules import BatchOutcome, Rejection, check_batch
from engine.seats import Reply
from personas.human import HumanPersona
from personas.registry import make_personas


# -- the human persona --------------------------------------------------------------------------
async def test_human_persona_awaits_the_interface_and_times_the_answer():
    requests = []
    human = HumanPersona(requests.append)
    task = generate_scenario(7)

    async def interface():
        while True:
            await asyncio.sleep(0)
            pending = [r for r in requests if not r.done]
            for r in pending:
                if r.kind == "speak":
                    r.answer(Reply())
                elif r.kind == "decide":
                    obs = r.obs
                    free = next(s for s, it in enumerate(obs.view.calendar) if it is None)
                    r.answer(Reply(actions=(Schedule(obs.meeting.id, free),)))
                else:
                    r.answer(Reply())

    seats = make_personas("imap", 5, humans={})
    seats[2] = human
    ui = asyncio.create_task(interface())
    try:
        result = await run_game(task, seats, GameConfig(deterministic=True), ListSink())
    finally:
        ui.cancel()
    kinds = [r.kind for r in requests]
    assert kinds[0] == "register" and "speak" in kinds and "decide" in kinds
    assert all(r.seat == 2 for r in requests)
    assert human.answered == sum(1 for k in kinds if k != "register")
    ends = [e for e in result.trace["events"] if e["type"] == "turn_end" and e["data"]["agent_id"] == 2]
    assert ends and all(isinstance(e["data"]["latency_ms"], (int, float)) for e in ends)


async def test_a_request_can_be_answered_from_another_thread_and_only_once():
    got = []
    human = HumanPersona(got.append)
    task = generate_scenario(7)
    from engine.observe import TurnObservation, meeting_view, seat_view

    view = seat_view(2, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm",))
    obs = TurnObservation(view, 0, 0, 15, meeting_view(task.meetings[0], 2, task.labels), True, ())
    speak = asyncio.create_task(human.speak(obs))
    await asyncio.sleep(0)
    req = got[0]
    threading.Thread(target=req.answer_threadsafe, args=(Reply(text="hi"),)).start()
    reply = await asyncio.wait_for(speak, 2)
    assert reply.text == "hi" and reply.latency_ms is not None
    assert req.answer(Reply()) is False  # already answered


async def test_attach_resends_a_waiting_request():
    first, second = [], []
    human = HumanPersona(first.append)
    task = generate_scenario(7)
    from engine.observe import TurnObservation, meeting_view, seat_view

    view = seat_view(2, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm",))
    obs = TurnObservation(view, 0, 0, 15, meeting_view(task.meetings[0], 2, task.labels), True, ())
    speak = asyncio.create_task(human.speak(obs))
    await asyncio.sleep(0)
    human.attach(second.append)
    assert second and second[0] is first[0]
    second[0].answer(Reply())
    await speak


async def test_without_an_interface_the_human_seat_is_an_error_not_a_hang():
    human = HumanPersona()
    task = generate_scenario(7)
    seats = make_personas("imap", 5)
    seats[2] = human
    result = await run_game(task, seats, GameConfig(deterministic=True, max_turns_per_round=1))
    errors = [e for e in result.trace["events"] if e["type"] == "parse_error" and e["data"]["agent_id"] == 2]
    assert errors and "no interface" in errors[0]["data"]["detail"]


# -- the batch plan -----------------------------------------------------------------------------
CAL = (Errand(1, 10), None, Errand(2, 1, blocked=True), MeetingCopy(7), Errand(3, 100), None)


def test_plan_moves_what_must_move_to_the_nearest_free_slot_and_matches_the_engine():
    plan = BatchPlan(CAL, meeting_id=9)
    plan.set_target(4)
    assert plan.moves == {4: 5}
    out = plan.check()
    assert isinstance(out, BatchOutcome) and out.cost == 100 and out.scheduled_slot == 4
    assert out == check_batch(CAL, [Reschedule(3, 4, 5), Schedule(9, 4)], meeting_id=9, require_schedule=True)
    # Changing the target undoes the automatic move.
    plan.set_target(1)
    assert plan.moves == {} and isinstance(plan.check(), BatchOutcome) and plan.cost() == 0
    # A blocked slot: the engine's own rule 3 message.
    plan.set_target(2)
    out = plan.check()
    assert isinstance(out, Rejection) and out.rule == 7
    plan.add_move(2)
    assert 2 not in plan.moves  # blocked items are never offered as moves
    plan.moves[2] = 5
    out = plan.check()
    assert isinstance(out, Rejection) and out.rule == 3 and "blocked" in out.message


def test_plan_cycles_destinations_among_free_slots_and_voluntary_has_no_schedule():
    plan = BatchPlan(CAL, meeting_id=9)
    plan.set_target(0)
    assert plan.moves == {0: 1}
    assert plan.cycle_destination(0, 1) == 5
    assert plan.cycle_destination(0, 1) == 1
    vol = BatchPlan(CAL, meeting_id=9, require_schedule=False)
    assert isinstance(vol.check(), BatchOutcome) and vol.actions() == []
    assert vol.add_move(3) and vol.moves == {3: 1}
    assert isinstance(vol.check(), BatchOutcome) and vol.cost() == 1
    assert "No moves" in " ".join(BatchPlan(CAL, meeting_id=9, require_schedule=False).describe())


# -- what seat i may see of an event --------------------------------------------------------------
def test_seat_event_keeps_only_what_the_seat_may_see():
    dm = {"seq": 5, "type": "dm_sent", "data": {"round": 0, "turn": 0, "phase": "CHEAP_TALK", "agent_id": 0,
                                                  "from_agent": 0, "to_agent": 3, "content": "x", "channel": "dm"}}
    assert seat_event(dm, 2) is None
    assert seat_event(dm, 3)["content"] == "x"
    ts = {"seq": 6, "type": "turn_start", "data": {"round": 0, "turn": 0, "phase": "CHEAP_TALK", "agent_id": 0,
                                                     "calendar_render": "Slot 0: Errand #1", "prompt_sent": "p"}}
    assert seat_event(ts, 2) == {"type": "turn_start", "seq": 6, "round": 0, "turn": 0, "phase": "CHEAP_TALK",
                                 "agent_id": 0}
    ba = {"seq": 7, "type": "batch_applied", "data": {"round": 0, "turn": 0, "phase": "DECISION", "agent_id": 0,
                                                        "calendar_after": [None], "cost": 10, "actions": []}}
    assert "calendar_after" not in seat_event(ba, 2) and "cost" not in seat_event(ba, 2)
    assert seat_event(ba, 0)["cost"] == 10
    res = {"seq": 8, "type": "resolution", "data": {"round": 0, "turn": 0, "phase": "RESOLUTION", "agent_id": None,
                                                      "meeting_id": 1, "per_agent_slot": {"0": 3, "1": 3},
                                                      "coordinated": True, "calendars": [["a"], ["b"], ["c"]]}}
    assert seat_event(res, 2) == {"type": "resolution", "seq": 8, "round": 0, "turn": 0, "phase": "RESOLUTION",
                                  "agent_id": None, "participant": False, "my_calendar": ["c"]}
    assert seat_event(res, 1)["my_slot"] == 3 and seat_event(res, 1)["my_calendar"] == ["b"]
    assert seat_event({"seq": 9, "type": "reflection", "data": {"agent_id": 0}}, 0) is None


def test_end_screen_vps_split_shows_no_negative_part():
    from calbench_tui.screens.end import vps_split_text

    m = {"vps": 49.9, "typed_vps": 50.0, "freetext_vps": -0.1, "gossip_vps": 0.0}
    text = vps_split_text(m)
    assert text == "≈ all from typed" and "-" not in text
    assert vps_split_text({"vps": 40.0, "typed_vps": 30.0, "freetext_vps": 10.0, "gossip_vps": 0.0}) \
        == "≈ 75% typed, 25% free text"
    assert vps_split_text({"vps": 0.0, "typed_vps": 0.0, "freetext_vps": 0.0, "gossip_vps": 0.0}) is None
    assert vps_split_text({"vps": 3.0}) is None


def test_seat_table_vps_parts_add_up_to_the_total():
    """Issue 30 item 10: "17.8 (≈18.5+0)" had parts larger than the total; a negative part is
    shown with its sign, so the parts add up (and "-0.1" never reads as "+-0.1")."""
    from rich.console import Console

    from calbench_tui.widgets.metrics import seat_table

    rec = {"vps": 17.8, "vps_typed": 18.5, "vps_free_text": -0.7, "meetings_scheduled": 1, "meetings_assigned": 1}
    c = Console(width=120, record=True)
    c.print(seat_table({"metrics": {"per_seat": [rec]}, "config": {"agents": [{"model": "imap"}]}}, None))
    text = c.export_text()
    assert "17.8 (18.5−0.7)" in text and "≈" not in text and "+-" not in text


def test_seats_bar_cells_abbreviate_kinds_instead_of_cutting_them():
    from calbench_tui.widgets.seats import fit_cell

    width = (80 - 2 - 4) // 5  # five seats at 80 columns
    # the protocol keeps the name the setup screen gives it; the state shortens first
    assert fit_cell(0, "sdmap", "waiting", width) == "0:sdmap wait"
    assert fit_cell(0, "sdmap", "thinking…", width) == "0:sdmap think…"
    assert fit_cell(1, "dsm-welfare", "thinking…", width) == "1:dsmW think…"
    assert fit_cell(3, "imap", "waiting", width) == "3:imap waiting"
    for kind in ("sdmap", "dsm-welfare", "dsm-private", "imap", "gpt-4o-mini"):
        for desc in ("waiting", "thinking…", "playing", "done", "failed", "slow 12s"):
            cell = fit_cell(4, kind, desc, width)
            assert len(cell) <= width and "sdma " not in cell and not cell.startswith("4:sdma…")
            assert not (cell.startswith("4:sdma") and not cell.startswith("4:sdmap"))  # never cut mid-word
    assert fit_cell(2, "sdmap", "waiting", 30) == "2:sdmap waiting"  # room enough: the full name


# -- settings -------------------------------------------------------------------------------------------
def test_channels_parse_and_bad_ones_are_one_line_errors():
    assert parse_channels("dm") == ("dm",)
    assert parse_channels("all,dm") == ("dm", "all_groupchat")
    assert parse_channels("dm+participant") == ("dm", "participant_groupchat")
    assert parse_channels("every") == ("dm", "participant_groupchat", "all_groupchat")
    with pytest.raises(SettingsError, match="unknown channel 'sms'"):
        parse_channels("dm,sms")


def test_keymap_file_is_read_strictly(tmp_path):
    ids = ["end_turn", "propose"]
    p = tmp_path / "keys.toml"
    with pytest.raises(SettingsError, match="does not exist"):
        load_keymap(p, ids)  # a file named explicitly must exist
    p.write_text('[keys]\nend_turn = "ctrl+t"\n')
    assert load_keymap(p, ids) == {"end_turn": "ctrl+t"}
    p.write_text('[keys]\nend_trun = "ctrl+t"\n')
    with pytest.raises(SettingsError, match="unknown binding id 'end_trun'"):
        load_keymap(p, ids)
    p.write_text('[colours]\nx = 1\n')
    with pytest.raises(SettingsError, match="unknown table"):
        load_keymap(p, ids)
    p.write_text('[keys]\nend_turn = 3\n')
    with pytest.raises(SettingsError, match="must be a non-empty string"):
        load_keymap(p, ids)
    p.write_text('[keys\n')
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_keymap(p, ids)


# -- the engine's resume hook (run_game(..., resume_events=...)) -------------------------------------
async def test_resume_folds_complete_rounds_and_finishes_like_an_uninterrupted_game():
    task = generate_scenario(11)
    full = await run_game(task, make_personas("imap", 5), GameConfig(deterministic=True))
    events = full.trace["events"]
    # Cut inside round 2 (index 2): the partial round is set aside (kept) and replayed.
    cut = next(e["seq"] for e in events if e["type"] == "turn_end" and e["data"]["round"] == 2)
    prefix = [e for e in events if e["seq"] <= cut]

    class Recorder:
        def __init__(self, inner):
            self.inner, self.kind, self.model, self.got = inner, inner.kind, inner.model, None

        async def register(self, b):
            return await self.inner.register(b)

        async def resume(self, evs):
            self.got = evs

        async def speak(self, o):
            return await self.inner.speak(o)

        async def volunteer(self, o):
            return await self.inner.volunteer(o)

        async def decide(self, o):
            return await self.inner.decide(o)

    seats = make_personas("imap", 5)
    seats[3] = rec = Recorder(seats[3])
    sink = ListSink()
    again = await run_game(task, seats, GameConfig(deterministic=True), sink, game_id=full.game_id,
                           resume_events=prefix)
    ev2 = again.trace["events"]
    aside = again.trace["interrupted_events"]
    assert aside == [e for e in prefix if e["seq"] > resume_point(prefix)]
    assert sorted(e["seq"] for e in ev2 + aside) == list(range(len(ev2) + len(aside)))
    assert sink.events[0]["type"] == "round_restarted"
    assert sink.events[0]["data"]["round"] == 2  # nothing of rounds 0-1 is emitted again
    assert sum(1 for e in ev2 if e["type"] == "game_start") == 1
    res1 = [e["data"]["state_hash"] for e in events if e["type"] == "resolution"]
    res2 = [e["data"]["state_hash"] for e in ev2 if e["type"] == "resolution"]
    assert res1 == res2  # the scripted seats recompute the same game
    assert again.metrics["meetings_scheduled"] == full.metrics["meetings_scheduled"]
    assert again.trace["final_state"]["per_agent_messages_sent"] == full.trace["final_state"]["per_agent_messages_sent"]
    # A persona with resume() got its own earlier events only.
    assert rec.got and all(e["data"]["agent_id"] == 3 for e in rec.got)


async def test_resume_refuses_a_tampered_prefix():
    task = generate_scenario(11)
    full = await run_game(task, make_personas("imap", 5), GameConfig(deterministic=True))
    import copy

    events = copy.deepcopy(full.trace["events"])
    res = next(e for e in events if e["type"] == "resolution")
    res["data"]["state_hash"] = "0" * 16
    last = max(e["seq"] for e in events if e["type"] == "resolution" and e["data"]["round"] == 1)
    with pytest.raises(ValueError, match="does not fold"):
        await run_game(task, make_personas("imap", 5), GameConfig(deterministic=True),
                       resume_events=[e for e in events if e["seq"] <= last])


def test_play_words_keep_the_engines_words_and_add_the_key_where_they_name_none():
    """calbench-play shows the engine's rejection (a researcher reads the same in the trace);
    the two count rules, whose words name no key, get what to press (found by hand: "✗
    Expected exactly 1 schedule action, got 0" beside rule messages that say what broke)."""
    from calbench_tui.wording import play_words

    assert play_words("Expected exactly 1 schedule action, got 0") == (
        "Expected exactly 1 schedule action, got 0 — pick a slot for the meeting first: enter on a slot")
    assert play_words("Expected exactly 1 schedule action, got 2").endswith("enter on the slot you want")
    rule7 = "Rule 7 (schedule slot not free): slot 3 holds Errand #4"
    assert play_words(rule7) == rule7


def test_costs_shared_for_slots_none_of_which_is_free_do_not_say_the_calendar_has_no_free_slot():
    """Sharing costs for marked slots (or the slots asked about) speaks of those slots only:
    "no free slot" read as the whole calendar (found by hand with four free slots elsewhere).
    The sentence still reads back as the costs it states, and so does the older wording."""
    from personas import quick

    (msg,) = quick.share_costs(2, 1, {1: None, 3: 1}, channel="dm", to=[0], protocol=None)
    assert msg.content == "My costs for meeting M1: none of these slots is free; slot 3 cost 1; I can't do slot 1."
    assert quick.read_shared_costs(msg.content, 16) == {3: 1, 1: None}
    old = "My costs for meeting M1: no free slot; slot 3 cost 1; I can't do slot 1."
    assert quick.read_shared_costs(old, 16) == {3: 1, 1: None}


def test_a_meeting_that_ended_apart_is_not_said_to_break_when_moved():
    """The person's seat model remembers the meetings of theirs that ended apart (from their
    own resolution events); moving their copy of one is not said to "break it: Agents 1 and 3
    keep their copies at slot 5" — where the others' copies are is not the seat's to know
    (found by hand: the others' copies were at slot 2)."""
    from calbench_tui.screens.decision import batch_warnings
    from calbench_tui.widgets.batch import BatchPlan
    from engine.model import MeetingCopy
    from personas.seat_model import SeatModel

    m = SeatModel(2, ("dm",), 5)
    m.apply({"type": "resolution", "round": 0, "meeting_id": 1, "participant": True, "coordinated": False,
             "my_slot": 5})
    m.apply({"type": "resolution", "round": 1, "meeting_id": 2, "participant": True, "coordinated": True,
             "my_slot": 7})
    assert m.apart == {1}
    cal = [None] * 8
    cal[5], cal[7] = MeetingCopy(1), MeetingCopy(2)
    plan = BatchPlan(cal, meeting_id=3)
    plan.set_target(0)
    plan.add_move(5)
    plan.add_move(7)
    words = batch_warnings(plan, talk=[0], seat=2, participants={1: (1, 2, 3), 2: (0, 2, 4)}, decision=True,
                           apart=m.apart)
    ghost = next(w for w in words if w.startswith("M1"))
    assert "was not coordinated" in ghost and "keep" not in ghost
    assert any(w.startswith("Moving M2 from slot 7") and "breaks it: Agents 0 and 4 keep" in w for w in words)


def test_the_help_names_the_protocols_at_the_table_not_always_imap():
    """The help said "The other seats follow IMAP by default: ..." at a table of SD-MAP seats
    (found by hand); it now names each protocol there in its one line.  An all-IMAP table keeps
    the IMAP paragraph, and a blinded study game still names no protocol."""
    from calbench_tui.screens.help import game_text

    mixed = game_text(False, num_agents=5, partners=["sdmap", "sdmap", "human", "dsm-private", "sdmap"])
    assert "follow IMAP" not in mixed and "• sdmap: proposes one slot at a time" in mixed
    assert "• dsm-private:" in mixed and mixed.count("• sdmap") == 1 and "human" not in mixed
    assert "follow IMAP by default" in game_text(False, partners=["imap", "imap", "human", "imap", "imap"])
    blind = game_text(True, partners=["sdmap", "sdmap", "human", "dsm-private", "sdmap"])
    assert "sdmap" not in blind and "Your partners are the other seats" in blind


def test_a_message_queued_after_the_last_rounds_talk_is_not_promised_a_later_round():
    """Writing in the last round's DECISION said "sent on your next turn ... in a later round",
    and there is none (found by hand): the seat model knows the talk is over for good."""
    from personas.seat_model import SeatModel

    m = SeatModel(2, ("dm",), 5, num_rounds=2)
    m.apply({"type": "round_start", "round": 0, "meeting": {"id": 1, "participants": [0, 2, 4],
                                                            "speaker_order": [0, 2, 4]}})
    m.batch(object())
    assert m.talk_left  # round 1 of 2: a later round's talk comes
    m.batch_request = None
    m.apply({"type": "round_start", "round": 1, "meeting": {"id": 2, "participants": [1, 2, 3],
                                                            "speaker_order": [1, 2, 3]}})
    assert m.talk_left  # the last round's talk is on
    m.batch(object())
    assert not m.talk_left  # its DECISION: nothing more is sent
