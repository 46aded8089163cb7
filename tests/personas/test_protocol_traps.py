"""Protocol traps a person at the table fell into against the scripted seats (issue 13, item 2),
pinned with the real engine and the real bots; the "human" is a test seat that sends exactly
what the quick keys or a typed line would.

* SD-MAP answers a proposal with PENDING and waits for a ``confirm``: a human who never sends
  one must not leave a ghost meeting behind; "ok" / "no" in words count as the answer.
* Agent ids, meeting ids, counts and round numbers in free text are not slots.
* A yes or a no in its own sentence answers the slot question just before it.
"""

from __future__ import annotations

import pytest

from engine.actions import Message
from engine.game import GameConfig, run_game
from engine.protocol import read_text
from engine.seats import Reply
from personas import quick
from personas.scripted.imap import IMAPPersona
from personas.scripted.sdmap import SDMAPPersona

from doubles import ScriptPersona, hand_task

S = 16


async def play(task, seats):
    return await run_game(task, seats, GameConfig(deterministic=True))


def sent(trace, sender=None):
    return [e["data"] for e in trace["events"] if e["type"].endswith("_sent")
            and (sender is None or e["data"]["from_agent"] == sender)]


def slot_of(trace, seat: int, meeting_id: int) -> int | None:
    """Where seat's copy of the meeting is after the last resolution."""
    res = [e["data"] for e in trace["events"] if e["type"] == "resolution"][-1]
    return res["per_agent_slot"].get(str(seat))


def _free_table():
    # Three seats, six free slots, one meeting: the bots' own first choice would be slot 0.
    return hand_task([[None] * 6, [None] * 6, [None] * 6], [[0, 1, 2]])


def _human_initiator(then):
    """Seat 0 proposes slot 4 with the quick key (a typed SD-MAP ``propose``), then ``then``."""
    def first(obs):
        return Reply(actions=tuple(quick.propose(0, obs.meeting.id, [4], channel="dm", to=[1, 2],
                                                 protocol="sdmap", initiator=True)))
    return ScriptPersona(speak=[first, then] + [Reply()] * 40, plan={1: 4})


async def test_sdmap_takes_silence_after_pending_as_consent_no_ghost():
    bots = [SDMAPPersona(), SDMAPPersona()]
    res = await play(_free_table(), [_human_initiator(Reply()), *bots])
    replies = [d for d in sent(res.trace) if (d.get("payload") or {}).get("kind") == "reply"]
    assert {(d["from_agent"], d["payload"]["slot"], d["payload"]["status"]) for d in replies} \
        == {(1, 4, "PENDING"), (2, 4, "PENDING")}
    # The human never sent a confirm; the bots still hold the meeting where it was proposed.
    assert res.metrics["meetings_scheduled"] == 1
    assert [slot_of(res.trace, a, 1) for a in range(3)] == [4, 4, 4]


@pytest.mark.parametrize("words", ["ok", "Yes, confirmed.", "confirm", "Slot 4 works, thanks."])
async def test_sdmap_reads_a_worded_confirmation(words):
    def then(obs):
        return Reply(actions=tuple(Message("dm", words, to) for to in (1, 2)))

    bots = [SDMAPPersona(), SDMAPPersona()]
    res = await play(_free_table(), [_human_initiator(then), *bots])
    assert all(b.rs.agreed == 4 and b.rs.extra["state"] == "confirmed" for b in bots)
    assert [slot_of(res.trace, a, 1) for a in range(3)] == [4, 4, 4]


async def test_sdmap_drops_the_pending_slot_on_a_worded_no():
    def then(obs):
        return Reply(actions=tuple(Message("dm", "No.", to) for to in (1, 2)))

    bots = [SDMAPPersona(), SDMAPPersona()]
    res = await play(_free_table(), [_human_initiator(then), *bots])
    assert all(b.rs.agreed is None and b.rs.extra["pending"] is None for b in bots)
    assert slot_of(res.trace, 1, 1) != 4 and slot_of(res.trace, 2, 1) != 4


# -- numbers that are not slots ---------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "Agents 1 and 2: what slots work for you?",
    "Agents 1, 2: which slots are free for you?",
    "Agent 1 and 2, what slots work for meeting M5?",
    "Round 2 of 5: what slots work for you?",
    "We are 3 agents with 4 free slots between us; what works?",
    "Can we meet at 5pm? What slots work?",
])
def test_ids_counts_rounds_and_times_are_not_slots(text):
    assert read_text(text, S).slots == set()


@pytest.mark.parametrize("text, slots", [
    ("Hi Agent 1, 5 works for me.", {5}),
    ("Agents 1 and 2: slot 5 works for me.", {5}),
    ("I have 3 free slots: 4, 5 and 9.", {4, 5, 9}),
    ("Meeting M5 at slot 7?", {7}),
])
def test_slot_numbers_next_to_ids_still_count(text, slots):
    assert read_text(text, S).slots == slots


async def test_bots_do_not_answer_for_slots_nobody_proposed():
    # "Agents 1 and 2: what slots work for you?" once got "Slot 2 works for me" from both.
    def ask(obs):
        return Reply(actions=tuple(Message("dm", "Agents 1 and 2: what slots work for you?", to) for to in (1, 2)))

    bots = [SDMAPPersona(), SDMAPPersona()]
    res = await play(_free_table(), [ScriptPersona(speak=[ask] + [Reply()] * 40, plan={1: 0}), *bots])
    answers = [d["content"] for d in sent(res.trace) if d["from_agent"] in (1, 2)
               and (d.get("payload") or {}).get("kind") == "text"]
    assert answers and all(a.startswith("For meeting M1 I could do slots") for a in answers)
    assert not any("Slot 1 " in a or "Slot 2 " in a for a in answers)


# -- a yes or a no in its own sentence ------------------------------------------------------------------
@pytest.mark.parametrize("text, works, fails", [
    ("Slot 5? No.", set(), {5}),
    ("Slot 5? Nope, sorry.", set(), {5}),
    ("Slot 5? Yes.", {5}, set()),
    ("Slot 5? Yes, that works for me.", {5}, set()),
    ("Slot 5? No. How about slot 7?", set(), {5}),
    ("Is slot 3 free? No. Slot 4 is free.", {4}, {3}),
])
def test_a_separate_yes_or_no_answers_the_question_before_it(text, works, fails):
    r = read_text(text, S)
    assert r.works == works and r.fails == fails
    assert not r.yes and not r.no  # the answer was about a slot
    assert not set(r.mentioned) & fails


async def test_imap_hears_a_separate_no():
    # IMAP (seat 0) asks the human its costs; "Slot 0? No." must keep the decision off slot 0
    # (the reader used to drop the "No." and take slot 0, the lowest of equal unknowns).
    task = hand_task([[None] * 6, [None] * 6], [[0, 1]])

    def answer(obs):
        if any((m.payload or {}).get("kind") == "cost_request" for m in obs.inbox):
            return Reply(actions=(Message("dm", "Slot 0? No.", 0),))
        return Reply()

    res = await play(task, [IMAPPersona(), ScriptPersona(speak=[answer] * 40, plan={1: 1})])
    [decision] = [d for d in sent(res.trace, 0) if (d.get("payload") or {}).get("kind") == "decision"]
    assert decision["payload"]["slot"] == 1
    assert res.metrics["meetings_scheduled"] == 1
