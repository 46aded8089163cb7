"""The JSON schema of the reply envelope, per phase, for structured outputs.

``structured`` (``LLMSettings.structured``) decides whether a request carries a format
constraint.  The schema is generated from pydantic models built for *this* call: only
the action types the phase allows and the ranges of this game —

* CHEAP_TALK: the message actions of the enabled channels; a ``dm``'s ``to`` is one of
  the other agents;
* VOLUNTARY: ``reschedule`` only;
* DECISION: ``reschedule`` and ``schedule``, whose ``meeting_id`` is the round's meeting;
* every slot is one of ``0..num_slots-1`` and a reschedule's ``item_id`` one of the items
  on the seat's own calendar.

The rules engine still validates every batch (a schema cannot say "exactly one schedule"
or "the destination must be free"); the schema only keeps a model from writing prose,
inventing keys or naming slots that do not exist.

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
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

__all__ = ["FORMS", "envelope_schema", "reflection_schema", "response_format", "judge_schema"]

#: The request forms ``auto`` tries, in order, before giving up on a constraint.
FORMS = ("json_schema", "json_object")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Nothing(_Strict):
    """An object with no keys: the item type of a list that must stay empty."""


def _lit(values) -> Any:
    values = tuple(values)
    return Literal[values] if values else Literal[-1]  # an impossible value when the list is empty


@lru_cache(maxsize=512)
def _envelope_model(phase: str, channels: tuple[str, ...], others: tuple[int, ...], num_slots: int,
                    meeting_id: int, items: tuple[int, ...]) -> type[BaseModel]:
    slot = _lit(range(num_slots))
    kinds: list[type[BaseModel]] = []
    if phase == "CHEAP_TALK":
        if "dm" in channels:
            kinds.append(create_model("DirectMessage", __base__=_Strict, type=(Literal["dm"], ...),
                                      to=(_lit(others), ...), content=(str, ...)))
        for ch, name in (("participant_groupchat", "ParticipantGroupchat"), ("all_groupchat", "AllGroupchat")):
            if ch in channels:
                kinds.append(create_model(name, __base__=_Strict, type=(Literal[ch], ...), content=(str, ...)))
    elif items:
        kinds.append(create_model("Reschedule", __base__=_Strict, type=(Literal["reschedule"], ...),
                                  item_id=(_lit(items), ...), from_slot=(slot, ...), to_slot=(slot, ...),
                                  justification=(str, ...)))
    if phase == "DECISION":
        kinds.append(create_model("Schedule", __base__=_Strict, type=(Literal["schedule"], ...),
                                  meeting_id=(Literal[meeting_id], ...), slot=(slot, ...)))
    if not kinds:  # nothing this seat could do in this phase: an empty list is the only answer
        actions: Any = (list[_Nothing], Field(..., max_length=0))
    else:
        action = Union[tuple(kinds)] if len(kinds) > 1 else kinds[0]
        actions = (list[action], ...)
    return create_model("Envelope", __base__=_Strict,
                        thinking=(str, Field(..., description="your private reasoning, brief")),
                        actions=actions)


def _strictify(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline ``$defs``, drop titles, make every object closed and all-required (strict mode)."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(defs[node["$ref"].rsplit("/", 1)[-1]])
            out = {k: walk(v) for k, v in node.items() if k not in ("title", "default")}
            if "const" in out and "enum" not in out:  # const is not in every server's grammar subset
                out["enum"] = [out.pop("const")]
            if out.get("type") == "object" and "properties" in out:
                out["required"] = list(out["properties"])
                out["additionalProperties"] = False
            return out
        if isinstance(node, list):
            return [walk(x) for x in node]
        return node

    return walk(schema)


@lru_cache(maxsize=512)
def _envelope_schema(phase: str, channels: tuple[str, ...], others: tuple[int, ...], num_slots: int,
                     meeting_id: int, items: tuple[int, ...]) -> dict[str, Any]:
    model = _envelope_model(phase, channels, others, num_slots, meeting_id, items)
    return _strictify(model.model_json_schema())


def envelope_schema(obs) -> dict[str, Any]:
    """The envelope schema for one observation (``engine.observe`` Turn/Voluntary/Decision)."""
    v = obs.view
    phase = getattr(obs, "phase", "CHEAP_TALK")
    others = tuple(a for a in range(v.num_agents) if a != v.seat)
    items = tuple(sorted({it.item_id for it in v.calendar if it is not None and not it.blocked}))
    return _envelope_schema(phase, tuple(v.channels), others, v.num_slots, int(obs.meeting.id), items)


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
