"""Scripted partners answer a person (issue 29): a proposal made with the quick key ``p`` or
typed in English gets a DM in the same round ("works for me" / "can't, but I could do …"),
the meeting converges, a question is answered, talk goes on until the person is answered,
DSM-Private says no more than its rule allows, and the person-like simulated participant
plays the same game for the same seed.

The person here is driven through the seat model and the quick actions of a person's keys
(``personas/seat_model.py``, ``personas/quick.py``), fed by the seat's projected events, as
the game screen is."""

from __future__ import annotations

import json

import pytest

from engine.events import MESSAGE_EVENTS
from engine.game import GameConfig, run_game
from engine.model import MeetingCopy
from engine.observe import seat_event
from engine.privacy import belief_updates
from engine.protocol import read_text
from engine.seats import Reply
from lab.gamespec import resolve_task
from personas.base import clear_and_schedule
from personas.person_like import PersonLikePersona
from personas.registry import make_personas
from personas.seat_model import SeatModel

from doubles import E, hand_task

PROTOCOLS = ("imap", "sdmap", "dsm-welfare", "dsm-private")


class _Req:
    def __init__(self, obs):
        self.obs = obs
        self.reply = None
        self.done = False

    def answer(self, reply):
        self.reply, self.done = reply, True
        return True


class Keys:
    """A person at the keys: ``script(model, obs)`` presses keys on the seat model (quick
    actions, typed words) at each talk turn; DECISION schedules ``slot()`` (default: the
    person's latest proposal)."""

    kind = "test"
    model = "keys"

    def __init__(self, seat, script, slot=None):
        self.seat, self.script, self.slot = seat, script, slot
        self.m: SeatModel | None = None
        self.proposed: list[int] = []
        self.turns: list = []  # (round, turn, inbox contents) of every talk turn

    async def emit(self, event):  # the screen: the seat's projected events
        view = seat_event(event, self.seat)
        if view is None:
            return
        if view["type"] == "game_start":
            self.m = SeatModel(self.seat, view["communication_protocol"].split("+"), view["num_agents"])
        self.m.apply(view)

    async def register(self, briefing):
        self.m.register(briefing)

    async def speak(self, obs):
        self.turns.append((obs.round, obs.turn, [d.content for d in obs.inbox]))
        req = _Req(obs)
        self.m.speak(req)
        self.script(self, obs)
        self.m.end_turn()
        return req.reply

    def press_p(self, slot):
        out = self.m.quick("propose", cursor=slot, selected=[slot])
        assert not out.warning, out.warning
        self.proposed.append(slot)

    def type(self, text, slot):
        self.m.write(text)
        self.proposed.append(slot)

    async def volunteer(self, obs):
        return Reply()

    async def decide(self, obs):
        s = self.slot() if self.slot else self.proposed[-1]
        return Reply(actions=tuple(clear_and_schedule(obs.view.calendar, obs.meeting.id, s)))


async def play(task, protocol, person):
    seats = make_personas(protocol, task.num_agents)
    seats[person.seat] = person
    return await run_game(task, seats, GameConfig(deterministic=True), person)


def msgs(trace, rnd=0):
    return [e for e in trace["events"] if e["type"] in MESSAGE_EVENTS and e["data"]["round"] == rnd]


def answers_to(trace, person, partner, after_seq, rnd=0):
    """DMs ``partner`` sent ``person`` in round ``rnd`` after event ``after_seq``."""
    return [e["data"] for e in msgs(trace, rnd) if e["seq"] > after_seq and e["data"]["from_agent"] == partner
            and e["data"].get("to_agent") == person and e["data"]["channel"] == "dm"]


def proposal_seqs(trace, person, rnd=0):
    return [e["seq"] for e in msgs(trace, rnd) if e["data"]["from_agent"] == person]


def scheduled_at(res, meeting_id, participants):
    slots = {next((s for s, it in enumerate(res.state.calendars[p]) if it == MeetingCopy(meeting_id)), None)
             for p in participants}
    return slots.pop() if len(slots) == 1 else None


def free_table(n_slots=8, blocked=None):
    """Seat 0 (the person) leads meeting M1 with seats 1 and 2; ``blocked``: {seat: [slots]}."""
    cals = [[None] * n_slots for _ in range(3)]
    for seat, slots in (blocked or {}).items():
        for k, s in enumerate(slots):
            cals[seat][s] = E(10 + 3 * seat + k, 5, True)
    return hand_task(cals, [[0, 1, 2]])


def how_to_propose(how):
    def script(keys, obs):
        if obs.turn == 0:
            if how == "p":
                keys.press_p(5)
            elif how == "free-at":
                keys.type("I'm free at slot 5, does that work?", 5)
            else:
                keys.type("Hi both, how about slot 5?", 5)
    return script


def evidence(task, trace, target, observer):
    """Per slot, the last belief of ``observer`` about ``target`` after round 0 (VPS rows)."""
    out = {}
    for row in belief_updates(task, trace["events"]):
        if row["round"] == 0 and row["target"] == target and row["observer"] == observer:
            out[row["slot"]] = (row["evidence"], row["strength"])
    return out


# -- 1. a slot free for everyone: "works for me", in the same round, and the meeting is held ----------
@pytest.mark.parametrize("how", ["p", "typed", "free-at"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_proposal_free_for_all_gets_a_yes_in_the_same_round_and_is_scheduled(protocol, how):
    task = free_table()
    person = Keys(0, how_to_propose(how))
    res = await play(task, protocol, person)
    first = proposal_seqs(res.trace, 0)[0]
    for partner in (1, 2):
        got = answers_to(res.trace, 0, partner, first)
        assert got, f"{protocol}: agent {partner} did not answer the proposal ({how})"
        assert 5 in read_text(got[0]["content"], task.num_slots).works
        assert "(PENDING)" not in got[0]["content"] or (protocol, how) == ("sdmap", "p")
        # what the answer says is scored as typed evidence: slot 5 works for the partner, outright
        assert evidence(task, res.trace, partner, 0)[5] == (1.0, 1.0)
    assert scheduled_at(res, 1, (0, 1, 2)) == 5


# -- 2. a slot busy for a partner: "can't, but I could do …", then the meeting converges ------------
def walk_to_alternative(how):
    """Propose 5; when a partner says no, propose the first slot it could do instead."""
    def script(keys, obs):
        if obs.turn == 0:
            how_to_propose(how)(keys, obs)
            return
        for text in keys.turns[-1][2]:
            r = read_text(text, 8)
            if keys.proposed[-1] in r.fails and r.works:
                slot = sorted(r.works)[0]
                if how == "p":
                    keys.press_p(slot)
                else:
                    keys.type(f"OK, how about slot {slot}?", slot)
                return
    return script


@pytest.mark.parametrize("protocol, how", [("imap", "p"), ("imap", "typed"), ("sdmap", "typed"),
                                           ("dsm-welfare", "p"), ("dsm-welfare", "typed"),
                                           ("dsm-private", "p"), ("dsm-private", "typed")])
async def test_a_busy_slot_gets_cant_with_alternatives_and_the_meeting_converges(protocol, how):
    task = free_table(blocked={1: [0, 1, 5]})
    person = Keys(0, walk_to_alternative(how))
    res = await play(task, protocol, person)
    first = proposal_seqs(res.trace, 0)[0]
    (no, *_) = answers_to(res.trace, 0, 1, first)
    assert no["payload"]["kind"] == "answer" and no["payload"]["cannot"] == [5]
    alts = no["payload"]["alternatives"]
    assert alts and 5 not in alts and not {0, 1} & set(alts)  # slots agent 1 can really hold
    assert len(alts) == (1 if protocol == "dsm-private" else 3)  # DSM-Private says less
    r = read_text(no["content"], task.num_slots)
    assert r.fails == {5} and r.works == set(alts) and "(" not in no["content"].split("could do")[0]
    assert person.proposed == [5, alts[0]]
    assert scheduled_at(res, 1, (0, 1, 2)) == alts[0]


async def test_sdmap_answers_a_busy_slot_proposed_with_p_and_the_person_walks_on():
    # SD-MAP's typed reply to a typed propose is the protocol's own (IMPOSSIBLE): the person
    # proposes the next slot and the meeting is held there.
    def script(keys, obs):
        if obs.turn == 0:
            keys.press_p(5)
        elif any(f"slot {keys.proposed[-1]} is impossible" in t.lower() for t in keys.turns[-1][2]):
            keys.press_p(keys.proposed[-1] + 1)
    task = free_table(blocked={1: [5]})
    person = Keys(0, script)
    res = await play(task, "sdmap", person)
    assert person.proposed == [5, 6] and scheduled_at(res, 1, (0, 1, 2)) == 6


# -- 3. typed questions get an answer, also from a partner that leads ----------------------------------
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_typed_question_about_slots_is_answered_by_the_meeting_leader(protocol):
    # the person (seat 2) is a responder; the bot at seat 0 leads the meeting
    task = hand_task([[None] * 8, [None] * 8, [None] * 8], [[0, 1, 2]])
    asked = []

    def script(keys, obs):
        if obs.turn == 0:
            keys.m.write("Which slots work for you? What are your costs?", to=0, channel="dm")
            asked.append(obs.turn)

    person = Keys(2, script, slot=lambda: 0)
    res = await play(task, protocol, person)
    q = next(e["seq"] for e in msgs(res.trace) if e["data"]["from_agent"] == 2 and "?" in e["data"]["content"])
    got = [d for d in answers_to(res.trace, 2, 0, q) if read_text(d["content"], 8).works
           or (d.get("payload") or {}).get("kind") == "costs"]
    assert got, f"{protocol}: the leader did not answer the question"


# -- 4. talk does not end before the person is answered --------------------------------------------------
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_person_led_meeting_does_not_end_talk_before_the_answer(protocol):
    # A person who leads proposes again and again (three slots agent 1 cannot do, then one it
    # can), each time after reading the answers: every proposal is answered by both partners
    # in the round (no cap of two answers a round), talk lasts until the last one is, and the
    # meeting is held at the slot everyone said works.
    slots = [5, 4, 3, 6]

    def script(keys, obs):
        if obs.turn == 0 or (keys.turns[-1][2] and len(keys.proposed) < len(slots)):
            s = slots[len(keys.proposed)]
            keys.type(f"How about slot {s}?", s)

    task = free_table(blocked={1: [3, 4, 5]})
    person = Keys(0, script)
    res = await play(task, protocol, person)
    assert person.proposed == slots
    for seq in proposal_seqs(res.trace, 0):
        for partner in (1, 2):
            assert answers_to(res.trace, 0, partner, seq), f"{protocol}: a proposal went unanswered"
    assert scheduled_at(res, 1, (0, 1, 2)) == 6


@pytest.mark.parametrize("protocol, how", [("imap", "p"), ("sdmap", "typed"), ("dsm-welfare", "p"),
                                           ("dsm-private", "p")])
async def test_a_person_who_misses_the_turn_after_a_no_is_reminded_and_the_meeting_converges(protocol, how):
    # the person speaks first in the sweep; after agent 1's "can't" it misses its next turn (a
    # sweep with nothing from it): agent 1 offers its alternatives once more, so talk goes on,
    # and the person takes the first one
    def script(keys, obs):
        if obs.turn == 0:
            how_to_propose(how)(keys, obs)
        elif obs.turn >= 2 and len(keys.proposed) == 1:
            for text in keys.turns[-1][2]:
                r = read_text(text, 8)
                if r.proposed:
                    keys.press_p(r.proposed[0]) if how == "p" else keys.type(f"OK, slot {r.proposed[0]}?",
                                                                             r.proposed[0])
                    return

    task = free_table(blocked={1: [5]})
    person = Keys(0, script)
    res = await play(task, protocol, person)
    from_1 = [d["content"] for d in answers_to(res.trace, 0, 1, proposal_seqs(res.trace, 0)[0])]
    assert from_1[0].startswith("I can't do slot 5") and from_1[1].startswith("Could we do slot")
    assert len(person.proposed) == 2 and scheduled_at(res, 1, (0, 1, 2)) == person.proposed[1]


@pytest.mark.parametrize("again", ["p", "typed"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_the_leaders_a_confirms_the_slot_it_proposed_last(protocol, again):
    # p 3 (agent 1 cannot), p 4 or "how about slot 4?" (both can), then a: the person confirms 4
    # — not 3, the slot the first answer named — and the meeting is held at 4
    def script(keys, obs):
        if obs.turn == 0:
            keys.press_p(3)
        elif len(keys.proposed) == 1 and keys.turns[-1][2]:
            keys.press_p(4) if again == "p" else keys.type("How about slot 4?", 4)
        elif len(keys.proposed) == 2 and keys.turns[-1][2] and not keys.confirmed:
            out = keys.m.quick("accept", cursor=0)
            keys.confirmed = [m.content for m in out.messages]

    task = free_table(blocked={1: [3]})
    person = Keys(0, script)
    person.confirmed = None
    res = await play(task, protocol, person)
    assert person.confirmed and all("slot 4" in c for c in person.confirmed)
    assert scheduled_at(res, 1, (0, 1, 2)) == 4
    if protocol != "sdmap":  # the agreement is acknowledged (SD-MAP's confirm is its protocol's own)
        last = [e for e in msgs(res.trace) if e["data"]["from_agent"] == 0][-1]["seq"]
        for partner in (1, 2):
            assert [d["content"] for d in answers_to(res.trace, 0, partner, last)] == ["Agreed, slot 4 it is."]


# -- 5. DSM-Private reveals no more than its rule allows --------------------------------------------------
async def test_dsm_private_answer_reveals_no_more_than_one_offer_and_one_score():
    # scored by engine/privacy.py: DSM-Private's "can't" moves the person's belief about two
    # slots of agent 1 (the one asked, one alternative: what one offer of its and one score
    # reveal), DSM-Welfare's about four (the one asked, three alternatives)
    task = free_table(blocked={1: [5]})
    walk = walk_to_alternative("p")
    runs = {}
    for protocol in ("dsm-private", "dsm-welfare"):
        res = await play(task, protocol, Keys(0, walk))
        first = proposal_seqs(res.trace, 0)[0]
        no_seq = next(e["seq"] for e in msgs(res.trace) if e["seq"] > first and e["data"]["from_agent"] == 1
                      and e["data"].get("to_agent") == 0)  # agent 1's answer to the first proposal
        rows = [r for r in belief_updates(task, res.trace["events"])
                if r["target"] == 1 and r["observer"] == 0 and r["seq"] == no_seq]
        assert rows and {r["source"] for r in rows} == {"answer"}
        runs[protocol] = {r["slot"] for r in rows}
    # the slot asked about and one alternative (l_max = 2 slots, as one DSM-Private offer), never more
    assert len(runs["dsm-private"]) == 2 and 5 in runs["dsm-private"]
    assert len(runs["dsm-welfare"]) == 4


# -- 6. the person-like simulated participant ---------------------------------------------------------------
async def _person_like_game(seed, protocol="imap"):
    task = resolve_task("canonical:2")
    seats = make_personas(protocol, task.num_agents)
    person = PersonLikePersona(2, seed=seed)
    seats[2] = person
    res = await run_game(task, seats, GameConfig(deterministic=True), person.sink)
    return res, person


async def test_person_like_policy_is_deterministic_per_seed():
    a, pa = await _person_like_game(3)
    b, pb = await _person_like_game(3)
    assert json.dumps(a.trace, sort_keys=True) == json.dumps(b.trace, sort_keys=True)
    assert pa.log == pb.log and any(x["action"] == "propose" for x in pa.log)
    logs = {json.dumps((await _person_like_game(s))[1].log) for s in range(6)}
    assert len(logs) > 1  # the seed matters: slots, words and missed turns differ


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_person_like_leads_with_a_free_slot_and_gets_its_meetings(protocol):
    res, person = await _person_like_game(0, protocol)
    task = resolve_task("canonical:2")
    props = [x for x in person.log if x["action"] == "propose"]
    assert {x["round"] for x in props} >= {0, 1}  # it leads M1 and M2
    first = [x for x in props if x["round"] == 0][0]
    assert task.calendars[2][first["slot"]] is None  # a slot free for it
    mine = [m for m in task.meetings if 2 in m.participants]
    assert sum(scheduled_at(res, m.id, m.participants) is not None for m in mine) >= 2


# -- a person who does not lead proposes after the IMAP initiator's decision --------------------------
def _propose_after_the_decision(slot):
    """Seat 1 (not the leader): at the first turn that brings the initiator's decision, press p
    on ``slot``; in DECISION, schedule the initiator's latest decision to it."""
    def script(keys, obs):
        if not keys.proposed and any(read_text(t, 8).decided is not None or "Decision" in t
                                     for t in keys.turns[-1][2]):
            keys.press_p(slot)
    return script


async def test_imap_initiator_takes_up_a_slot_a_non_leading_person_proposes_when_everyone_can_hold_it():
    """Before: the initiator ignored a typed proposal (quick key p) from a participant who does
    not lead, and the other responder took the person's slot — the meeting ended as a ghost
    (copies at 2 and 5, found by hand).  Now the initiator decides again for the proposed slot
    when every participant can hold it, and the responder follows the initiator."""
    task = free_table()
    person = Keys(1, _propose_after_the_decision(5))  # in DECISION: the slot it proposed
    res = await play(task, "imap", person)
    assert person.proposed == [5]
    first = proposal_seqs(res.trace, 1)[-1]
    again = [d for d in answers_to(res.trace, 1, 0, first) if d["payload"]["kind"] == "decision"]
    assert again and again[0]["payload"]["slot"] == 5  # the initiator's new decision
    assert scheduled_at(res, 1, (0, 1, 2)) == 5


async def test_imap_initiator_keeps_its_decision_when_a_proposed_slot_does_not_suit_everyone():
    """Agent 2 cannot hold slot 5: the initiator tells the person its decision again, Agent 2
    does not take the person's slot, and the meeting is held at the decision (no ghost)."""
    task = free_table(blocked={2: [5]})
    decided: list[int] = []

    def script(keys, obs):
        for t in keys.turns[-1][2]:
            r = read_text(t, 8)
            if r.decided is not None:
                decided.append(r.decided)
        _propose_after_the_decision(5)(keys, obs)

    person = Keys(1, script, slot=lambda: decided[-1])
    res = await play(task, "imap", person)
    first = proposal_seqs(res.trace, 1)[-1]
    again = [d for d in answers_to(res.trace, 1, 0, first) if d["payload"]["kind"] == "decision"]
    assert again and again[0]["payload"]["slot"] == decided[0] != 5
    no = answers_to(res.trace, 1, 2, first)
    assert no and no[0]["payload"]["cannot"] == [5]
    assert scheduled_at(res, 1, (0, 1, 2)) == decided[0]
