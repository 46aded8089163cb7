"""The JSON schema of the reply envelope, per phase, for structured outputs.

``structured`` (``LLMSettings.structured``) decides whether a request carries a format
constraint.  The schema is built for *this* call from the seat's own observation, so that
a grammar-constrained reply is always a well-formed move of this game:

* CHEAP_TALK: the message actions of the enabled channels (a ``dm``'s ``to`` is one of
  the meeting's other participants; at most one message per participant, plus one),
  ``{"type": "pass"}`` and, for a participant, ``{"type": "agree", "slot": n}`` with ``n``
  one of the slots the meeting could take on its calendar;
* VOLUNTARY: reschedules only, one shape per movable item (its ``item_id`` and
  ``from_slot`` fixed, ``to_slot`` a free slot), at most :data:`MAX_MOVES`;
* DECISION: exactly one ``schedule`` of the round's meeting, either alone into a free
  slot or after the one reschedule that moves the item in its slot to a free slot
  (``prefixItems``: one two-item shape per movable item) — every batch the schema admits
  passes the rules;
* every string has a ``maxLength`` and every list a ``maxItems``, so a constrained reply
  always closes (a small model otherwise loops inside ``thinking`` until the token cap).

The rules engine still validates every batch (a schema cannot say "the destination must
be free after the other moves"); the schema keeps a model from writing prose, inventing
keys or naming slots and items that cannot work.

A server that refuses a keyword (its 400 names it: :func:`refused_keywords`) gets the
schema without it (:func:`drop_keywords`) under ``structured=auto``; the seat records
what it dropped.

The schema is *strict-compatible* (OpenAI's ``strict: true``): every object lists all its
properties as required and forbids others; ranges are ``enum`` lists.  Three request
forms exist, tried in this order by ``structured="auto"``:

``json_schema``  ``{"type": "json_schema", "json_schema": {"name", "strict": true, "schema"}}`` —
                 OpenAI, vLLM, SGLang, Ollama, llama.cpp (recent);
``json_object``  ``{"type": "json_object", "schema": ...}`` — llama.cpp's grammar path (and any
                 server that ignores the extra key still returns JSON).
``off``          no ``response_format``; the lenient parser reads what comes back.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


__all__ = ["FORMS", "envelope_schema", "reflection_schema", "response_format", "judge_schema", "drop_keywords",
           "refused_keywords", "DROPPABLE", "THINKING_MAX", "THINKING_SHORT", "CONTENT_MAX", "MAX_MOVES",
           "with_thinking_limit", "with_one_action", "without_kinds"]

#: The request forms ``auto`` tries, in order, before giving up on a constraint.
FORMS = ("json_schema", "json_object")


#: Bounds every string and list of an envelope schema carries (issue 22 item 5, issue 24
#: item 10): a grammar-constrained reply always closes.  The engine's own caps
#: (``engine.actions.MAX_*``) are looser; a model without a schema is held to those.
THINKING_MAX = 300
#: ``thinking`` for a model with a small context window (``LLMPersona.short_thinking``: 8,192
#: tokens or less): a few words at most, ``""`` welcome — SmolLM2-135M spent 140–385 generated
#: tokens a call on it, most of the call's time (issue 31).
THINKING_SHORT = 60
CONTENT_MAX = 400
JUSTIFICATION_MAX = 80
#: At most this many reschedules in a VOLUNTARY batch.
MAX_MOVES = 3


def _string(limit: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": limit}


def _enum(values) -> dict[str, Any]:
    values = list(values)
    return {"type": "integer", "enum": values} if values else {"type": "integer", "enum": [-1]}


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _kind(name: str) -> dict[str, Any]:
    return {"type": "string", "enum": [name]}


def _possible_slots(calendar, num_slots: int) -> tuple[list[int], list[tuple[int, int]], list[int]]:
    """``(free slots, [(slot, item id)] of movable items, slots a meeting could take)``.

    A slot can take the meeting when it is free or holds an item that can move (not
    blocked) while some other slot is free for it.
    """
    free = [s for s in range(num_slots) if calendar[s] is None]
    movable = [(s, calendar[s].item_id) for s in range(num_slots)
               if calendar[s] is not None and not calendar[s].blocked and any(f != s for f in free)]
    possible = sorted(free + [s for s, _ in movable])
    return free, movable, possible


def _moves(free: list[int], movable: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """One reschedule shape per movable item: its id and slot fixed, the destination a free slot."""
    return [_move(slot, item, free) for slot, item in movable]


def _move(slot: int, item: int, free: list[int]) -> dict[str, Any]:
    return _obj(type=_kind("reschedule"), item_id=_enum([item]), from_slot=_enum([slot]),
                to_slot=_enum([f for f in free if f != slot]), justification=_string(JUSTIFICATION_MAX))


def _one_of(alts: list[dict[str, Any]]) -> dict[str, Any]:
    return alts[0] if len(alts) == 1 else {"anyOf": alts}


@lru_cache(maxsize=512)
def _envelope_schema(phase: str, channels: tuple[str, ...], seat: int, num_agents: int, num_slots: int,
                     meeting_id: int, calendar: tuple, participants: tuple[int, ...]) -> dict[str, Any]:
    participant = seat in participants
    free, movable, possible = _possible_slots(calendar, num_slots)
    if phase == "CHEAP_TALK":
        # Direct messages go to the meeting's other participants (the small models that
        # wrote to everyone only copied an example); a group chat still reaches the others.
        targets = tuple(p for p in participants if p != seat) or tuple(a for a in range(num_agents) if a != seat)
        kinds = []
        if "dm" in channels:
            kinds.append(_obj(type=_kind("dm"), to=_enum(targets), content=_string(CONTENT_MAX)))
        for ch in ("participant_groupchat", "all_groupchat"):
            if ch in channels:
                kinds.append(_obj(type=_kind(ch), content=_string(CONTENT_MAX)))
        # Short talk moves the persona expands into messages (personas/llm/talk.py): answer the
        # cost request made to me; for a participant also ask for costs, propose and agree.
        kinds.append(_obj(type=_kind("costs")))
        if participant:
            kinds.append(_obj(type=_kind("ask_costs")))
            kinds.append(_obj(type=_kind("propose"), slot=_enum(possible)))
            kinds.append(_obj(type=_kind("agree"), slot=_enum(possible)))  # "I agree to slot n"
        kinds.append(_obj(type=_kind("pass")))
        actions = {"type": "array", "items": _one_of(kinds), "maxItems": len(targets) + 1}
    elif phase == "VOLUNTARY":
        moves = _moves(free, movable)
        actions = ({"type": "array", "items": _one_of(moves), "maxItems": min(MAX_MOVES, len(moves))}
                   if moves else {"type": "array", "items": _obj(), "maxItems": 0})
    else:
        # DECISION: exactly one schedule of this round's meeting — into a free slot, or into
        # the slot of a movable item that the one reschedule before it moves to a free slot.
        # Every batch the schema admits passes the rules of SPEC §4 (a longer chain of moves
        # is still possible without a schema).
        def sched(slots) -> dict[str, Any]:
            return _obj(type=_kind("schedule"), meeting_id=_enum([meeting_id]), slot=_enum(slots))

        alts = [{"type": "array", "prefixItems": [sched(free)], "minItems": 1, "maxItems": 1}] if free else []
        for slot, item in movable:
            # No "items": false beside prefixItems: llama.cpp's converter lets "items" win over
            # "prefixItems", and OpenAI's strict mode refuses it; minItems = maxItems closes the tuple.
            alts.append({"type": "array", "prefixItems": [_move(slot, item, free), sched([slot])],
                         "minItems": 2, "maxItems": 2})
        if not alts:  # nothing can take the meeting: any schedule, which the rules will refuse
            alts = [{"type": "array", "prefixItems": [sched(range(num_slots))], "minItems": 1, "maxItems": 1}]
        actions = _one_of(alts)
    return _obj(thinking={**_string(THINKING_MAX), "description": "your private reasoning, brief"},
                actions=actions)


def with_thinking_limit(schema: dict[str, Any], limit: int) -> dict[str, Any]:
    """``schema`` with its envelope's ``thinking`` bounded to ``limit`` characters (a copy)."""
    props = dict(schema.get("properties") or {})
    if "thinking" not in props:
        return schema
    props["thinking"] = {**props["thinking"], "maxLength": limit,
                         "description": "optional: a few words at most, or an empty string"}
    return {**schema, "properties": props}


def with_one_action(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` whose ``actions`` list holds at most one action (a copy).  For a small model
    in CHEAP_TALK (``LLMPersona.short_thinking``): it fills a list to its ``maxItems``, and
    SmolLM2-135M put a stray ``agree`` beside the ``ask_costs`` it was shown; every short
    action reaches all the participants it should by itself."""
    props = dict(schema.get("properties") or {})
    acts = props.get("actions")
    if not isinstance(acts, dict) or acts.get("type") != "array":
        return schema
    props["actions"] = {**acts, "maxItems": 1}
    return {**schema, "properties": props}


def without_kinds(schema: dict[str, Any], kinds: set[str] | frozenset[str]) -> dict[str, Any]:
    """``schema`` whose ``actions`` items no longer offer the action types in ``kinds`` (a
    copy; at least one kind is always left).  For a small model in CHEAP_TALK
    (``LLMPersona.short_thinking``): a short action that would only repeat itself this turn —
    ``ask_costs`` once the seat has asked, ``costs`` with no cost request to answer — is not
    offered (SmolLM2-135M, shown "propose slot 3" after both partners sent their costs, wrote
    ``ask_costs`` again on every turn of the round)."""
    props = dict(schema.get("properties") or {})
    acts = props.get("actions")
    items = acts.get("items") if isinstance(acts, dict) else None
    if not kinds or not isinstance(items, dict) or "anyOf" not in items:
        return schema
    keep = [alt for alt in items["anyOf"]
            if ((alt.get("properties") or {}).get("type") or {}).get("enum", [None])[0] not in kinds]
    if not keep or len(keep) == len(items["anyOf"]):
        return schema
    props["actions"] = {**acts, "items": _one_of(keep)}
    return {**schema, "properties": props}


def envelope_schema(obs) -> dict[str, Any]:
    """The envelope schema for one observation (``engine.observe`` Turn/Voluntary/Decision)."""
    v = obs.view
    phase = getattr(obs, "phase", "CHEAP_TALK")
    m = obs.meeting
    return _envelope_schema(phase, tuple(v.channels), v.seat, v.num_agents, v.num_slots, int(m.id),
                            tuple(v.calendar), tuple(m.participants))


#: JSON-schema keywords a server may refuse; ``structured=auto`` drops the one a 400 names
#: (then tries the next form when none is named).  Dropping ``prefixItems`` keeps the
#: envelope's shape (one or two actions, each a reschedule or a schedule of these shapes).
DROPPABLE = ("prefixItems", "maxLength", "maxItems", "minItems", "description")


def drop_keywords(schema: dict[str, Any], dropped: frozenset[str] | tuple[str, ...]) -> dict[str, Any]:
    """``schema`` without the keywords in ``dropped`` (a ``prefixItems`` array becomes
    ``items``: any of its item shapes, with the same length bounds)."""
    if not dropped:
        return schema
    dropped = frozenset(dropped)

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(x) for x in node]
        if not isinstance(node, dict):
            return node
        node = dict(node)
        if "prefixItems" in dropped and "prefixItems" in node:
            shapes: list[Any] = []
            for it in node.pop("prefixItems"):
                for alt in it.get("anyOf", [it]) if isinstance(it, dict) else [it]:
                    if alt not in shapes:
                        shapes.append(alt)
            node["items"] = _one_of(shapes) if shapes else {}
        if "anyOf" in node and "prefixItems" in dropped:  # arrays of each length: one array, widest bounds
            alts = [walk(a) for a in node["anyOf"]]
            if alts and all(isinstance(a, dict) and a.get("type") == "array" for a in alts):
                shapes = []
                for a in alts:
                    for alt in a["items"].get("anyOf", [a["items"]]):
                        if alt not in shapes:
                            shapes.append(alt)
                merged: dict[str, Any] = {"type": "array", "items": _one_of(shapes)}
                if "minItems" not in dropped:
                    merged["minItems"] = min(a.get("minItems", 0) for a in alts)
                if "maxItems" not in dropped:
                    merged["maxItems"] = max(a.get("maxItems", 0) for a in alts)
                return merged
        return {k: walk(v) for k, v in node.items() if k not in dropped}

    return walk(schema)


def refused_keywords(message: str | None) -> list[str]:
    """The droppable keywords a server's error message names (case-insensitive)."""
    low = (message or "").lower()
    return [k for k in DROPPABLE if k.lower() in low]


@lru_cache(maxsize=128)
def _reflection_schema(targets: tuple[int, ...], num_slots: int) -> dict[str, Any]:
    row = {"type": "array", "items": {"type": "integer", "enum": list(range(-3, 4))},
           "minItems": num_slots, "maxItems": num_slots}
    deltas = {"type": "object", "properties": {str(t): row for t in targets}, "required": [str(t) for t in targets],
              "additionalProperties": False}
    return {"type": "object", "properties": {"deltas": deltas}, "required": ["deltas"], "additionalProperties": False}


def reflection_schema(obs) -> dict[str, Any]:
    """``{"deltas": {target: [num_slots ints in -3..3]}}`` for a reflection question."""
    return _reflection_schema(tuple(obs.targets), obs.view.num_slots)


@lru_cache(maxsize=64)
def judge_schema(num_slots: int) -> dict[str, Any]:
    """The judge's answer: ``{"shift": [num_slots ints in -3..3], "reason": str}``."""
    return {"type": "object",
            "properties": {"shift": {"type": "array", "items": {"type": "integer", "enum": list(range(-3, 4))},
                                     "minItems": num_slots, "maxItems": num_slots},
                           "reason": {"type": "string"}},
            "required": ["shift", "reason"], "additionalProperties": False}


def response_format(form: str, schema: dict[str, Any], name: str = "calbench_envelope") -> dict[str, Any] | None:
    """The ``response_format`` body field for a request form (``None`` for ``off``)."""
    if form == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}
    if form == "json_object":
        return {"type": "json_object", "schema": schema}
    if form == "json_object_plain":
        return {"type": "json_object"}
    return None
