"""The human seat's model (personas/seat_model.py), without Textual: real games' projected
events (engine.observe.seat_event) and requests in, state out — the same fed locally and
after the wire's JSON (calbench_tui/remote.py) — and the quick actions it builds."""

from __future__ import annotations

import asyncio
import json

from engine.actions import Message
from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from engine.model import Errand, item_from_json
from engine.observe import seat_event
from engine.suite import canonical_recipe
from engine.wire import observation_from_wire, observation_to_wire
from personas.base import cheapest_common_slot
from personas.human import HumanRequest
from personas.scripted.imap import IMAPPersona
from personas.seat_model import SeatModel


class Shadowed:
    """An IMAP seat whose every request is also handed to a seat model (as the app hands a
    person's requests to the screen); ``wire`` sends observations through engine.wire first."""

    def __init__(self, seat_model: SeatModel, wire: bool = False) -> None:
        self.inner = IMAPPersona()
        self.seat_model = seat_model
        self.wire = wire
        self.kind, self.model = self.inner.kind, self.inner.model  # what the trace records of a seat
        self.snapshots: list[tuple[int, int, dict]] = []  # (round, turn, model state) at each speak

    def _obs(self, obs):
        return observation_from_wire(json.loads(json.dumps(observation_to_wire(obs)))) if self.wire else obs

    async def register(self, briefing):
        self.seat_model.register(self._obs(briefing))
        return await self.inner.register(briefing)

    async def speak(self, obs):
        self.seat_model.speak(HumanRequest("speak", self._obs(obs), obs.view.seat))
        self.snapshots.append((obs.round, obs.turn, state(self.seat_model)))
        return await self.inner.speak(obs)

    async def volunteer(self, obs):
        self.seat_model.batch(HumanRequest("volunteer", self._obs(obs), obs.view.seat))
        return await self.inner.volunteer(obs)

    async def decide(self, obs):
        self.seat_model.batch(HumanRequest("decide", self._obs(obs), obs.view.seat))
        return await self.inner.decide(obs)


class Feed:
    """The app's listener: each event projected for one seat, folded into its model."""

    def __init__(self, model: SeatModel, seat: int, wire: bool = False) -> None:
        self.model, self.seat, self.wire = model, seat, wire
        self.hints: list[tuple[int, object]] = []  # (round, hint)
        self.views: list[dict] = []

    async def emit(self, event):
        view = seat_event(event, self.seat)
        if view is None:
            return
        if self.wire:  # what lab/table.py sends and calbench_tui/remote.py posts
            view = json.loads(json.dumps({"type": "event", "event": view}, default=str))["event"]
        self.views.append(view)
        for h in self.model.apply(view):
            self.hints.append((self.model.round, h))


class Both:
    def __init__(self, *sinks):
        self.sinks = sinks

    async def emit(self, event):
        for s in self.sinks:
            await s.emit(event)


def state(m: SeatModel) -> dict:
    return {"round": m.round, "meeting": (m.meeting_id, tuple(m.participants)), "penalty": m.penalty,
            "calendar": repr(m.calendar), "talk": list(m.talk), "proposal": m.proposal,
            "proposal_kind": m.proposal_kind, "cost_request": m.cost_request,
            "reported": {k: dict(v) for k, v in m.reported.items()}, "agreed": m.agreed_slot(),
            "messages": {k: len(v) for k, v in m.messages.items()}, "game_over": m.game_over,
            "protocols": dict(m.protocols), "num_slots": m.num_slots}


def play(task_index: int, seat: int, *, wire: bool = False):
    task = generate_scenario(**canonical_recipe(task_index))
    model = SeatModel(seat, ("dm",), task.num_agents, num_rounds=len(task.meetings))
    shadow = Shadowed(model, wire=wire)
    seats = [IMAPPersona() for _ in range(task.num_agents)]
    seats[seat] = shadow
    feed = Feed(model, seat, wire=wire)
    from engine.events import ListSink

    log = ListSink()
    res = asyncio.run(run_game(task, seats, GameConfig(deterministic=True), Both(log, feed)))
    return task, res, model, shadow, feed


def decisions_by(trace, seat):
    """round -> the slot seat's IMAP decision messages announced (the last one of the round)."""
    out = {}
    for e in trace["events"]:
        d = e["data"]
        if e["type"] == "dm_sent" and d.get("from_agent") == seat and (d.get("payload") or {}).get("kind") == "decision":
            out[d["round"]] = d["payload"]["slot"]
    return out


# -- the fold over a whole game ------------------------------------------------------------
def test_the_model_ends_where_the_engine_ends_for_the_seat():
    for index, seat in ((0, 0), (3, 2), (7, 4)):
        task, res, model, _, feed = play(index, seat)
        final = res.state
        assert model.game_over
        assert model.round == len(task.meetings) - 1
        assert model.calendar == list(final.calendars[seat])  # the folded calendar is the engine's
        assert model.penalty == final.costs[seat]  # one penalty: the engine's own figure
        seen = [v for v in feed.views if v["type"].endswith("_sent")]
        assert sum(len(v) for v in model.messages.values()) == len(seen)
        assert set(model.messages) <= {f"dm:{a}" for a in range(task.num_agents) if a != seat}
        assert model.batch_request is None  # the last resolution closed the builder


def test_the_human_hint_is_the_slot_imap_decides():
    """Where the seat opens a meeting, the model's cheapest common slot (from the costs the
    others sent) is the slot the IMAP initiator in that seat announces: one best-slot rule."""
    compared = 0
    for index in range(8):
        task = generate_scenario(**canonical_recipe(index))
        for seat in range(task.num_agents):
            if not any(seat == min(m.participants) and len(m.participants) > 1 for m in task.meetings):
                continue
            _, res, _, _, feed = play(index, seat)
            decided = decisions_by(res.trace, seat)
            for rnd, h in feed.hints:
                if h.kind == "cheapest":
                    assert decided.get(rnd) == h.slot, (index, seat, rnd)
                    compared += 1
                elif h.kind == "no_common_slot":
                    assert rnd not in decided
            break
    assert compared >= 5


def test_a_responder_sees_the_ask_and_the_agreed_slot():
    task = generate_scenario(**canonical_recipe(3))
    m = next(m for m in task.meetings if len(m.participants) >= 2)
    seat = max(m.participants)
    rnd = task.meetings.index(m)
    _, res, model, shadow, feed = play(3, seat)
    init = min(m.participants)
    asks = [h for r, h in feed.hints if r == rnd and h.kind == "asks_costs"]
    assert [h.frm for h in asks] == [init]
    decided = decisions_by(res.trace, init).get(rnd)
    assert decided is not None
    # at this seat's last turn of the round the initiator's decision has arrived: it is preselected
    turns = [s for r, _, s in shadow.snapshots if r == rnd]
    assert turns[-1]["cost_request"][0] == init
    assert turns[-1]["agreed"] == decided


def test_the_same_model_over_the_wire():
    """Projected events and observations through JSON (lab/table.py → calbench_tui/remote.py)
    give the same model, snapshot for snapshot."""
    for index, seat in ((1, 1), (5, 3)):
        _, _, local, local_shadow, _ = play(index, seat)
        _, _, remote, remote_shadow, _ = play(index, seat, wire=True)
        assert [s for *_, s in local_shadow.snapshots] == [s for *_, s in remote_shadow.snapshots]
        assert state(local) == state(remote)


# -- hand-made events -------------------------------------------------------------------------
def _round(rnd, mid, parts):
    return {"type": "round_start", "seq": rnd, "round": rnd, "meeting": {"id": mid, "participants": parts}}


def _dm(frm, to, content, payload=None, rnd=0):
    return {"type": "dm_sent", "round": rnd, "turn": 0, "from_agent": frm, "to_agent": to, "channel": "dm",
            "content": content, "payload": payload, "recipients": [to]}


def _calendar(model, items):
    model.apply({"type": "resolution", "round": -1, "participant": False,
                 "my_calendar": [None if it is None else {"errand_id": i, "cost": it[0], **({"blocked": True} if it[1] else {})}
                                 for i, it in enumerate(items)]})


def test_costs_from_every_other_participant_give_the_cheapest_common_slot():
    m = SeatModel(0, ("dm",), 3)
    m.apply({"type": "game_start", "num_slots": 4, "agent_models": ["human", "scripted:imap", "scripted:imap"]})
    _calendar(m, [(5, False), None, (2, False), (1, True)])  # my costs: 5, 0, 2, impossible
    assert m.protocols == {0: None, 1: "imap", 2: "imap"}
    m.apply(_round(0, 7, [0, 1, 2]))
    costs1 = {"protocol": "imap", "kind": "costs", "meeting_id": 7, "costs": {"0": 0, "1": 4, "2": 1, "3": 0}}
    assert [h.kind for h in m.apply(_dm(1, 0, "my costs", costs1))] == ["audience"]
    costs2 = {"protocol": "imap", "kind": "costs", "meeting_id": 7, "costs": {"0": 0, "1": None, "2": 0, "3": 0}}
    hints = m.apply(_dm(2, 0, "my costs", costs2))
    # slot 0: 5+0+0, slot 1: impossible for 2, slot 2: 2+1+0, slot 3: impossible for me
    assert [(h.kind, h.slot, h.total) for h in hints if h.kind == "cheapest"] == [("cheapest", 2, 3)]
    assert m.reported == {1: {0: 0, 1: 4, 2: 1, 3: 0}, 2: {0: 0, 1: None, 2: 0, 3: 0}}
    # the same function IMAP's initiator calls
    assert m.best_common_slot() == cheapest_common_slot({0: 5, 1: 0, 2: 2}, [1, 2], lambda p, s: m.reported[p].get(s))
    m.apply(_round(1, 8, [0, 1]))
    assert m.reported == {} and m.talk == [] and m.proposal is None


def test_no_common_slot_is_said():
    m = SeatModel(0, ("dm",), 2)
    _calendar(m, [None, (1, True)])
    m.apply(_round(0, 1, [0, 1]))
    hints = m.apply(_dm(1, 0, "x", {"protocol": "imap", "kind": "costs", "meeting_id": 1, "costs": {"0": None, "1": 0}}))
    assert [h.kind for h in hints] == ["audience", "no_common_slot"]


def test_a_proposal_and_an_ask_are_read_and_the_agreed_slot_follows():
    m = SeatModel(2, ("dm",), 5)
    _calendar(m, [None] * 6)
    m.apply(_round(0, 3, [1, 2]))
    ask = {"protocol": "imap", "kind": "cost_request", "meeting_id": 3, "slots": [0, 1, 4]}
    hints = m.apply(_dm(1, 2, "Agent 1 asks your costs for meeting M3 at slots 0, 1 and 4.", ask))
    assert [h.kind for h in hints] == ["audience", "asks_costs"] and m.cost_request == (1, [0, 1, 4])
    assert m.talk == [0, 1, 4] and m.agreed_slot() is None
    hints = m.apply(_dm(1, 2, "Decision for meeting M3: slot 4.", {"protocol": "imap", "kind": "decision",
                                                                    "meeting_id": 3, "slot": 4}))
    assert [(h.kind, h.slot) for h in hints] == [("proposes", 4)]
    assert m.proposal == (1, [4]) and m.agreed_slot() == 4
    assert m.messages == {"dm:1": m.messages["dm:1"]} and len(m.messages["dm:1"]) == 2


def test_penalty_has_one_source():
    m = SeatModel(0, ("dm",), 2)
    m.apply({"type": "batch_applied", "agent_id": 0, "cost": 3, "calendar_after": [None, None]})
    m.apply({"type": "batch_applied", "agent_id": 1, "cost": 9})  # another seat's: not mine
    assert m.penalty == 3 and m.calendar == [None, None]


# -- the outbox and the turn ---------------------------------------------------------------------
def _speak_request(loop, seat=0):
    """A real TurnObservation from the engine's own builder (a game's first turn)."""
    task = generate_scenario(**canonical_recipe(0))
    got = {}

    class Catch(IMAPPersona):
        async def speak(self, obs):
            got.setdefault("obs", obs)
            return await super().speak(obs)

    seats = [IMAPPersona() for _ in range(task.num_agents)]
    seats[seat] = Catch()
    loop.run_until_complete(run_game(task, seats, GameConfig(deterministic=True)))
    return HumanRequest("speak", got["obs"], seat, loop.create_future())


def test_end_turn_answers_the_request_with_the_queue_and_a_new_round_keeps_only_what_was_written():
    loop = asyncio.new_event_loop()
    try:
        req = _speak_request(loop)
        obs = req.obs
        m = SeatModel(0, ("dm",), 5)
        m.apply({"type": "game_start", "agent_models": ["human"] + ["scripted:imap"] * 4})
        m.apply(_round(obs.round, obs.meeting.id, list(obs.meeting.participants)))
        m.speak(req)
        assert m.meeting_id == obs.meeting.id and m.calendar == list(obs.view.calendar)
        typed = m.write("hello", channel="dm", to=3)
        assert typed.messages == [Message("dm", "hello", 3)]
        out = m.quick("ask_costs", cursor=0)
        assert out.messages and all(x.payload and x.payload["kind"] == "cost_request" for x in out.messages)
        assert [g[0] for g in m.outbox_groups()] == ["dm", "dm"]
        assert m.unqueue() is out.messages[-1]
        sent = m.end_turn()
        assert m.pending is None and m.outbox == [] and req.future.done()
        reply = req.future.result()
        assert reply.actions == sent and reply.text == "\n".join(x.content for x in sent)
        assert m.end_turn() is None  # not my turn any more
        m.write("see you", channel="dm", to=1)
        m.quick("ask_costs", cursor=0)
        hints = m.apply(_round(obs.round + 1, 99, [0, 1]))
        asked = len(obs.meeting.participants) - 1  # one cost_request DM per other participant
        assert [(h.kind, h.count) for h in hints] == [("kept", 1), ("dropped", asked)]
        assert [x.content for x in m.outbox] == ["see you"]
    finally:
        loop.close()


def test_quick_actions_refuse_in_words():
    m = SeatModel(0, ("dm",), 3)
    assert m.quick("propose", cursor=0, selected=[0]).warning == "No meeting is being negotiated right now."
    _calendar(m, [None, (1, True), (2, False)])
    m.apply(_round(0, 4, [0, 1, 2]))
    blocked = m.quick("propose", cursor=1, selected=[1])
    assert "can't hold slot 1" in blocked.warning and not m.outbox
    share = m.quick("share_costs", cursor=0)
    assert share.confirm and "Nobody asked" in share.warning and not m.outbox
    again = m.quick("share_costs", cursor=0, confirmed=True)
    assert len(again.messages) == 2 and m.outbox == again.messages  # one DM per other participant
    prop = m.quick("propose", cursor=2, selected=[2])
    assert m.my_proposal == [2] and m.talk == [2] and m.agreed_slot() == 2 and prop.messages


def test_route_follows_the_open_groupchat_and_the_game_channels():
    m = SeatModel(1, ("dm", "participant_groupchat"), 5)
    m.apply(_round(0, 2, [0, 1, 3]))
    assert m.route([0, 3]) == ("dm", [0, 3])
    assert m.route([0, 3], "participant_groupchat") == ("participant_groupchat", [])
    g = SeatModel(1, ("all_groupchat",), 5)
    assert g.route([0]) == ("all_groupchat", [])
    outside = SeatModel(4, ("dm",), 5)
    outside.apply(_round(0, 2, [0, 1, 3]))
    assert outside.audience() == [0, 1, 3]
    outside.apply(_dm(3, 4, "are you free at slot 2?"))
    assert outside.audience() == [3]
    w = outside.write("yes")
    assert w.messages == [Message("dm", "yes", 3)]


def test_item_round_trip_of_the_hand_calendar():
    m = SeatModel(0, ("dm",), 2)
    _calendar(m, [(5, False), None])
    assert m.calendar == [item_from_json({"errand_id": 0, "cost": 5}), None]
    assert isinstance(m.calendar[0], Errand)


# -- what the player sees while talking (issue 29.5) -------------------------------------------------
def _imap_table(seat=2, n=5):
    return {"type": "game_start", "num_slots": 4, "agent_models": ["scripted:imap"] * seat + ["human"]
            + ["scripted:imap"] * (n - seat - 1)}


def test_accept_refuses_a_slot_blocked_on_my_calendar_the_way_propose_does():
    m = SeatModel(2, ("dm",), 5)
    m.apply(_imap_table())
    _calendar(m, [None, (1, True), (2, False), None])  # slot 1: an errand that cannot move
    m.apply(_round(0, 4, [0, 1, 2]))
    m.apply(_dm(0, 2, "Decision for meeting M4: slot 1.", {"protocol": "imap", "kind": "decision",
                                                           "meeting_id": 4, "slot": 1}))
    assert m.proposal == (0, [1])
    proposed = m.quick("propose", cursor=1, selected=[1])
    accepted = m.quick("accept", cursor=1)
    assert not m.outbox and m.talk == [1]  # nothing queued; the talk is still the proposal, not my yes
    # one rule, one sentence: the same refusal opens both warnings
    rule = "You can't hold slot 1: it is taken on your calendar by something that cannot move."
    assert proposed.warning.startswith(rule) and accepted.warning.startswith(rule)
    assert "d declines" in accepted.warning
    declined = m.quick("decline", cursor=1)  # saying no to it is fine
    assert [x.to for x in declined.messages] == [0] and "can't do slot 1" in declined.messages[0].content
    # several slots offered (a DSM offer) and the cursor on none of them: the first I can hold
    m.outbox.clear()
    m.apply(_dm(1, 2, "Which of slots 1, 2 and 3 work for you?", {"protocol": "dsm", "kind": "proposals",
                                                                  "meeting_id": 4, "slots": [1, 2, 3]}))
    ok = m.quick("accept", cursor=0)
    assert ok.warning is None and [x.to for x in ok.messages] == [1]
    assert ok.messages[0].content.startswith("Yes, slot 2 works")
    assert m.quick("accept", cursor=1).warning.startswith(rule)  # …but the cursor's slot, if it points at one


def test_quick_actions_go_where_the_composer_line_says():
    """A seat outside the meeting written to by Agent 0: the feed's line says "Agent 0", and so
    do p and r from the feed (they went to every participant: 0, 1 and 4).  In a DM thread, a
    quick action goes to that thread's peer, as a typed line does."""
    out = SeatModel(2, ("dm",), 5)
    out.apply(_imap_table())
    _calendar(out, [None, None, (1, False), None])
    out.apply(_round(4, 5, [0, 1, 4]))
    out.apply(_dm(0, 2, "Agent 0 asks whether slot 3 works for you.", rnd=4))
    assert out.audience() == [0]
    assert [x.to for x in out.quick("propose", cursor=3, selected=[3]).messages] == [0]
    assert [x.to for x in out.quick("ask_costs", cursor=0).messages] == [0]
    assert [x.to for x in out.write("3 is fine").messages] == [0]
    inside = SeatModel(2, ("dm",), 5)
    inside.apply(_imap_table())
    _calendar(inside, [None, None, (1, False), None])
    inside.apply(_round(3, 4, [0, 2, 4]))
    assert [x.to for x in inside.quick("propose", cursor=0, selected=[0]).messages] == [0, 4]  # feed: both
    dm4 = inside.quick("propose", cursor=1, selected=[1], open_channel="dm", open_to=4)
    assert [x.to for x in dm4.messages] == [4]
    assert inside.route([0, 4], "dm", 4) == inside.route([0], "dm", 4) == ("dm", [4])


def test_a_thread_fits_a_round_only_with_the_meetings_participants():
    m = SeatModel(2, ("dm", "participant_groupchat"), 5)
    m.apply(_round(0, 1, [2, 3, 4]))
    assert [k for k in ("feed", "dm:0", "dm:1", "dm:3", "dm:4", "participant") if m.thread_fits(k)] == \
        ["feed", "dm:3", "dm:4", "participant"]
    m.apply(_round(1, 2, [0, 1, 3]))  # not in it: a DM with one of its participants still fits
    assert [k for k in ("dm:0", "dm:1", "dm:3", "dm:4") if m.thread_fits(k)] == ["dm:0", "dm:1", "dm:3"]


def test_a_round_outside_the_meeting_ends_with_what_the_seat_may_know():
    m = SeatModel(2, ("dm",), 5)
    _calendar(m, [None, (1, False), None, (2, True)])
    m.apply(_round(2, 3, [0, 1, 3]))
    cal = [{"errand_id": 1, "cost": 1}, None, None, {"errand_id": 3, "cost": 2, "blocked": True}]
    m.apply({"type": "batch_applied", "round": 2, "agent_id": 2, "cost": 1, "calendar_after": cal})  # VOLUNTARY
    hints = m.apply({"type": "resolution", "round": 2, "participant": False, "my_calendar": cal})
    assert [(h.kind, h.count, h.total) for h in hints] == [("outside_over", 1, 1)]
    assert m.penalty == 1
    m.apply(_round(3, 4, [0, 1, 4]))
    hints = m.apply({"type": "resolution", "round": 3, "participant": False, "my_calendar": cal})
    assert [(h.kind, h.count, h.total) for h in hints] == [("outside_over", 0, 0)]
    # a participant's own outcome is said from the event itself: no such hint
    m.apply(_round(4, 5, [1, 2]))
    assert m.apply({"type": "resolution", "round": 4, "participant": True, "meeting_id": 5,
                    "coordinated": True, "my_slot": 1, "my_calendar": cal}) == []


# -- a whole game played through the model alone --------------------------------------------------
class ModelSeat:
    """A seat played through the SeatModel alone — what a person's keys do, without Textual:
    ``act(model, obs)`` makes the quick actions of one CHEAP_TALK turn; DECISION places the
    meeting at the model's agreed slot (else the first free slot)."""

    kind = "human"
    model = "human"

    def __init__(self, seat_model: SeatModel, act) -> None:
        self.seat_model, self.act = seat_model, act

    async def register(self, briefing):
        self.seat_model.register(briefing)

    async def speak(self, obs):
        req = HumanRequest("speak", obs, obs.view.seat, asyncio.get_running_loop().create_future())
        self.seat_model.speak(req)
        self.act(self.seat_model, obs)
        self.seat_model.end_turn()
        return req.future.result()

    async def volunteer(self, obs):
        from engine.seats import Reply

        return Reply(actions=(), text="no moves")

    async def decide(self, obs):
        from engine.seats import Reply
        from personas.base import clear_and_schedule

        cal = obs.view.calendar
        agreed = self.seat_model.agreed_slot()
        for slot in ([agreed] if agreed is not None else []) + [s for s, it in enumerate(cal) if it is None]:
            actions = clear_and_schedule(cal, obs.meeting.id, slot)
            if actions:
                return Reply(actions=tuple(actions))
        return Reply(actions=())


def _slot_of(ev_data: dict, meeting_id: int, seat: int) -> int | None:
    cal = (ev_data.get("calendars") or [])[seat]
    return next((s for s, it in enumerate(cal) if isinstance(it, dict) and it.get("meeting_id") == meeting_id), None)


def _human_sent(trace, kind: str) -> list[dict]:
    return [e["data"] for e in trace["events"] if e["type"] == "dm_sent" and e["data"]["from_agent"] == 2
            and (e["data"].get("payload") or {}).get("kind") == kind]


def test_the_models_quick_actions_speak_dsm_and_the_bots_act_on_them():
    """Seat 2 against DSM-Welfare seats, played through the model (was a whole-game Pilot test:
    the keys are tests/tui/test_quick_protocols.py's SD-MAP game)."""
    from personas.registry import make_personas

    task = generate_scenario(7)
    m1 = task.meetings[0]
    assert min(m1.participants) == 2
    chosen: dict[int, int] = {}

    def act(m: SeatModel, obs) -> None:
        mt = obs.meeting
        if not obs.is_participant:
            return
        if min(mt.participants) == 2:
            if obs.turn == 0:
                m.quick("ask_costs", cursor=0)  # DSM proposals: the responders score every slot
            elif m.reported and mt.id not in chosen:
                # the *highest* slot everyone scored above zero (not the cheapest)
                mine = [s for s, it in enumerate(m.calendar) if it is None]
                ok = [s for s in mine if all(m.reported[a].get(s) is not None for a in mt.participants if a != 2)]
                chosen[mt.id] = max(ok)
                m.quick("propose", cursor=chosen[mt.id], selected=[chosen[mt.id]])  # DSM decision
        elif m.proposal and m.proposal_kind == "proposals" and mt.id not in chosen:
            free = [s for s in m.proposal[1] if m.calendar[s] is None]
            if free:
                chosen[mt.id] = free[-1]
                m.quick("accept", cursor=chosen[mt.id])  # DSM scores: only this slot, at full satisfaction

    model = SeatModel(2, ("dm",), task.num_agents, num_rounds=len(task.meetings))
    seats = list(make_personas("dsm-welfare", task.num_agents))
    seats[2] = ModelSeat(model, act)
    res = asyncio.run(run_game(task, seats, GameConfig(deterministic=True), Feed(model, 2)))
    trace = res.trace
    assert model.game_over and model.calendar == list(res.state.calendars[2])
    assert {_human_sent(trace, "proposals")[0]["payload"]["protocol"]} == {"dsm"}
    decisions = _human_sent(trace, "decision")
    assert decisions and decisions[0]["payload"] == {"protocol": "dsm", "kind": "decision",
                                                     "meeting_id": m1.id, "slot": chosen[m1.id]}
    bot_scores = [e for e in trace["events"] if e["type"] == "dm_sent" and e["data"]["to_agent"] == 2
                  and (e["data"].get("payload") or {}).get("kind") == "scores"]
    assert {e["data"]["from_agent"] for e in bot_scores} == {3, 4}  # the bots scored the human's offer
    resolutions = {e["data"]["meeting_id"]: e["data"] for e in trace["events"] if e["type"] == "resolution"}
    assert {_slot_of(resolutions[m1.id], m1.id, a) for a in m1.participants} == {chosen[m1.id]}
    answered = [mid for mid in chosen if mid != m1.id]  # where a bot opened, the typed scores steered it
    assert answered and _human_sent(trace, "scores")
    for mid in answered:
        parts = next(m.participants for m in task.meetings if m.id == mid)
        assert {_slot_of(resolutions[mid], mid, a) for a in parts} == {chosen[mid]}


def test_my_proposal_stays_the_preselected_slot_when_a_partner_then_mentions_another():
    """Issue 30 item 8: I proposed slot 4; a partner's free text then mentions slot 1.  The
    builder preselects slot 4 (what I proposed), and slot 4 counts as talked about, so placing
    the meeting there draws no "the talk was about slot 1" warning."""
    m = SeatModel(0, ("dm",), 3)
    _calendar(m, [None] * 6)
    m.apply(_round(0, 1, [0, 1]))
    assert m.quick("propose", cursor=4, selected=[4]).messages
    m.apply(_dm(1, 0, "Slot 1 would be easier for me.", None))
    assert m.talk == [1]
    assert m.agreed_slot() == 4 and set(m.talked_slots()) == {1, 4}
    # a typed counter-proposal is the latest proposal: it is preselected, both are talked about
    m.apply(_dm(1, 0, "Decision for meeting M1: slot 2.", {"protocol": "imap", "kind": "decision",
                                                              "meeting_id": 1, "slot": 2}))
    assert m.agreed_slot() == 2 and set(m.talked_slots()) == {1, 2, 4}
    m.apply(_round(1, 2, [0, 1]))
    assert m.agreed_slot() is None and m.talked_slots() == []


def test_the_outbox_kept_as_json_is_queued_again_as_it_was():
    """``outbox_json`` / ``requeue``: what a stop keeps of the queue (calbench-play --resume)
    comes back message for message, the handwritten mark included; an entry that does not
    read is left out."""
    m = SeatModel(2, ("dm", "participant_groupchat"), 5)
    typed = [Message("dm", "Slot 5 or 14 work for me", 1), Message("dm", "Slot 5 or 14 work for me", 4)]
    quick_one = Message("participant_groupchat", "Costs, per slot: 0 free", None, {"kind": "costs", "protocol": "imap"})
    m.queue(typed, handwritten=True)
    m.queue([quick_one])
    kept = json.loads(json.dumps(m.outbox_json()))
    back = SeatModel(2, ("dm", "participant_groupchat"), 5)
    assert back.requeue(kept + [{"message": {"type": "schedule"}}, "junk"]) == 3
    assert back.outbox == m.outbox
    assert [id(x) in back._handwritten for x in back.outbox] == [True, True, False]
    assert back.requeue(None) == 0
