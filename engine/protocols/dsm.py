"""DSM, declared (paper App. D.3, SPEC §7): its messages, their evidence and audit, its score
scale, its seats (DSM-Welfare, DSM-Private and the requeue variant).

The bot is ``personas/scripted/dsm.py`` (``DSMPersona``); docs/protocols-dsm.md says how it
plays, and how ``--fidelity paper`` plays it as the authors' code does.  Payloads
(``protocol: "dsm"``): ``proposals {subround, slots, L, participants, plans}`` · ``scores
{subround, scores, scoring_cost, plan_scores}`` · ``decision {slot, plan, moves,
participants, reward, budget}`` · ``fail {tried, participants, reward, budget}``.

The score scale
    A ``scores`` payload carries satisfaction levels ``0..D-1`` (``D = 12``):
    :func:`satisfaction` (cost → level) and :func:`band_cost` (level → the largest cost it
    stands for) are the scale's two directions (re-exported by ``engine.protocol``).
"""

from __future__ import annotations

from typing import Any

from engine.protocols import ANSWER_KIND, Kind, Protocol, Seat, Typed, as_int, int_of, moves_of, num, answer_kind, register, slot_of, slots_of

NAME = "dsm"
D = 12  # satisfaction levels 0..D-1
TOP = D - 1


def satisfaction(cost: int | None) -> int:
    """Satisfaction level of a plan whose displacement cost (shown units) is ``cost``.

    ``None`` (cannot be done) → 0; no displacement → 11; otherwise the level drops by one
    each time the cost doubles: ``11 - ceil(log2(1 + cost))``, never below 1.  So cost 1 →
    10, 2–3 → 9, 4–7 → 8, 10 → 7, 100 → 4, ≥ 512 → 1 (never increasing with cost).
    """
    if cost is None:
        return 0
    if cost <= 0:
        return TOP
    return max(1, TOP - int(cost).bit_length())


def band_cost(s: int) -> int:
    """The largest displacement cost a non-zero score stands for: ``2**(D-1-s) - 1``
    (11 → 0, 10 → 1, 9 → 3, 8 → 7, 7 → 15, 4 → 127).  The initiator adds these up to
    compare plans in cost terms (a sum of log-scale levels would favour one agent paying
    100 over four agents paying 10 each)."""
    return (1 << (TOP - s)) - 1 if s > 0 else 0


# -- VPS evidence (paper Table 10) --------------------------------------------------------
def _plan_slots(d: dict[str, Any]) -> dict[int, int]:
    """Plan id -> slot (plans first; a bare slot list means plan id == slot)."""
    out: dict[int, int] = {}
    plans = d.get("plans") or ()
    if isinstance(plans, dict):  # {plan id: plan}
        plans = [dict(v, id=v.get("id", k)) for k, v in plans.items() if isinstance(v, dict)]
    for plan in plans:
        if isinstance(plan, dict):
            pid, slot = int_of(plan.get("id")), int_of(plan.get("slot"))
            if pid is not None and slot is not None:
                out[pid] = slot
    for raw in d.get("slots") or ():
        s = int_of(raw)
        if s is not None:
            out.setdefault(s, s)
    return out


def _proposals(est: Any, r: int, sender: int, readers: list[int], d: dict[str, Any], seq: Any) -> None:
    """Every offered slot is feasible for the initiator; the plans are remembered for the scores."""
    plan = _plan_slots(d)
    slots = sorted(set(plan.values()))
    said = [(s, 1.0) for s in slots]
    for j in readers:
        est.memo[(NAME, r, sender, j)] = plan
        est.update_slots(r, sender, j, said, 1.0, "typed", "dsm_proposals", seq)


def _scores(est: Any, r: int, sender: int, readers: list[int], d: dict[str, Any], seq: Any) -> None:
    """A score s moves the belief in the plan's slot to s / (D-1) (0: infeasible)."""
    scores = d.get("scores")
    if isinstance(scores, dict) and readers:  # read once for every reader (none: nothing read)
        said = [(pid, 0.0 if sc <= 0 else min(1.0, sc / (D - 1)))
                for pid, sc in ((int_of(k), num(v)) for k, v in scores.items()) if pid is not None and sc is not None]
        for j in readers:
            plan = est.memo.get((NAME, r, j, sender), {})
            est.update_slots(r, sender, j, [(plan.get(pid, pid), e) for pid, e in said], 1.0, "typed", "dsm_scores", seq)


def _decision(est: Any, r: int, sender: int, readers: list[int], d: dict[str, Any], seq: Any) -> None:
    s = int_of(d.get("slot"))
    if s is not None:
        for j in readers:
            est.update(r, sender, j, s, 1.0, 1.0, "typed", "dsm_decision", seq)


# -- the message audit and the costs a person's screen reads --------------------------------
def _scores_audit(p: dict[str, Any]) -> set[str]:
    raw = p.get("scores") if isinstance(p.get("scores"), dict) else {}
    vals = [v for v in raw.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    out: set[str] = set()
    if any(0 < v < TOP for v in vals):  # a cost band (TOP is free, 0 impossible)
        out.add("cost")
    if vals and all(v <= 0 for v in vals):
        out.add("refusal")
    return out


def _scores_read(p: dict[str, Any]) -> dict[int, int | None] | None:
    """Scores read back as costs: 0 → None (impossible), else :func:`band_cost`."""
    if not isinstance(p.get("scores"), dict):
        return None
    out: dict[int, int | None] = {}
    for k, v in p["scores"].items():
        try:
            s, v = int(k), int(v)
        except (TypeError, ValueError):
            continue
        out[s] = band_cost(v) if v > 0 else None
    return out


# -- what it says in a person's terms (engine/phrasebook.py's clauses) ----------------------
def _scores_says(p: dict[str, Any]) -> tuple | None:
    """11 free, 1..10 possible at a cost (the level is not a figure), 0 impossible."""
    raw = p.get("scores")
    if not isinstance(raw, dict):
        return None
    free, some, bad = [], [], []
    for k, v in raw.items():
        s, level = as_int(k), as_int(v)
        if s is None or level is None:
            continue
        (free if level >= TOP else some if level > 0 else bad).append(s)
    return (("works", slots_of(free)), ("costly", slots_of(some)), ("fails", slots_of(bad)))


def _decision_says(p: dict[str, Any]) -> tuple:
    """The initiator's choice (and the moves it carries): a person calls it a proposal."""
    return (("propose", slot_of(p)), ("move_confirm", moves_of(p)))


def _proposals_says(p: dict[str, Any]) -> tuple:
    """Plain slots asked about; displacement plans as options."""
    plans = p.get("plans") if isinstance(p.get("plans"), dict) else {}
    options = set()
    for plan in plans.values():
        slot, mv = (as_int(plan.get("slot")), moves_of(plan)) if isinstance(plan, dict) else (None, ())
        if slot is not None and mv:
            options.add((slot,) + mv[0])  # the first move of a chain names the meeting that gives way
    moved = {o[0] for o in options}
    plain = [s for s in slots_of(p.get("slots")) if s not in moved]
    return (("ask", tuple(plain)), ("option", tuple(sorted(options))))


# -- a person's quick actions to a DSM seat -----------------------------------------------
def _offer(slots: list[int]) -> Typed:
    return Typed("proposals", {"slots": slots, "L": len(slots), "subround": 1})


def _quick(action: str, *, slots: list[int] = (), costs: list = (), slot: int | None = None,
           initiator: bool = False, answering: str | None = None, my_cost: int | None = 0,
           **_: Any) -> Typed | None:
    if action == "ask_costs":
        return _offer(slots) if initiator and slots else None  # the responders score each slot
    if action == "share_costs":
        return Typed("scores", {"scores": {str(s): satisfaction(c) for s, c in costs}})
    if action == "propose" and initiator:
        if len(slots) == 1:
            return Typed("decision", {"slot": slots[0]})
        return _offer(slots) if slots else None
    if action == "accept" and answering == "proposals":
        return Typed("scores", {"scores": {str(slot): satisfaction(my_cost)}})
    if action == "accept" and initiator:
        return Typed("decision", {"slot": slot}, "decide")
    if action == "decline" and answering == "proposals":
        return Typed("scores", {"scores": {str(slot): 0}})
    return None


_BOT = "personas.scripted.dsm:DSMPersona"

PROTOCOL = register(Protocol(
    name=NAME,
    order=30,
    author_key="dsm",
    kinds={
        "proposals": Kind(("subround", "slots", "L", "participants", "plans"), audit=("proposal", "question"),
                          evidence=_proposals, asks_costs=True, offers=True, says=_proposals_says),
        "scores": Kind(("subround", "scores", "scoring_cost", "plan_scores"), audit=("availability",),
                       audit_rule=_scores_audit, evidence=_scores, costs=_scores_read, says=_scores_says),
        "decision": Kind(("slot", "plan", "moves", "participants", "reward", "budget"), audit=("proposal",),
                         evidence=_decision, offers=True, says=_decision_says),
        "fail": Kind(("tried", "participants", "reward", "budget"), audit=("refusal",),
                     says=lambda p: (("give_up", True),)),
        ANSWER_KIND: answer_kind(),  # to a peer outside the protocol (docs/protocols.md)
    },
    seats=(
        Seat("dsm-welfare", _BOT, (("preset", "welfare"),), aliases=("dsm_welfare", "paper_dsm", "dsm"),
             fidelity=True, short="dsmW",
             words="offers several slots, asks for scores, picks the best total for everyone"),
        Seat("dsm-private", _BOT, (("preset", "private"),), aliases=("dsm_private", "private_dsm"),
             fidelity=True, short="dsmP", words="like dsm-welfare but offers few slots at a time, to reveal less"),
        # offers the slots of its failed negotiations last; a variant of our rules: --fidelity
        # leaves it as it is
        Seat("dsm-private-requeue", _BOT, (("preset", "private"), ("requeue", True)), variant=True),
    ),
    quick=_quick,
    speaks=lambda m: m.startswith(NAME),
    doc="docs/protocols-dsm.md",
))
