"""IMAP, declared (paper App. D.1, SPEC §7): its messages, their evidence and audit, its seat.

The bot is ``personas/scripted/imap.py`` (``IMAPPersona``); docs/protocols.md says how it
plays.  Payloads (``protocol: "imap"``): ``cost_request {slots}`` · ``costs {costs: {"slot":
int | null}}`` (string keys, as in the authors' traces) · ``decision {slot}`` · ``fail {}``.
"""

from __future__ import annotations

from typing import Any

from engine.protocols import ANSWER_KIND, Kind, Protocol, Seat, Typed, as_int, int_of, moves_of, answer_kind, register, slot_of, slots_of

NAME = "imap"


# -- VPS evidence (paper Table 10) --------------------------------------------------------
def _cost_request(est: Any, r: int, sender: int, readers: list[int], d: dict[str, Any], seq: Any) -> None:
    """Remembered: a ``costs`` answer counts only the slots it asked about."""
    slots = {s for s in (int_of(x) for x in d.get("slots") or ()) if s is not None}
    for j in readers:
        est.memo[(NAME, r, sender, j)] = slots


def _costs(est: Any, r: int, sender: int, readers: list[int], d: dict[str, Any], seq: Any) -> None:
    """Each asked slot: a figure says it is feasible, null that it is not (α = 1)."""
    costs = d.get("costs")
    if isinstance(costs, dict):
        items = list(costs.items())
    elif isinstance(costs, list) and isinstance(d.get("slots"), list):
        items = list(zip(d["slots"], costs))
    else:
        items = []
    if not readers:  # the slots are read once for every reader (none: nothing read)
        return
    said = [(s, 0.0 if v is None else 1.0) for k, v in items if (s := int_of(k)) is not None]
    for j in readers:
        asked = est.memo.get((NAME, r, j, sender))
        est.update_slots(r, sender, j, [x for x in said if x[0] in asked] if asked else said,
                         1.0, "typed", "imap_costs", seq)


def _decision(est: Any, r: int, sender: int, readers: list[int], d: dict[str, Any], seq: Any) -> None:
    s = int_of(d.get("slot"))
    if s is not None:
        for j in readers:
            est.update(r, sender, j, s, 1.0, 1.0, "typed", "imap_decision", seq)


# -- the message audit and the costs a person's screen reads --------------------------------
def _costs_audit(p: dict[str, Any]) -> set[str]:
    vals = list((p.get("costs") or {}).values()) if isinstance(p.get("costs"), dict) else []
    out: set[str] = set()
    if any(v is not None for v in vals):
        out.add("cost")
    if vals and all(v is None for v in vals):
        out.add("refusal")
    return out


def _costs_read(p: dict[str, Any]) -> dict[int, int | None] | None:
    if not isinstance(p.get("costs"), dict):
        return None
    out: dict[int, int | None] = {}
    for k, v in p["costs"].items():
        try:
            s = int(k)
        except (TypeError, ValueError):
            continue
        out[s] = v if isinstance(v, int) and not isinstance(v, bool) else None
    return out


# -- what it says in a person's terms (engine/phrasebook.py's clauses) ----------------------
def _costs_says(p: dict[str, Any]) -> tuple | None:
    raw = p.get("costs")
    if not isinstance(raw, dict):
        return None
    free, bad, priced = [], [], []
    for k, v in raw.items():
        s = as_int(k)
        if s is None:
            continue
        c = as_int(v) if v is not None else None
        if c is None:
            bad.append(s)
        elif c <= 0:
            free.append(s)
        else:
            priced.append((s, c))
    return (("works", slots_of(free)), ("costs", tuple(sorted(priced))), ("fails", slots_of(bad)))


def _decision_says(p: dict[str, Any]) -> tuple:
    """The initiator's choice: a person calls it a proposal."""
    return (("propose", slot_of(p)), ("move_confirm", moves_of(p)))


def _give_up(p: dict[str, Any]) -> tuple:
    return (("give_up", True),)


# -- a person's quick actions to an IMAP seat ---------------------------------------------
def _quick(action: str, *, slots: list[int] = (), costs: list = (), **_: Any) -> Typed | None:
    if action == "ask_costs":
        return Typed("cost_request", {"slots": slots})
    if action == "share_costs":
        return Typed("costs", {"costs": {str(s): c for s, c in costs}})
    if action == "propose" and len(slots) == 1:
        return Typed("decision", {"slot": slots[0]})
    return None  # IMAP has no typed yes or no: its decision is final


PROTOCOL = register(Protocol(
    name=NAME,
    order=10,
    author_key="imap",
    kinds={
        "cost_request": Kind(("slots",), audit=("question", "availability"), evidence=_cost_request,
                             asks_costs=True, says=lambda p: (("ask_costs", slots_of(p.get("slots"))),)),
        "costs": Kind(("costs",), audit=("availability",), audit_rule=_costs_audit, evidence=_costs,
                      costs=_costs_read, says=_costs_says),
        "decision": Kind(("slot",), audit=("proposal",), evidence=_decision, offers=True, says=_decision_says),
        "fail": Kind((), audit=("refusal",), says=_give_up),
        ANSWER_KIND: answer_kind(costs=True),  # to a peer outside the protocol (docs/protocols.md)
    },
    seats=(Seat(NAME, "personas.scripted.imap:IMAPPersona", default=True,
                words="asks everyone's cost per slot, then picks the cheapest common slot (easiest to follow)"),),
    quick=_quick,
    speaks=lambda m: m == NAME,
    doc="docs/protocols.md",
))
