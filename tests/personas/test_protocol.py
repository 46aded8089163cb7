"""The shared scripted-protocol pieces: the free-text reader, slot formatting, the
calendar helpers in personas/base.py and the typed-payload convention."""

from __future__ import annotations

import pytest

from engine.actions import Reschedule, Schedule
from engine.model import Errand, MeetingCopy
from engine.observe import Delivered
from personas.base import cheapest_slots, clear_and_schedule, insertion_cost, insertion_costs
from personas.scripted.protocol import fmt_slots, read_text, typed_payload

S = 16


@pytest.mark.parametrize("text, works, fails, proposed", [
    ("I can't do 5, how about 7?", set(), {5}, [7]),
    ("free at 7", {7}, set(), []),
    ("I'm free at 3-5 and 9.", {3, 4, 5, 9}, set(), []),
    ("slots 3 to 5 work for me", {3, 4, 5}, set(), []),
    ("Slot 2 is busy but 8 is open", {8}, {2}, []),
    ("slot 7 works for me, 9 doesn't", {7}, {9}, []),
    ("How about 9?", set(), set(), [9]),
    ("Free: 0, 2, 5; impossible: 1, 6–8.", {0, 2, 5}, {1, 6, 7, 8}, []),
    ("Slot 4 is not available.", set(), {4}, []),
    ("Let's meet at slot 12 instead.", set(), set(), [12]),
    ("yep, 7", {7}, set(), []),
    ("I can do 5 but not 6", {5}, {6}, []),
    ("not 3", set(), {3}, []),
    ("free at 3, not 4", {3}, {4}, []),
    ("I am not sure about slot 4", set(), set(), []),
])
def test_reader_slot_statements(text, works, fails, proposed):
    r = read_text(text, S)
    assert r.works == works
    assert r.fails == fails
    assert r.proposed == proposed


def test_reader_ignores_agent_meeting_errand_numbers_and_out_of_range():
    r = read_text("Agent 3 here: meeting M2 clashes with Errand #7, slot 40 is odd, slot 6 is free.", S)
    assert r.works == {6} and r.fails == set() and r.slots == {6}


def test_reader_costs_and_decisions():
    r = read_text("Slot 3 costs 10; movable at cost 1: 4, 5; slot 2 is free.", S)
    assert r.costs == {3: 10, 4: 1, 5: 1}
    assert r.works == {2, 3, 4, 5}
    d = read_text("Decision for meeting M2: slot 7. Please schedule it there.", S)
    assert d.decided == 7 and d.proposed == [7]
    c = read_text("Confirmed: meeting M2 at slot 5.", S)
    assert c.decided == 5


def test_reader_yes_no_and_questions():
    assert read_text("Yes, sounds good!", S).yes
    assert read_text("No, that doesn't work for me.", S).no
    q = read_text("When are you free?", S)
    assert q.question and not q.slots and not q.yes and not q.no
    a = read_text("Agent 0 asks your costs for meeting M2 at slots 0–3, 5.", S)
    assert a.asked == [0, 1, 2, 3, 5] and not a.works


def test_reader_reads_our_own_english_lines():
    # Every bot's English must be readable by every other bot.
    r = read_text("Agent 3's costs for meeting M2 — free: 0, 4; movable at cost 1: 2, 3; impossible: 1, 5–15.", S)
    assert r.works == {0, 2, 3, 4} and r.fails == {1} | set(range(5, 16)) and r.costs == {2: 1, 3: 1}
    assert read_text("Agent 0 proposes slot 5 for meeting M2 — does it work for you?", S).proposed == [5]
    assert read_text("Slot 5 works for me for meeting M2 (PENDING).", S).works == {5}
    assert read_text("Slot 5 is impossible for me for meeting M2.", S).fails == {5}


def test_fmt_slots_round_trips_through_the_reader():
    slots = [0, 1, 2, 3, 5, 7, 8, 12, 13, 14]
    text = fmt_slots(slots)
    assert text == "0–3, 5, 7, 8, 12–14"
    assert read_text(f"I am free at {text}.", S).works == set(slots)
    assert fmt_slots([]) == "none"


def test_calendar_helpers():
    cal = (None, Errand(1, 10), Errand(2, 1, True), MeetingCopy(4), Errand(3, 1), None)
    assert insertion_costs(cal) == [0, 10, None, None, 1, 0]
    assert [insertion_cost(cal, s) for s in range(6)] == insertion_costs(cal)
    # With every free slot reserved, no errand can move.
    assert insertion_costs(cal, reserved={0, 5}) == [0, None, None, None, None, 0]
    assert cheapest_slots(cal) == [0, 5, 4, 1]
    assert clear_and_schedule(cal, 9, 1) == [Reschedule(1, 1, 0, "make room for the meeting"), Schedule(9, 1)]
    assert clear_and_schedule(cal, 9, 1, reserved={0}) == [Reschedule(1, 1, 5, "make room for the meeting"),
                                                           Schedule(9, 1)]
    assert clear_and_schedule(cal, 9, 2) is None and clear_and_schedule(cal, 9, 3) is None
    # An agreed move of the meeting copy, then the schedule in the slot it freed.
    acts = clear_and_schedule(cal, 9, 3, moves=[(4, 3, 5)])
    assert acts == [Reschedule(4, 3, 5, "agreed move"), Schedule(9, 3)]


def test_typed_payload_convention():
    d = Delivered(0, "dm", 2, "x", 0, 0, {"protocol": "imap", "kind": "costs", "meeting_id": 2}, 1)
    assert typed_payload(d, "imap")["kind"] == "costs"
    assert typed_payload(d, "sdmap") is None  # another protocol: read as free text
    t = Delivered(0, "dm", 2, "x", 0, 0, {"protocol": "imap", "kind": "text", "meeting_id": 2}, 1)
    assert typed_payload(t) is None  # a bot's English line is free text
    assert typed_payload(Delivered(0, "dm", 2, "hello", 0, 0, None, 1)) is None
