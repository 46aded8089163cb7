"""A loopback OpenAI-compatible endpoint for tests, benchmarks and offline play.

Real HTTP/1.1 on 127.0.0.1 (``asyncio.start_server`` and a minimal keep-alive handler;
standard library only), answering ``POST /v1/chat/completions`` and ``GET /v1/models``.
It reads the prompts CalBench's LLM persona sends (the header line, the calendar render,
the inbox) and plays a seat:

``cooperative``
    CHEAP_TALK: the first speaker of the meeting sends each other participant the slots
    it can do (free ones, and ones where it would move an errand); each responder answers
    with the subset it can do; the first speaker picks the slot needing the fewest moves
    (ties → lowest) and announces it; responders confirm.  A plain "Let's meet at slot
    X" from any other persona counts as an announcement too.  DECISION: schedule the
    agreed slot, first moving a movable errand out of it to the lowest free slot.
    VOLUNTARY: nothing.  Reflection: −2 for slots a target called free, +1 for slots it
    would have to clear.
``silent``
    ``{"thinking": "", "actions": []}`` to everything.
``chaos``
    cooperative, but the first attempt of a request may instead get a 429 (with
    ``Retry-After``), a 500, prose instead of JSON, JSON in a code fence, or an invalid
    batch — chosen deterministically from ``seed`` and the request body, so a retried
    request (same body) gets through and a run is reproducible.  Once a body is answered
    it is forgotten, so on a long-lived server every game that sends the same requests
    meets the same faults (a game is reproducible, not only the first one).

``sloppy``
    answers like a small model without a format constraint: per request (from ``seed``
    and the body) prose with no JSON, JSON with invented keys and no ``actions`` list, a
    reply cut off mid-JSON (``finish_reason: length``), or the cooperative envelope inside
    chatty prose.  A request that carries a JSON schema (``response_format`` json_schema,
    or json_object with a ``schema``) gets the cooperative envelope, restricted to the
    action types the schema allows — what a grammar-constrained model returns; a plain
    ``{"type": "json_object"}`` gets JSON with invented keys.
``listener``
    cooperative in CHEAP_TALK; in DECISION it schedules the slot the DECISION message says
    the talk produced — "Every participant accepted: slot N", else "The slot the talk settled
    on: slot N", else the last "… decided slot N", else "Talked about: slot N", else its
    lowest free slot — by naming the slot alone
    (``[{"type": "schedule", ...}]``, no moves), as a small model that reads the prompt does.
``literal``
    cooperative in CHEAP_TALK; in DECISION it always schedules the slot in its own words (the
    last slot it announced or confirmed this round, else the slot announced to it), alone,
    even when an errand of its own sits there — on a retry too.
Both write what a grammar-constrained model writes: a ``slot`` the request's schema does not
admit at the start of the reply becomes the admitted slot nearest to it (how a grammar moved
an agreed slot before issue 31).  ``server.decisions`` records per DECISION reply the slot
the model meant and the slot it wrote.
``judge``
    cooperative for seats; answers the LLM judge's questions (``personas.llm.judge``) by
    reading the message with ``engine.freetext.slot_statements``: a slot said to be free
    moves the observer's belief toward free (−2), busy or impossible toward occupied (+2),
    a proposal −1.  Other policies answer the judge with no shift at all.

Context limit: ``context_limit=N`` (tokens, estimated as characters / 4 + 3 per message,
plus the request's ``max_tokens``) answers a longer request with HTTP 400 and the text real
servers give: ``context_style="openai"`` (vLLM and OpenAI: "This model's maximum context
length is N tokens. However, you requested ...") or ``"llamacpp"`` ("the request exceeds
the available context size", with ``n_ctx`` in the body).  ``advertise_context=True``
also lists ``max_model_len`` in ``/v1/models``, as vLLM does.

``formats``: the ``response_format`` types it accepts (default json_schema and
json_object); any other type gets a 400 saying it is not supported, as older servers do.

Faults can also be injected one by one (``server.inject("429")``) for precise tests:
``429``, ``500``, ``context_length``, ``hang`` (answer after ``seconds``), ``drip`` (the whole
answer, status line included, one byte every ``seconds``, default 1: a slow-drip endpoint),
``trickle`` (a 200 stream of empty chunks every ``seconds``, default 0.2, that never says
anything), ``bigint`` (``usage`` numbers past the 64-bit range), ``prose``,
``fenced``, ``invalid_batch``, ``empty``, ``truncated``, ``unauthorized``, ``unauthorized_echo`` (a 401
whose text quotes the ``Authorization`` header it received, as some providers do — for the
redaction tests), ``no_choices`` (a 200 with ``"choices": []``), ``agree`` (the short action
``{"type": "agree", "slot": n}``), ``chatter`` (small talk that names no slot, to each other
participant of the meeting), ``key_in_reply`` (a usual reply whose thinking and every
message carry the key of the request's ``Authorization`` header in the forms a model can
write it: as is, upper-case, reversed, spaced, ROT13, hex, HTML references and split by
zero-width spaces — :func:`key_forms`; for the redaction tests), and replies past the size limits: ``oversized`` (200,000
characters), ``flood`` (200 actions) and ``long_message`` (a 5,000-character message).

``sloppy_mode`` (with ``policy="sloppy"``) copies a small model's habits instead of the
random sloppiness: ``runaway`` — a string that never closes (``thinking``, or a message's
``content``) until ``max_tokens`` cuts the reply, unless the request's schema gives that
string a ``maxLength``; ``copycat`` — every CHEAP_TALK reply also sends the latest example
direct message of the prompt, recipient and text as written (or the per-turn example's short
action); ``parrot`` — every CHEAP_TALK reply also sends the latest message the seat received
back to its sender, word for word (a model that never stops talking); ``echo`` — every CHEAP_TALK
reply repeats the seat's own latest short action of the round when the request's schema admits
its type, else copies the per-turn example's short action (SmolLM2-135M wrote ``ask_costs`` on
four turns in a row while its prompt said "propose slot 3"); ``repeat`` — every CHEAP_TALK reply
is the seat's own previous reply of the round word for word when its thread holds one, else
the per-turn example's short action (SmolLM2-135M passed at a turn that brought nothing, then
passed again, thinking and all, with a cost request in front of it).  ``refuse_keywords``: JSON
schema keywords the server answers with a 400 naming the keyword (as servers whose grammar
lacks one do), to test that ``structured=auto`` drops them.

Streaming: a request with ``"stream": true`` is answered as server-sent events (a role
chunk, the content in at most 64 chunks (four characters each under ``slowgen``), the finish reason, the usage when
``stream_options.include_usage`` asks, then ``[DONE]``), as OpenAI, vLLM and llama.cpp do.
``slowgen=SECONDS`` (``--slowgen``) makes it a slow local model: every "token" (four
characters of the reply) takes that long, streamed as it is made — so a streamed reply
keeps talking all along while the whole answer takes longer than a total-time timeout; a
request without ``stream`` waits for the whole generation, then gets the body at once
(:func:`_slowgen_delivery`).

Slot lists are written and read with ``engine/protocol.py`` (the one owner of the message
protocol); the mock's own sentences ("I can do slots 0, 1 (free) and …") are its own.  This
module is test and offline equipment only: nothing in it is shared with the real client
(``client.py``), which never imports it.

Per-request statistics (``server.stats()``): counts by status and fault, requests per
seat, and *prefix reuse* — the share of each request's prompt that repeats the previous
request of the same conversation, which is what a provider's prompt cache can reuse.

In-process use::

    async with MockLLMServer(policy="cooperative", latency=0.05) as server:
        settings = LLMSettings(base_url=server.base_url)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from engine.actions import EnvelopeError, parse_envelope
from engine.freetext import slot_statements
from engine.model import Errand
from engine.protocol import plain_slots, slots_in_text
from engine.render import parse_calendar_render

from personas.llm.prompts import HEADER_RE

__all__ = ["MockLLMServer", "MockOptionError", "POLICIES", "FAULTS", "RequestRecord", "SLOPPY_MODES",
           "serve_until_stopped"]

POLICIES = ("cooperative", "silent", "chaos", "sloppy", "judge", "listener", "literal")
#: Modes of the ``sloppy`` policy that copy a small model's habits (``MockLLMServer(sloppy_mode=...)``).
SLOPPY_MODES = ("runaway", "copycat", "parrot", "echo", "repeat")
#: The ``response_format`` forms the mock accepts by default (see ``MockLLMServer(formats=...)``).
FORMATS = ("json_schema", "json_object")
_JUDGE_RE = re.compile(r"^=== Judge · Message (\d+) · Observer Agent (\d+) · Sender Agent (\d+) · (\d+) slots ===$",
                       re.M)
FAULTS = ("429", "500", "context_length", "hang", "prose", "fenced", "invalid_batch", "empty", "truncated",
          "unauthorized", "unauthorized_echo", "no_choices", "agree", "oversized", "flood", "long_message",
           "drip", "trickle", "bigint", "chatter", "key_in_reply")

_REFLECT_RE = re.compile(r"^=== Reflection after Round (\d+) · Meeting M(-?\d+) · You are Agent (\d+) ===$", re.M)
_SEAT_RE = re.compile(r"You are Agent (\d+)")
_INBOX_RE = re.compile(r"^\[(\d+)\] From Agent (\d+) \(([^,]+), Meeting M(-?\d+)\): (.*)$", re.M)
_ORDER_RE = re.compile(r"participants \[([\d, ]*)\] \(speaking order \[([\d, ]*)\]\)")
_PARTS_RE = re.compile(r"Meeting M-?\d+ \(participants \[([\d, ]*)\]\)")
_LIST = r"([\d, ]+|none)"
_OFFER_RE = re.compile(r"Meeting M(-?\d+): I can do slots " + _LIST + r" \(free\) and " + _LIST
                       + r" \(would move an errand\)")
_REPLY_RE = re.compile(r"Meeting M(-?\d+): of those I can do slots " + _LIST + r" \(free\) and " + _LIST
                       + r" \(would move an errand\)")
_DECIDE_RE = re.compile(r"(?:let'?s\s+(?:schedule|meet)|agreed|decision|confirm(?:ed|ing)?|settled?)\b[^.?!]*?"
                        r"\bslot\s+(\d+)", re.I)


def _ints(text: str) -> list[int]:
    return [] if text.strip() == "none" else [int(x) for x in re.findall(r"\d+", text)]


_fmt = plain_slots  # "0, 1, 5" / "none": the mock's own lists, read back by _OFFER_RE / _REPLY_RE


# --------------------------------------------------------------------------------------
# Reading a conversation
# --------------------------------------------------------------------------------------
@dataclass
class _Thread:
    """What the mock can read from one request's messages."""

    seat: int
    messages: list[dict[str, Any]]
    last: str
    header: dict[str, str] | None
    reflection: tuple[int, int] | None  # (round_no, meeting id)
    channels: tuple[str, ...]
    num_slots: int

    @classmethod
    def read(cls, messages: list[dict[str, Any]]) -> "_Thread":
        system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
        sm = _SEAT_RE.search(system)
        last = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
        hm = HEADER_RE.search(last)
        rm = _REFLECT_RE.search(last)
        if sm:
            seat = int(sm.group(1))
        elif hm:
            seat = int(hm.group("seat"))
        else:
            seat = int(rm.group(3)) if rm else 0
        channels = tuple(c for c in ("dm", "participant_groupchat", "all_groupchat") if f'"type": "{c}"' in system)
        ns = re.search(r"(\d+) slots per calendar", system)
        return cls(seat, messages, last, hm.groupdict() if hm else None,
                   (int(rm.group(1)), int(rm.group(2))) if rm else None, channels or ("dm",),
                   int(ns.group(1)) if ns else 16)

    def round_user_texts(self, round_no: int) -> list[str]:
        out = []
        for m in self.messages:
            if m.get("role") != "user":
                continue
            h = HEADER_RE.search(m.get("content") or "")
            if h and int(h.group("round")) == round_no:
                out.append(m["content"])
        return out

    def round_replies(self, round_no: int) -> list[str]:
        """This seat's assistant turns in ``round_no``, as written."""
        out: list[str] = []
        in_round = False
        for m in self.messages:
            if m.get("role") == "user":
                h = HEADER_RE.search(m.get("content") or "")
                in_round = bool(h and int(h.group("round")) == round_no)
            elif m.get("role") == "assistant" and in_round:
                out.append(m.get("content") or "")
        return out

    def round_own_actions(self, round_no: int) -> list[dict[str, Any]]:
        """Actions this seat already sent in ``round_no`` (from the assistant turns)."""
        out: list[dict[str, Any]] = []
        for text in self.round_replies(round_no):
            try:
                env = parse_envelope(text)
            except EnvelopeError:
                continue
            out.extend(a.to_json() for a in env.actions)
        return out

    def calendar(self):
        for m in reversed(self.messages):
            if m.get("role") == "user" and re.search(r"^Slot\s+0:", m.get("content") or "", re.M):
                try:
                    return parse_calendar_render(m["content"])
                except ValueError:
                    continue
        return None

    def participants(self, texts: list[str]) -> tuple[list[int], list[int]]:
        for t in texts:
            m = _ORDER_RE.search(t)
            if m:
                return _ints(m.group(1)), _ints(m.group(2))
        for t in texts:
            m = _PARTS_RE.search(t)
            if m:
                p = _ints(m.group(1))
                return p, p
        return [], []

    @staticmethod
    def inbox(texts: list[str]) -> list[tuple[int, str]]:
        seen = []
        for t in texts:
            for m in _INBOX_RE.finditer(t):
                seen.append((int(m.group(2)), m.group(5)))
        return seen


def _movable(cal, slot: int) -> bool:
    it = cal[slot]
    return isinstance(it, Errand) and not it.blocked and any(x is None for i, x in enumerate(cal) if i != slot)


# --------------------------------------------------------------------------------------
# Policies
# --------------------------------------------------------------------------------------
def _send(th: _Thread, to: int, content: str) -> dict[str, Any]:
    if "dm" in th.channels:
        return {"type": "dm", "to": to, "content": content}
    if "participant_groupchat" in th.channels:
        return {"type": "participant_groupchat", "content": content}
    return {"type": "all_groupchat", "content": content}


def _agreed(th: _Thread, round_no: int, texts: list[str]) -> int | None:
    """The last slot announced or confirmed this round, by anyone (own messages included)."""
    found: list[tuple[int, int]] = []  # (order, slot)
    order = 0
    own_round = False
    for m in th.messages:
        c = m.get("content") or ""
        if m.get("role") == "user":
            h = HEADER_RE.search(c)
            own_round = bool(h and int(h.group("round")) == round_no)
            if own_round:
                for im in _INBOX_RE.finditer(c):
                    for dm in _DECIDE_RE.finditer(im.group(5)):
                        order += 1
                        found.append((order, int(dm.group(1))))
        elif m.get("role") == "assistant" and own_round:
            try:
                env = parse_envelope(c)
            except EnvelopeError:
                continue
            for a in env.actions:
                for dm in _DECIDE_RE.finditer(getattr(a, "content", "") or ""):
                    order += 1
                    found.append((order, int(dm.group(1))))
    return found[-1][1] if found else None


def _feasible(cal) -> tuple[list[int], list[int]]:
    free = [s for s, it in enumerate(cal) if it is None]
    movable = [s for s in range(len(cal)) if _movable(cal, s)]
    return free, movable


def _offered_slots(sender: int, content: str, num_agents_hint: int, num_slots: int) -> list[int] | None:
    m = _OFFER_RE.search(content)
    if m:
        return _ints(m.group(2)) + _ints(m.group(3))
    stm = slot_statements(content, sender=sender, recipients=(), num_agents=max(num_agents_hint, sender + 1, 2),
                          num_slots=num_slots)
    slots = [s.slot for s in stm if s.target == sender and s.evidence >= 0.7]
    if not slots:  # e.g. a scripted peer asking "your cost for slots 0–15": every slot it names
        slots = slots_in_text(content, num_slots)
    return list(dict.fromkeys(slots)) or None


_LABELLED_RE = re.compile(r"\b(free|open|available|movable|possible)[^:;.]{0,30}:\s*([\d ,–—\-]+)", re.I)


def _expand(text: str, num_slots: int) -> list[int]:
    out: list[int] = []
    for a, b in re.findall(r"(\d{1,3})(?:\s*[-–—]\s*(\d{1,3}))?", text):
        lo, hi = int(a), int(b) if b else int(a)
        out.extend(s for s in range(lo, hi + 1) if 0 <= s < num_slots)
    return out


def _reply_lists(sender: int, content: str, num_agents: int, num_slots: int) -> tuple[list[int], list[int]] | None:
    """(free, would-move) slots a responder reported, in our format, "free: 5, 7; movable: 0–4", or prose."""
    m = _REPLY_RE.search(content) or _OFFER_RE.search(content)
    if m:
        return _ints(m.group(2)), _ints(m.group(3))
    labelled = _LABELLED_RE.findall(content)
    if labelled:
        free = [x for k, t in labelled if k.lower() in ("free", "open", "available") for x in _expand(t, num_slots)]
        mov = [x for k, t in labelled if k.lower() in ("movable", "possible") for x in _expand(t, num_slots)]
        return free, mov
    got = _offered_slots(sender, content, num_agents, num_slots)
    return ([], got) if got is not None else None


def cooperative(th: _Thread) -> dict[str, Any]:
    if th.reflection is not None:
        return _reflect(th)
    h = th.header
    if h is None:
        return {"thinking": "I cannot tell which phase this is; passing.", "actions": []}
    round_no, phase, mid = int(h["round"]), h["phase"], int(h["meeting"])
    cal = th.calendar()
    texts = th.round_user_texts(round_no)
    parts, order = th.participants(texts)
    me = th.seat
    if cal is None or me not in parts:
        return {"thinking": "Not my meeting; nothing to add.", "actions": []}
    free, movable = _feasible(cal)
    if phase == "VOLUNTARY":
        return {"thinking": "Nothing to move.", "actions": []}
    if phase == "DECISION":
        return _decide(th, cal, mid, round_no, texts, free)
    # CHEAP_TALK
    others = [p for p in parts if p != me]
    lead = order[0] if order else min(parts)
    inbox = th.inbox(texts)
    own = th.round_own_actions(round_no)
    own_text = [a.get("content", "") for a in own]
    agreed = _agreed(th, round_no, texts)
    if me == lead:
        if not any(_OFFER_RE.search(t) or _DECIDE_RE.search(t) for t in own_text):
            if agreed is not None:  # someone else announced first
                return {"thinking": f"Slot {agreed} was announced.", "actions": []}
            content = (f"Meeting M{mid}: I can do slots {_fmt(free)} (free) and {_fmt(movable)} "
                       "(would move an errand). Which of these work for you?")
            return {"thinking": "Offering my feasible slots.", "actions": [_send(th, o, content) for o in others]}
        if agreed is not None:
            mine = [int(m.group(1)) for t in own_text for m in _DECIDE_RE.finditer(t)]
            if mine and mine[-1] != agreed:  # another participant announced later: go with it, once
                return {"thinking": f"Slot {agreed} was announced after mine; accepting it.",
                        "actions": [_send(th, o, f"Agreed: Meeting M{mid} at slot {agreed}.") for o in others]}
            return {"thinking": f"Agreed on slot {agreed}; done.", "actions": []}
        replies: dict[int, tuple[list[int], list[int]]] = {}
        heard: set[int] = set()
        for sender, content in inbox:
            if sender not in others:
                continue
            heard.add(sender)
            got = _reply_lists(sender, content, len(parts), th.num_slots)
            if got is not None:
                replies[sender] = got
        if heard != set(others):
            return {"thinking": "Waiting for replies.", "actions": []}
        slot = _choose(free, movable, replies)
        content = f"Let's schedule Meeting M{mid} at slot {slot}."
        return {"thinking": f"Slot {slot} needs the fewest moves.", "actions": [_send(th, o, content) for o in others]}
    # a responder
    if agreed is not None:
        mine = [int(m.group(1)) for t in own_text for m in _DECIDE_RE.finditer(t)]
        if not mine or mine[-1] != agreed:
            return {"thinking": f"Confirming slot {agreed}.",
                    "actions": [_send(th, lead, f"Agreed: Meeting M{mid} at slot {agreed}.")]}
        return {"thinking": "Already confirmed.", "actions": []}
    if any(_REPLY_RE.search(t) for t in own_text):
        return {"thinking": "Waiting for the decision.", "actions": []}
    offered = None
    for sender, content in inbox:
        if sender == lead:
            offered = _offered_slots(sender, content, len(parts), th.num_slots)
            if offered is not None:
                break
    if offered is None:
        return {"thinking": "Waiting for the first speaker.", "actions": []}
    my_free = [s for s in offered if s in free]
    my_mov = [s for s in offered if s in movable]
    content = (f"Meeting M{mid}: of those I can do slots {_fmt(my_free)} (free) and {_fmt(my_mov)} "
               "(would move an errand).")
    return {"thinking": "Answering with the offered slots I can do.", "actions": [_send(th, lead, content)]}


def _choose(free: list[int], movable: list[int], replies: dict[int, tuple[list[int], list[int]]]) -> int:
    mine = {s: 0 for s in free} | {s: 1 for s in movable}
    best = None
    for s, cost in mine.items():
        moves = cost
        ok = True
        for f, mv in replies.values():
            if s in f:
                continue
            if s in mv:
                moves += 1
            else:
                ok = False
        key = (0 if ok else 1, moves, s)
        if best is None or key < best[0]:
            best = (key, s)
    return best[1] if best else 0


def _decide(th: _Thread, cal, mid: int, round_no: int, texts: list[str], free: list[int]) -> dict[str, Any]:
    agreed = _agreed(th, round_no, texts)
    retry = "was rejected" in th.last
    slot = agreed
    if slot is None or not 0 <= slot < len(cal) or (retry and cal[slot] is not None and not _movable(cal, slot)):
        slot = free[0] if free else 0
    actions: list[dict[str, Any]] = []
    if cal[slot] is not None and _movable(cal, slot):
        dest = next(s for s, it in enumerate(cal) if it is None and s != slot)
        actions.append({"type": "reschedule", "item_id": cal[slot].errand_id, "from_slot": slot, "to_slot": dest,
                        "justification": "clearing the agreed slot"})
    actions.append({"type": "schedule", "meeting_id": mid, "slot": slot})
    return {"thinking": f"Scheduling Meeting M{mid} at slot {slot}.", "actions": actions}


def _reflect(th: _Thread) -> dict[str, Any]:
    round_no, _ = th.reflection
    m = re.search(r"For each other agent \(([^)]*)\)", th.last)
    targets = [int(t) for t in re.findall(r"\d+", m.group(1))] if m else []
    ns = re.search(r"exactly (\d+) integers", th.last)
    n_slots = int(ns.group(1)) if ns else th.num_slots
    deltas = {str(t): [0] * n_slots for t in targets if t != th.seat}
    for sender, content in th.inbox(th.round_user_texts(round_no)):
        row = deltas.get(str(sender))
        if row is None:
            continue
        m = _OFFER_RE.search(content) or _REPLY_RE.search(content)
        if m:
            for s in _ints(m.group(2)):
                if 0 <= s < n_slots:
                    row[s] = -2
            for s in _ints(m.group(3)):
                if 0 <= s < n_slots:
                    row[s] = 1
    return {"deltas": deltas}


_ACCEPTED_RE = re.compile(r"^- Every participant accepted: slots? (\d+)", re.M)
_DECIDED_RE = re.compile(r"^- (?:You|Agent \d+) decided slot (\d+)", re.M)
_TALKED_RE = re.compile(r"^- Talked about: slot (\d+)", re.M)
_SETTLED_RE = re.compile(r"^- The slot the talk settled on: slot (\d+)", re.M)


def _slot_only(th: _Thread, slot: int, mid: int, why: str) -> dict[str, Any]:
    return {"thinking": f"Meeting M{mid} at slot {slot}: {why}.",
            "actions": [{"type": "schedule", "meeting_id": mid, "slot": slot}], "_meant": slot}


def listener(th: _Thread) -> dict[str, Any]:
    """Cooperative talk; DECISION: the slot the DECISION message says the talk produced."""
    h = th.header
    if h is None or h["phase"] != "DECISION" or th.reflection is not None:
        return cooperative(th)
    mid = int(h["meeting"])
    said = "\n".join(t for t in th.round_user_texts(int(h["round"])) if "· DECISION ·" in t)  # retries too
    for rx, why in ((_ACCEPTED_RE, "every participant accepted it"), (_SETTLED_RE, "the talk settled on it"),
                    (_DECIDED_RE, "it was decided"), (_TALKED_RE, "the talk was about it")):
        found = rx.findall(said)
        if found:
            return _slot_only(th, int(found[-1] if rx is _DECIDED_RE else found[0]), mid, why)
    cal = th.calendar()
    free = [s for s, it in enumerate(cal or []) if it is None]
    return _slot_only(th, free[0] if free else 0, mid, "nothing was agreed, my first free slot")


def literal(th: _Thread) -> dict[str, Any]:
    """Cooperative talk; DECISION: the slot in its own words, alone, whatever sits there."""
    h = th.header
    if h is None or h["phase"] != "DECISION" or th.reflection is not None:
        return cooperative(th)
    round_no, mid = int(h["round"]), int(h["meeting"])
    own = [int(m.group(1)) for a in th.round_own_actions(round_no)
           for m in _DECIDE_RE.finditer(a.get("content") or "")]
    slot = own[-1] if own else _agreed(th, round_no, th.round_user_texts(round_no))
    if slot is None:
        cal = th.calendar()
        slot = next((s for s, it in enumerate(cal or []) if it is None), 0)
    return _slot_only(th, slot, mid, "as I said in the talk")


def _grammar_slot(envelope: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A reply that starts with a ``schedule`` as a grammar admits it: its slot, when the
    schema offers it there, else the admitted slot nearest to it."""
    acts = list(envelope.get("actions") or [])
    if not acts or acts[0].get("type") != "schedule":
        return envelope
    spec = (schema.get("properties") or {}).get("actions")
    allowed: set[int] = set()
    for arr in (spec.get("anyOf") if isinstance(spec, dict) and "anyOf" in spec else [spec]):
        if not isinstance(arr, dict):
            continue
        first = (arr.get("prefixItems") or [None])[0] if arr.get("prefixItems") else arr.get("items")
        for alt in (first.get("anyOf", [first]) if isinstance(first, dict) else []):
            props = alt.get("properties") or {}
            if (props.get("type") or {}).get("enum") == ["schedule"]:
                allowed.update((props.get("slot") or {}).get("enum") or [])
    slot = acts[0].get("slot")
    if not allowed or slot in allowed:
        return envelope
    forced = min(allowed, key=lambda s: (abs(s - slot), s))
    return {**envelope, "actions": [{**acts[0], "slot": forced}] + acts[1:]}


def silent(th: _Thread) -> dict[str, Any]:
    if th.reflection is not None:
        return {"deltas": {}}
    return {"thinking": "", "actions": []}


_POLICY_FNS: dict[str, Callable[[_Thread], dict[str, Any]]] = {"silent": silent, "listener": listener,
                                                                "literal": literal}


def _invalid(th: _Thread, envelope: dict[str, Any]) -> dict[str, Any]:
    phase = (th.header or {}).get("phase")
    mid = int((th.header or {}).get("meeting", 0))
    if phase == "DECISION":
        return {"thinking": "two schedules", "actions": [{"type": "schedule", "meeting_id": mid, "slot": 0},
                                                         {"type": "schedule", "meeting_id": mid, "slot": 1}]}
    if phase == "VOLUNTARY":
        return {"thinking": "not allowed here", "actions": [{"type": "schedule", "meeting_id": mid, "slot": 0}]}
    return {"thinking": "writing to myself", "actions": [{"type": "dm", "to": th.seat, "content": "note to self"}]}


# --------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------
@dataclass
class RequestRecord:
    index: int
    seat: int | None
    model: str | None
    conversation: str
    prompt_chars: int
    reused_chars: int
    has_previous: bool
    phase: str | None
    status: int = 0
    fault: str | None = None
    started: float = 0.0
    ended: float = 0.0
    stream: bool = False  # the request asked for a streamed reply (and got one, if it was answered 200)
    bytes_total: int = 0  # bytes of the answer (drip, slowgen and streamed answers)
    bytes_sent: int = 0  # of those, written before the answer ended or the client went away
    client_gone: bool = False  # the client closed the connection before the whole answer was written
    max_tokens: int | None = None  # the reply budget the request asked for
    sampling: dict[str, Any] | None = None  # every other field of the body (temperature, top_p, seed, stop, ...)
    progress: bool = False  # the request asked for prompt-reading progress events (return_progress)
    #: Characters of messages the same seat's previous request already held that this one sends
    #: again after the point where it stops repeating that request: what a prefix cache must
    #: read again (a prompt-cache cliff when > 0; 0 for a request that extends the previous one).
    resent_chars: int = 0


@dataclass
class _Injected:
    kind: str
    seat: int | None = None
    phase: str | None = None
    retry_after: float | None = None
    seconds: float | None = None


def _serialise(messages: list[dict[str, Any]]) -> list[str]:
    return [f"{m.get('role')}\x1f{m.get('content') if isinstance(m.get('content'), str) else json.dumps(m.get('content'))}\x1e"
            for m in messages]


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x == y:
            n += len(x)
            continue
        k = 0
        for cx, cy in zip(x, y):
            if cx != cy:
                break
            k += 1
        return n + k
    return n


def _resent(prev: list[str] | None, ser: list[str]) -> int:
    """Characters of ``prev``'s messages that ``ser`` sends again after the first message in
    which the two differ (see ``RequestRecord.resent_chars``)."""
    if not prev:
        return 0
    i = 0
    while i < min(len(prev), len(ser)) and prev[i] == ser[i]:
        i += 1
    old = set(prev[i:])
    return sum(len(x) for x in ser[i + 1:] if x in old)


# Body fields that shape the request rather than the sampling (RequestRecord.sampling leaves them out).
_STRUCTURAL = frozenset({"model", "messages", "stream", "stream_options", "response_format", "max_tokens",
                         "max_completion_tokens", "return_progress"})

# Faults after which the client sends the very same request again (its own retry loop).
_RESENT = frozenset({"429", "500", "hang", "drip", "trickle"})


class MockLLMServer:
    """The loopback endpoint.  ``port=0`` picks a free port; see :attr:`base_url`."""

    def __init__(self, policy: str = "cooperative", *, latency: float = 0.0, seed: int = 0,
                 host: str = "127.0.0.1", port: int = 0, retry_after: float = 1.0,
                 context_limit: int | None = None, chaos_rate: float = 0.4, context_style: str = "openai",
                 advertise_context: bool = False, formats: tuple[str, ...] = FORMATS,
                 sloppy_rate: float = 1.0, sloppy_mode: str | None = None,
                 refuse_keywords: tuple[str, ...] = (), slowgen: float | None = None,
                 slowprompt: float | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
        if sloppy_mode is not None and sloppy_mode not in SLOPPY_MODES:
            raise ValueError(f"unknown sloppy mode {sloppy_mode!r}; choose from {', '.join(SLOPPY_MODES)}")
        self.policy = policy
        self.latency = float(latency)
        self.seed = int(seed)
        self.host = host
        self.port = int(port)
        self.retry_after = retry_after
        self.context_limit = context_limit
        self.context_style = context_style
        self.advertise_context = advertise_context
        self.formats = tuple(formats)
        self.sloppy_rate = sloppy_rate
        self.sloppy_mode = sloppy_mode  # runaway / copycat (see _small_model_mode); sloppy policy only
        self.refuse_keywords = tuple(refuse_keywords)  # JSON-schema keywords answered with a 400 naming them
        self.slowgen = float(slowgen) if slowgen else None
        self.slowprompt = float(slowprompt) if slowprompt else None
        self.formats_seen: Counter[str] = Counter()
        self.models_requests = 0
        self.chaos_rate = chaos_rate
        self.records: list[RequestRecord] = []
        self.decisions: list[dict[str, Any]] = []  # listener / literal: per DECISION reply, the slot meant and written
        self.auth_headers_seen = 0
        self._server: asyncio.base_events.Server | None = None
        self._injected: list[_Injected] = []
        self._threads: dict[str, list[list[str]]] = {}  # system prompt hash -> last request of each thread
        self._seat_last: dict[int, list[str]] = {}  # seat -> its previous request (serialised messages)
        self._attempts: Counter[str] = Counter()
        self._in_flight = 0
        self.max_in_flight = 0
        self._conns: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task] = set()
        self._auth: str | None = None  # the last request's Authorization header (unauthorized_echo only)

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    async def start(self) -> "MockLLMServer":
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for w in list(self._conns):
            w.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def __aenter__(self) -> "MockLLMServer":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        await self._server.serve_forever()

    # -- faults ---------------------------------------------------------------------------
    def inject(self, kind: str, *, count: int = 1, seat: int | None = None, phase: str | None = None,
               retry_after: float | None = None, seconds: float | None = None) -> None:
        """Answer the next ``count`` chat requests with fault ``kind``.

        ``seat`` / ``phase`` (CHEAP_TALK, VOLUNTARY, DECISION, REFLECTION) restrict which
        requests it hits; ``retry_after`` overrides the 429's header, ``seconds`` the hang.
        """
        if kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r}; choose from {', '.join(FAULTS)}")
        for _ in range(count):
            self._injected.append(_Injected(kind, seat, phase, retry_after, seconds))

    @property
    def pending_faults(self) -> int:
        return len(self._injected)

    def _take_fault(self, seat: int | None, phase: str | None, body_key: str) -> _Injected | None:
        for i, f in enumerate(self._injected):
            if (f.seat is None or f.seat == seat) and (f.phase is None or f.phase == phase):
                return self._injected.pop(i)
        if self.policy != "chaos":
            return None
        attempt = self._attempts[body_key]
        if attempt > 0:
            return None
        rng = random.Random(f"{self.seed}:{body_key}")
        x = rng.random()
        if x >= self.chaos_rate:
            return None
        kinds = ("429", "500", "prose", "fenced", "invalid_batch")
        return _Injected(kinds[int(x / self.chaos_rate * len(kinds)) % len(kinds)])

    # -- statistics -----------------------------------------------------------------------
    def _match_thread(self, ser: list[str]) -> tuple[str, list[str] | None, int]:
        """Find the conversation this request continues.

        A request continues an earlier one (same system prompt) when it repeats at least
        that request's first two messages and all of its messages but the last (the last
        may be a reflection question, which is not kept in the thread).  Returns ``(thread
        id, previous request or None, characters repeated from it)``.
        """
        sys_key = hashlib.sha1((ser[0] if ser else "").encode()).hexdigest()[:12]
        threads = self._threads.setdefault(sys_key, [])
        best_i, best_n = -1, -1
        for i, prev in enumerate(threads):
            same = 0
            for x, y in zip(ser, prev):
                if x != y:
                    break
                same += 1
            if same >= max(2, len(prev) - 1) and same > best_n:
                best_i, best_n = i, same
        if best_i < 0:
            threads.append(ser)
            return f"{sys_key}:{len(threads) - 1}", None, 0
        prev = threads[best_i]
        threads[best_i] = ser  # the same conversation, one step further
        return f"{sys_key}:{best_i}", prev, _common_prefix(ser, prev)

    def stats(self) -> dict[str, Any]:
        recs = [r for r in self.records if r.conversation]
        with_prev = [r for r in recs if r.has_previous and r.prompt_chars]
        done = [r for r in recs if r.ended]
        span = (max(r.ended for r in done) - min(r.started for r in done)) if done else 0.0
        return {
            "requests": len(recs),
            "by_status": dict(sorted(Counter(r.status for r in recs).items())),
            "faults": dict(sorted(Counter(r.fault for r in recs if r.fault).items())),
            "per_seat": dict(sorted(Counter(r.seat for r in recs if r.seat is not None).items())),
            "conversations": len({r.conversation for r in recs}),
            "prompt_chars": sum(r.prompt_chars for r in recs),
            "reused_chars": sum(r.reused_chars for r in recs),
            "prefix_reuse_mean": (sum(r.reused_chars / r.prompt_chars for r in with_prev) / len(with_prev))
            if with_prev else 0.0,
            "prefix_reuse_weighted": (sum(r.reused_chars for r in with_prev) / sum(r.prompt_chars for r in with_prev))
            if with_prev else 0.0,
            "prefix_reuse_all": (sum(r.reused_chars for r in recs) / sum(r.prompt_chars for r in recs))
            if recs else 0.0,
            "max_in_flight": self.max_in_flight,
            "span_s": span,
            "requests_per_second": len(done) / span if span > 0 else 0.0,
            "auth_headers_seen": self.auth_headers_seen,
            "response_formats": dict(sorted(self.formats_seen.items())),
        }

    # -- HTTP -----------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._conns.add(writer)
        try:
            while True:
                line = await reader.readline()
                if not line or not line.strip():
                    break
                try:
                    method, target, _version = line.decode("latin-1").split(None, 2)
                except ValueError:
                    await self._write(writer, 400, {"error": {"message": "bad request line"}}, close=True)
                    break
                headers: dict[str, str] = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                body = await self._read_body(reader, headers)
                if "authorization" in headers:
                    self.auth_headers_seen += 1  # counted, never stored
                close = headers.get("connection", "").lower() == "close"
                self._auth = headers.get("authorization")
                status, extra_headers, payload = await self._dispatch(method, target.split("?")[0], body)
                if isinstance(payload, _Delivery):
                    try:
                        more = await _deliver(writer, status, extra_headers, payload)
                    finally:
                        if payload.in_flight:
                            payload.in_flight = False
                            self._in_flight -= 1
                    if not more:
                        break  # a streamed or dripped answer ends its connection
                    continue
                await self._write(writer, status, payload, extra_headers, close=close)
                if close:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._conns.discard(writer)
            if task is not None:
                self._tasks.discard(task)
            try:
                writer.close()
            except Exception:  # pragma: no cover - the socket is gone already
                pass

    @staticmethod
    async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
        if "content-length" in headers:
            n = int(headers["content-length"] or 0)
            return await reader.readexactly(n) if n else b""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(await reader.readexactly(size))
                await reader.readline()
            return b"".join(chunks)
        return b""

    @staticmethod
    async def _write(writer: asyncio.StreamWriter, status: int, payload: Any, extra: dict[str, str] | None = None,
                     *, close: bool = False) -> None:
        reasons = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 429: "Too Many Requests",
                   500: "Internal Server Error"}
        data = json.dumps(payload).encode()
        head = [f"HTTP/1.1 {status} {reasons.get(status, 'Status')}", "Content-Type: application/json",
                f"Content-Length: {len(data)}", f"Connection: {'close' if close else 'keep-alive'}"]
        for k, v in (extra or {}).items():
            head.append(f"{k}: {v}")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
        await writer.drain()

    async def _dispatch(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], Any]:
        if method == "GET" and path.rstrip("/") in ("/v1/models", "/models"):
            self.models_requests += 1
            extra = {"max_model_len": self.context_limit} if self.advertise_context and self.context_limit else {}
            return 200, {}, {"object": "list", "data": [
                {"id": f"mock-{p}", "object": "model", "created": 0, "owned_by": "calbench", **extra}
                for p in POLICIES]}
        if method == "POST" and path.rstrip("/") in ("/v1/chat/completions", "/chat/completions"):
            try:
                req = json.loads(body or b"{}")
                messages = req["messages"]
                if not isinstance(messages, list):
                    raise TypeError
            except (ValueError, KeyError, TypeError):
                return 400, {}, _error("the body must be JSON with a 'messages' list", "invalid_request_error")
            return await self._chat(req, messages)
        return 404, {}, _error(f"no route for {method} {path}", "not_found")

    async def _chat(self, req: dict[str, Any], messages: list[dict[str, Any]]) -> tuple[int, dict[str, str], Any]:
        th = _Thread.read(messages)
        ser = _serialise(messages)
        prompt_chars = sum(len(x) for x in ser)
        conv, prev, reused = self._match_thread(ser)
        body_key = hashlib.sha1("".join(ser).encode()).hexdigest()
        rec = RequestRecord(len(self.records), th.seat, req.get("model"), conv, prompt_chars, reused,
                            prev is not None, (th.header or {}).get("phase") or ("REFLECTION" if th.reflection else None),
                            started=time.perf_counter())
        if th.seat is not None and th.reflection is None:
            rec.resent_chars = _resent(self._seat_last.get(th.seat), ser)
            self._seat_last[th.seat] = ser
        self.records.append(rec)
        self._in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self._in_flight)
        delivery = None
        try:
            fault = self._take_fault(th.seat, rec.phase, body_key)
            if fault is not None and fault.kind in _RESENT:
                self._attempts[body_key] += 1  # the client sends this body again: let that through
            else:
                # answered: forget the body, so the next game that sends it meets the same
                # chaos (a long-lived server gives every game the same faults)
                self._attempts.pop(body_key, None)
            if fault and fault.kind == "hang":
                await asyncio.sleep(fault.seconds if fault.seconds is not None else 30.0)
            elif self.latency:
                await asyncio.sleep(self.latency)
            rec.fault = fault.kind if fault else None
            status, headers, payload = self._answer(req, th, fault, prompt_chars, reused)
            rec.status = status
            rec.stream = bool(req.get("stream"))
            rec.sampling = {k: v for k, v in req.items() if k not in _STRUCTURAL}
            mt = req.get("max_tokens", req.get("max_completion_tokens"))
            rec.max_tokens = mt if isinstance(mt, int) else None
            delivery = _delivery_for(req, status, payload, fault, self.slowgen, rec, self.slowprompt)
            if delivery is not None and delivery.wait:  # slowgen without streaming: the whole generation first
                await asyncio.sleep(delivery.wait)
                delivery = None if not (delivery.stream or delivery.drip) else delivery
            if delivery is not None:
                delivery.in_flight = True  # still in flight until it is written (_handle releases it)
            return status, headers, (delivery if delivery is not None else payload)
        finally:
            if delivery is None or not delivery.in_flight:
                self._in_flight -= 1
            rec.ended = time.perf_counter()

    def _answer(self, req: dict[str, Any], th: _Thread, fault: _Injected | None, prompt_chars: int,
                reused: int) -> tuple[int, dict[str, str], Any]:
        kind = fault.kind if fault else None
        p_tok = estimate_tokens(req.get("messages") or [])
        want = req.get("max_tokens") or req.get("max_completion_tokens") or 0
        over = self.context_limit is not None and p_tok + int(want or 0) > self.context_limit
        if over:
            kind = "context_length"
        rf = req.get("response_format")
        rf_type = rf.get("type") if isinstance(rf, dict) else None
        self.formats_seen[(rf_type or "none") + ("+schema" if _request_schema(rf) is not None else "")] += 1
        if rf_type is not None and rf_type not in self.formats and kind is None:
            return 400, {}, _error(f"response_format type '{rf_type}' is not supported by this server",
                                   "invalid_request_error", "unsupported_response_format")
        schema = _request_schema(rf)
        refused = _refused_keyword(schema, self.refuse_keywords) if kind is None else None
        if refused is not None:
            return 400, {}, _error(f"JSON schema keyword '{refused}' is not supported", "invalid_request_error",
                                   "unsupported_schema")
        if kind == "429":
            ra = fault.retry_after if fault and fault.retry_after is not None else self.retry_after
            return 429, {"Retry-After": f"{ra:g}"}, _error("Rate limit reached for requests (mock).",
                                                            "rate_limit_error", "rate_limit_exceeded")
        if kind == "500":
            return 500, {}, _error("The server had an error while processing your request (mock).", "server_error")
        if kind == "unauthorized":
            return 401, {}, _error("Incorrect API key provided (mock).", "invalid_request_error", "invalid_api_key")
        if kind == "unauthorized_echo":
            return 401, {}, _error(f"Incorrect API key provided: {self._auth or 'none'}.", "invalid_request_error",
                                   "invalid_api_key")
        if kind == "context_length":
            limit = self.context_limit or 4096
            if self.context_style == "llamacpp":
                body = {"error": {"code": 400, "message": "the request exceeds the available context size, try "
                                  "increasing it", "type": "exceed_context_size_error",
                                  "n_prompt_tokens": p_tok, "n_ctx": limit}}
                return 400, {}, body
            return 400, {}, _error(f"This model's maximum context length is {limit} tokens. However, you "
                                   f"requested {p_tok + int(want or 0)} tokens ({p_tok} in the messages, "
                                   f"{int(want or 0)} in the completion). Please reduce the length of the "
                                   "messages or completion.", "invalid_request_error", "context_length_exceeded")
        judge_q = _JUDGE_RE.search(th.last)
        finish = "stop"
        if judge_q:
            envelope = _judge(th, judge_q) if self.policy == "judge" else {
                "shift": [0] * int(judge_q.group(4)), "reason": "no change"}
        else:
            envelope = _POLICY_FNS.get(self.policy, cooperative)(th)
            meant = envelope.pop("_meant", None)
            if schema is not None:
                envelope = _conform(envelope, schema)
                if meant is not None:
                    envelope = _grammar_slot(envelope, schema)
            if meant is not None:
                wrote = next((a.get("slot") for a in envelope.get("actions") or [] if a.get("type") == "schedule"),
                             None)
                self.decisions.append({"seat": th.seat, "round": int((th.header or {}).get("round", 0)),
                                       "retry": "was rejected" in th.last, "meant": meant, "wrote": wrote})
        sloppy = None
        if self.policy == "sloppy" and self.sloppy_mode in SLOPPY_MODES and not judge_q and th.reflection is None:
            sloppy = _small_model_mode(self.sloppy_mode, envelope, th, schema, req)
        elif self.policy == "sloppy" and schema is None and not judge_q:
            sloppy = _sloppy(envelope, rf_type, random.Random(f"{self.seed}:sloppy:{hashlib.sha1(json.dumps(req.get('messages')).encode()).hexdigest()}"), self.sloppy_rate)
        if kind == "invalid_batch":
            envelope = _invalid(th, envelope)
        elif kind == "agree":
            envelope = _agree(th, schema)
        elif kind == "chatter":
            envelope = _chatter(th)
        elif kind in ("oversized", "flood", "long_message"):
            envelope = _oversize(kind, th)
        elif kind == "key_in_reply":
            envelope = _with_key(envelope, (self._auth or "").removeprefix("Bearer ").strip())
        content = json.dumps(envelope)
        if sloppy is not None:
            content, finish = sloppy
        if kind == "prose":
            content = "I think we should find a slot that works for everyone; let me check my calendar first."
        elif kind == "fenced":
            content = f"Here is my reply:\n```json\n{json.dumps(envelope, indent=2)}\n```"
        elif kind == "empty":
            content = ""
        elif kind == "truncated":
            content, finish = content[: max(1, len(content) // 2)], "length"
        if kind == "no_choices":
            return 200, {}, {"id": f"chatcmpl-mock-{len(self.records)}", "object": "chat.completion", "created": 0,
                             "model": req.get("model") or f"mock-{self.policy}", "choices": []}
        c_tok = math.ceil(len(content) / 4)
        if kind == "bigint":  # an endpoint whose counters overflow 64 bits (issue 24.12)
            p_tok, c_tok, reused = 2**70, 2**66 + 1, 2**80
        return 200, {}, {
            "id": f"chatcmpl-mock-{len(self.records)}",
            "object": "chat.completion",
            "created": 0,
            "model": req.get("model") or f"mock-{self.policy}",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": p_tok, "completion_tokens": c_tok, "total_tokens": p_tok + c_tok,
                      "prompt_tokens_details": {"cached_tokens": reused // 4}},
        }


def key_forms(key: str) -> dict[str, str]:
    """The forms of ``key`` the ``key_in_reply`` fault writes (issue 35, 1)."""
    import codecs

    return {"raw": key, "upper": key.upper(), "reversed": key[::-1], "spaced": " ".join(key),
            "rot13": codecs.encode(key, "rot13"), "hex": key.encode().hex(), "hex_upper": key.encode().hex().upper(),
            "html_decimal": "".join(f"&#{ord(c)};" for c in key), "html_hex": "".join(f"&#x{ord(c):x};" for c in key),
            "zero_width": "\u200b".join(key), "soft_hyphen": "\u00ad".join(key)}


def _with_key(envelope: dict[str, Any], key: str) -> dict[str, Any]:
    """``envelope`` with every form of ``key`` in its thinking and in each message it sends."""
    said = " ".join(f"{name}: {form}." for name, form in key_forms(key).items())
    out = dict(envelope, thinking=f"{envelope.get('thinking') or ''} My key, {said}")
    actions = []
    for a in envelope.get("actions") or []:
        if isinstance(a, dict) and isinstance(a.get("content"), str):
            a = dict(a, content=f"{a['content']} Here is my key, {said}")
        actions.append(a)
    out["actions"] = actions
    return out


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    """The mock's token count of a prompt: characters / 4 (rounded up) + 3 per message."""
    n = 0
    for m in messages:
        c = m.get("content") if isinstance(m, dict) else m
        n += math.ceil(len(c if isinstance(c, str) else json.dumps(c)) / 4) + 3
    return n


def _request_schema(rf: Any) -> dict[str, Any] | None:
    """The JSON schema a ``response_format`` carries (json_schema, or llama.cpp's json_object + schema)."""
    if not isinstance(rf, dict):
        return None
    if rf.get("type") == "json_schema" and isinstance(rf.get("json_schema"), dict):
        sch = rf["json_schema"].get("schema")
        return sch if isinstance(sch, dict) else None
    if rf.get("type") == "json_object" and isinstance(rf.get("schema"), dict):
        return rf["schema"]
    return None


def _action_shapes(actions: Any) -> list[dict[str, Any]] | None:
    """Every action object shape an ``actions`` schema allows (``items``, ``prefixItems``,
    ``anyOf`` of arrays), or None when it says nothing about them."""
    if not isinstance(actions, dict):
        return None
    out: list[dict[str, Any]] = []
    arrays = actions.get("anyOf") if "anyOf" in actions else [actions]
    for arr in arrays:
        if not isinstance(arr, dict):
            continue
        for it in list(arr.get("prefixItems") or []) + ([arr["items"]] if isinstance(arr.get("items"), dict) else []):
            for alt in it.get("anyOf", [it]):
                if isinstance(alt, dict):
                    out.append(alt)
    return out


def _allowed_types(schema: dict[str, Any]) -> set[str] | None:
    shapes = _action_shapes((schema.get("properties") or {}).get("actions"))
    if shapes is None:
        return None
    out: set[str] = set()
    for alt in shapes:
        t = ((alt.get("properties") or {}).get("type") or {})
        out.update(t.get("enum") or ([t["const"]] if "const" in t else []))
    return out


def _string_limits(schema: dict[str, Any] | None) -> dict[str, int | None]:
    """The ``maxLength`` of the envelope's ``thinking`` and of message ``content`` (None: unbounded)."""
    props = (schema or {}).get("properties") or {}
    content = None
    for alt in _action_shapes(props.get("actions")) or []:
        c = (alt.get("properties") or {}).get("content")
        if isinstance(c, dict):
            content = c.get("maxLength")
            break
    return {"thinking": (props.get("thinking") or {}).get("maxLength") if schema else None, "content": content}


def _conform(envelope: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """What a grammar-constrained model can write: only the action types the schema allows,
    every key the schema requires, nothing else."""
    if "deltas" in (schema.get("properties") or {}) or "actions" not in (schema.get("properties") or {}):
        return envelope
    allowed = _allowed_types(schema)
    limits = _string_limits(schema)
    acts = []
    for a in envelope.get("actions") or []:
        if allowed is not None and a.get("type") not in allowed:
            continue
        if a.get("type") == "reschedule":
            a = {**a, "justification": (a.get("justification") or "")[:80]}
        if "content" in a and limits["content"]:
            a = {**a, "content": a["content"][: limits["content"]]}
        acts.append(a)
    if not acts and allowed and "pass" in allowed:  # nothing to say: the short action a schema offers
        acts = [{"type": "pass"}]
    thinking = envelope.get("thinking") or ""
    return {"thinking": thinking[: limits["thinking"]] if limits["thinking"] else thinking, "actions": acts}


_SLOPPY_PROSE = ("I think we should find a time that works for everybody. Slot 3 might be good for me, "
                 "but I need to check my calendar first.",
                 "As Agent, I would like to propose that we meet soon. What do you all think?")


def _sloppy(envelope: dict[str, Any], rf_type: str | None, rng: random.Random, rate: float) -> tuple[str, str] | None:
    """A small model's answer without a schema: (content, finish_reason), or None to answer properly."""
    if rng.random() >= rate:
        return None
    acts = envelope.get("actions") or []
    invented = {"response": envelope.get("thinking") or "ok", "action": acts[0].get("type") if acts else "none",
                "recipient": acts[0].get("to") if acts else None,
                "message": acts[0].get("content") if acts else "I agree."}
    if rf_type == "json_object":  # JSON is enforced, the envelope is not: invented keys
        return json.dumps(invented), "stop"
    x = rng.random()
    if x < 0.3:
        return rng.choice(_SLOPPY_PROSE), "stop"
    if x < 0.6:
        return "Here is my answer:\n" + json.dumps(invented, indent=2) + "\nI hope this helps!", "stop"
    if x < 0.85:
        full = json.dumps(envelope, indent=2)
        return "Sure! " + full[: max(8, len(full) // 2)], "length"
    return "Sure, here you go!\n" + json.dumps(envelope) + "\nLet me know if you need anything else.", "stop"


def _refused_keyword(schema: Any, keywords: tuple[str, ...]) -> str | None:
    """The first of ``keywords`` used anywhere in ``schema`` (a server that does not support it), or None."""
    if not keywords or schema is None:
        return None
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k in keywords:
                if k in node:
                    return k
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None


def _agree(th: _Thread, schema: dict[str, Any] | None) -> dict[str, Any]:
    """An injected ``agree``: the slot announced this round, else the lowest slot the schema allows."""
    h = th.header or {}
    slot = _agreed(th, int(h.get("round", 1)), th.round_user_texts(int(h.get("round", 1)))) if h else None
    if slot is None:
        for alt in _action_shapes(((schema or {}).get("properties") or {}).get("actions")) or []:
            if ((alt.get("properties") or {}).get("type") or {}).get("enum") == ["agree"]:
                slot = alt["properties"]["slot"]["enum"][0]
    return {"thinking": "Agreeing.", "actions": [{"type": "agree", "slot": slot if slot is not None else 0}]}


def _chatter(th: _Thread) -> dict[str, Any]:
    """Small talk that names no slot: a direct message to each other participant of the
    meeting (what a blinded game's phrasebook withholds from an LLM partner, issue 29)."""
    h = th.header
    parts, _order = th.participants(th.round_user_texts(int(h["round"]))) if h is not None else ([], [])
    others = [p for p in parts if p != th.seat] or [next(a for a in range(8) if a != th.seat)]
    return {"thinking": "", "actions": [{"type": "dm", "to": p, "content": "Hello! Happy to help, let me think "
                                                                           "about what suits everyone."}
                                        for p in others]}


def _oversize(kind: str, th: _Thread) -> dict[str, Any]:
    """Replies past the size limits (issue 24 item 10): ``oversized`` (a 200,000-character
    ``thinking``), ``flood`` (200 direct messages) and ``long_message`` (one of 5,000 characters)."""
    to = next((a for a in range(8) if a != th.seat), 0)
    if kind == "oversized":
        return {"thinking": "x" * 200_000, "actions": []}
    if kind == "flood":
        return {"thinking": "", "actions": [{"type": "dm", "to": to, "content": f"hello {i}"} for i in range(200)]}
    return {"thinking": "", "actions": [{"type": "dm", "to": to, "content": "y" * 5_000}]}


# --------------------------------------------------------------------------------------
# Small-model habits (the sloppy policy's modes)
# --------------------------------------------------------------------------------------
_LOOP_THINKING = "Let me think about which slot works best for everyone before I answer. "
_LOOP_CONTENT = "I could do several slots, maybe slot 3 or slot 5 or another one, "
_EXAMPLE_DM_RE = re.compile(r'\{"type": "dm", "to": (\d+), "content": "([^"]*)"\}')
#: A message the seat received, as the prompt lists it ("[1] From Agent 2 (direct message, Meeting M3): ...").
_HEARD_RE = re.compile(r"^\[\d+\] From Agent (\d+) \([^)]*\): (.*)$", re.M)
#: The per-turn example of a short action (issue 31): ``for example: {..., "actions": [{"type": "costs"}]}``.
_EXAMPLE_SHORT_RE = re.compile(r'for example: \{"thinking": "[^"]*", "actions": \[(\{"type": "[a-z_]+"(?:, "slot": \d+)?\})\]\}')


_SHORT_KINDS = ("costs", "ask_costs", "propose", "agree")


def _own_short_actions(th: _Thread, round_no: int) -> list[dict[str, Any]]:
    """The short talk actions (``costs``, ``ask_costs``, ``propose``, ``agree``) the seat wrote
    in ``round_no``, in order, as written (its assistant turns)."""
    out: list[dict[str, Any]] = []
    for text in th.round_replies(round_no):
        try:
            acts = json.loads(text).get("actions") or []
        except (ValueError, AttributeError):
            continue
        out.extend(a for a in acts if isinstance(a, dict) and a.get("type") in _SHORT_KINDS)
    return out


def _small_model_mode(mode: str, envelope: dict[str, Any], th: _Thread, schema: dict[str, Any] | None,
                      req: dict[str, Any]) -> tuple[str, str]:
    """``(content, finish_reason)`` of a small model's habit, applied to the cooperative answer.

    ``runaway``: a string that never closes — the model loops inside ``thinking`` (or a
    message's ``content``) until the reply's token cap cuts it (``finish_reason: length``),
    unless the request's schema gives that string a ``maxLength``: then the grammar ends it
    there and the reply closes.  ``copycat``: during CHEAP_TALK the model copies the latest
    example direct message it was shown with a literal recipient (``"to": 3``) and sends it
    as is, besides its answer — or, when the latest example is a short action (the per-turn
    example of issue 31), that action as written.
    """
    if mode == "parrot":
        out = dict(envelope)
        if (th.header or {}).get("phase") == "CHEAP_TALK":
            heard = None
            for m in th.messages:
                if m.get("role") == "user":
                    for h in _HEARD_RE.finditer(m.get("content") or ""):
                        heard = h
            if heard is not None:
                back = {"type": "dm", "to": int(heard.group(1)), "content": heard.group(2)}
                out["actions"] = [back] + list(envelope.get("actions") or [])
        return json.dumps(out), "stop"
    if mode == "echo":
        out = dict(envelope)
        if (th.header or {}).get("phase") == "CHEAP_TALK":
            allowed = _allowed_types(schema) if schema else None
            again = None
            for prev in _own_short_actions(th, int(th.header["round"])):
                again = prev
            example = None
            for m in th.messages:
                if m.get("role") == "user":
                    for ex in _EXAMPLE_SHORT_RE.finditer(m.get("content") or ""):
                        example = json.loads(ex.group(1))
            for pick in (again, example):
                if pick is not None and (allowed is None or pick["type"] in allowed):
                    out["actions"] = [pick]
                    break
        return json.dumps(out), "stop"
    if mode == "repeat":
        if (th.header or {}).get("phase") != "CHEAP_TALK":
            return json.dumps(envelope), "stop"
        before = th.round_replies(int(th.header["round"]))
        if before:
            return before[-1], "stop"
        example = None
        for ex in _EXAMPLE_SHORT_RE.finditer(th.last):
            example = json.loads(ex.group(1))
        return json.dumps({**envelope, "actions": [example] if example else []}), "stop"
    if mode == "copycat":
        out = dict(envelope)
        if (th.header or {}).get("phase") == "CHEAP_TALK":
            copy = None
            for m in th.messages:
                if m.get("role") == "system":
                    continue
                found = [(ex.start(), {"type": "dm", "to": int(ex.group(1)), "content": ex.group(2)})
                         for ex in _EXAMPLE_DM_RE.finditer(m.get("content") or "")]
                found += [(ex.start(), json.loads(ex.group(1)))
                          for ex in _EXAMPLE_SHORT_RE.finditer(m.get("content") or "")]
                if found:
                    copy = max(found, key=lambda f: f[0])[1]
            if copy is not None:
                out["actions"] = [copy] + list(envelope.get("actions") or [])
        return json.dumps(out), "stop"
    # runaway
    limits = _string_limits(schema)
    cap = int(req.get("max_tokens") or req.get("max_completion_tokens") or 1024) * 4  # the mock's 4 chars a token
    thinking = envelope.get("thinking") or ""
    if limits["thinking"] is None:
        text = '{"thinking": "' + thinking + " " + _LOOP_THINKING * (cap // len(_LOOP_THINKING) + 1)
        return text[:cap], "length"
    thinking = (thinking + " " + _LOOP_THINKING * 20)[: limits["thinking"]]
    acts = []
    for a in envelope.get("actions") or []:
        if "content" in a:
            if limits["content"] is None:
                head = json.dumps({"thinking": thinking, "actions": acts + [{**a, "content": ""}]})
                head = head[: head.rindex('""') + 1]  # up to the opening quote of the content
                text = head + a["content"] + " " + _LOOP_CONTENT * (cap // len(_LOOP_CONTENT) + 1)
                return text[:cap], "length"
            a = {**a, "content": (a["content"] + " " + _LOOP_CONTENT * 10)[: limits["content"]]}
        acts.append(a)
    return json.dumps({"thinking": thinking, "actions": acts}), "stop"


def _judge(th: _Thread, q: re.Match) -> dict[str, Any]:
    """The judge policy: belief shifts from what the message says about the sender's slots."""
    sender, n_slots = int(q.group(3)), int(q.group(4))
    m = re.search(r"^Message:\n(.*)$", th.last, re.M | re.S)
    content = (m.group(1) if m else "").strip()
    shift = [0] * n_slots
    for st in slot_statements(content, sender=sender, recipients=(), num_agents=max(sender + 2, 2),
                              num_slots=n_slots):
        if st.target != sender or not 0 <= st.slot < n_slots:
            continue
        if st.evidence >= 0.7:  # free, a cost, a proposal: the slot looks free
            shift[st.slot] = -2 if st.evidence >= 0.85 else -1
        elif st.evidence <= 0.4:  # busy, impossible
            shift[st.slot] = 2
    return {"shift": shift, "reason": "from what the message says about the sender's slots"}


def _error(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


# --------------------------------------------------------------------------------------
# Streamed, slow and dripping answers (slowgen, drip, trickle)
# --------------------------------------------------------------------------------------
@dataclass
class _Delivery:
    """How an answer is written: as SSE chunks, slowly, or one byte at a time."""

    payload: Any
    record: RequestRecord
    stream: bool = False
    token_delay: float = 0.0  # slowgen: seconds per streamed chunk ("token")
    drip: float | None = None  # seconds per byte of the whole answer
    trickle: float | None = None  # seconds between empty chunks of a stream that never says anything
    wait: float = 0.0  # slowgen without streaming: the generation time before the body is sent
    include_usage: bool = False
    prompt_s: float = 0.0  # slowprompt, streamed: time spent reading the prompt before the first token
    progress: bool = False  # ... reported as llama.cpp's prompt_progress events (return_progress)
    in_flight: bool = False  # counted in the server's requests in flight until written


def _delivery_for(req: dict[str, Any], status: int, payload: Any, fault: "_Injected | None",
                  slowgen: float | None, rec: RequestRecord, slowprompt: float | None = None) -> _Delivery | None:
    kind = fault.kind if fault else None
    rec.progress = bool(req.get("return_progress"))
    stream = bool(req.get("stream")) and status == 200 and isinstance(payload, dict) and "choices" in payload
    if kind == "drip":
        return _Delivery(payload, rec, stream=stream, drip=fault.seconds if fault.seconds is not None else 1.0)
    if kind == "trickle":
        return _Delivery(payload, rec, stream=True, trickle=fault.seconds if fault.seconds is not None else 0.2)
    opts = req.get("stream_options") if isinstance(req.get("stream_options"), dict) else {}
    usage = bool(opts.get("include_usage"))
    if (slowgen or slowprompt) and status == 200 and isinstance(payload, dict) and payload.get("choices"):
        d = _slowgen_delivery(payload, rec, slowgen or 0.0, stream, usage)
        if slowprompt:  # reading the prompt first: silent, or (return_progress) a progress event every 0.1 s
            if d.stream:
                d.prompt_s, d.progress = slowprompt, rec.progress
            else:
                d.wait += slowprompt
        return d
    if stream:
        return _Delivery(payload, rec, stream=True, include_usage=usage)
    return None


def _slowgen_delivery(payload: dict[str, Any], rec: RequestRecord, per_token: float, stream: bool,
                      include_usage: bool) -> _Delivery:
    """A slow local model: each chunk of four characters takes ``per_token`` seconds.  Streamed,
    the chunks go out as they are made (a steady stream); not streamed, the body is sent once
    the whole reply is made."""
    content = payload["choices"][0]["message"].get("content") or ""
    tokens = max(1, math.ceil(len(content) / 4))
    if stream:
        return _Delivery(payload, rec, stream=True, token_delay=per_token, include_usage=include_usage)
    return _Delivery(payload, rec, wait=tokens * per_token)


def _sse_chunks(payload: dict[str, Any], include_usage: bool, piece: int = 4) -> list[bytes]:
    """The server-sent events of a completion: role, content in ``piece``-character chunks (4: a
    "token" of slowgen; a fast answer comes in at most 64 chunks), finish, usage."""
    if not payload.get("choices"):  # the no_choices fault, streamed: chunks that carry no choice
        return [b"data: " + json.dumps({**payload, "object": "chat.completion.chunk"}).encode() + b"\n\n",
                b"data: [DONE]\n\n"]
    choice = payload["choices"][0]
    content = choice["message"].get("content") or ""
    base = {"id": payload.get("id"), "object": "chat.completion.chunk", "created": payload.get("created", 0),
            "model": payload.get("model")}

    def event(obj: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    out = [event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                        "finish_reason": None}]})]
    for i in range(0, len(content), piece):
        out.append(event({**base, "choices": [{"index": 0, "delta": {"content": content[i:i + piece]},
                                               "finish_reason": None}]}))
    out.append(event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice.get("finish_reason")}]}))
    if include_usage and payload.get("usage"):
        out.append(event({**base, "choices": [], "usage": payload["usage"]}))
    out.append(b"data: [DONE]\n\n")
    return out


async def _deliver(writer: asyncio.StreamWriter, status: int, headers: dict[str, str], d: _Delivery) -> bool:
    """Write ``d``; False when the connection must end (it always does after a stream or a drip)."""
    reasons = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 429: "Too Many Requests",
               500: "Internal Server Error"}
    rec = d.record
    if d.stream:
        head = [f"HTTP/1.1 {status} {reasons.get(status, 'Status')}", "Content-Type: text/event-stream",
                "Cache-Control: no-cache", "Connection: close"]
        if d.trickle is not None:  # empty chunks for ever (bounded: 10 minutes of them)
            base = {"id": "chatcmpl-trickle", "object": "chat.completion.chunk", "created": 0, "model": "mock"}
            body_parts = [b"data: " + json.dumps({**base, "choices": [{"index": 0, "delta": {},
                                                                        "finish_reason": None}]}).encode() + b"\n\n"
                          for _ in range(int(600 / max(d.trickle, 0.01)))]
        else:
            content = ((d.payload.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
            piece = 4 if d.token_delay else max(4, math.ceil(len(content) / 64))
            body_parts = _sse_chunks(d.payload, d.include_usage, piece)
    else:
        data = json.dumps(d.payload).encode()
        head = [f"HTTP/1.1 {status} {reasons.get(status, 'Status')}", "Content-Type: application/json",
                f"Content-Length: {len(data)}", "Connection: close"]
        body_parts = [data]
    for k, v in (headers or {}).items():
        head.append(f"{k}: {v}")
    head_bytes = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
    rec.bytes_total = len(head_bytes) + sum(len(p) for p in body_parts)
    try:
        if d.drip is not None:
            whole = head_bytes + b"".join(body_parts)
            for i in range(len(whole)):
                writer.write(whole[i:i + 1])
                await writer.drain()
                rec.bytes_sent += 1
                await asyncio.sleep(d.drip)
                if writer.is_closing() or writer.transport.is_closing():
                    raise ConnectionResetError
        else:
            writer.write(head_bytes)
            await writer.drain()
            rec.bytes_sent += len(head_bytes)
            if d.prompt_s:
                steps = max(1, int(d.prompt_s / 0.1))
                for k in range(steps):
                    await asyncio.sleep(d.prompt_s / steps)
                    if d.progress:
                        ev = {"id": "chatcmpl-progress", "object": "chat.completion.chunk", "created": 0,
                              "model": "mock", "choices": [{"index": 0, "delta": {"role": "assistant",
                                                                                 "content": None},
                                                            "finish_reason": None}],
                              "prompt_progress": {"total": steps, "processed": k + 1}}
                        part = b"data: " + json.dumps(ev).encode() + b"\n\n"
                        writer.write(part)
                        await writer.drain()
                        rec.bytes_sent += len(part)
                        rec.bytes_total += len(part)
            delay = d.trickle if d.trickle is not None else d.token_delay
            for i, part in enumerate(body_parts):
                if delay and i:
                    await asyncio.sleep(delay)
                writer.write(part)
                await writer.drain()
                rec.bytes_sent += len(part)
    except (ConnectionError, OSError):
        rec.client_gone = True
    if rec.bytes_sent < rec.bytes_total:
        rec.client_gone = True
    rec.ended = time.perf_counter()
    return False


# -- ``calbench mock-llm``: one server until Ctrl-C ---------------------------------------------

class MockOptionError(ValueError):
    """An option of ``calbench mock-llm`` out of range, or a port that cannot be listened on (one line)."""


def serve_until_stopped(*, port: int = 8765, policy: str = "cooperative", latency: float = 0.0, seed: int = 0,
                        retry_after: float = 1.0, context_limit: int | None = None, context_style: str = "openai",
                        advertise_context: bool = False, sloppy_mode: str | None = None,
                        slowgen: float | None = None,
                        ready: Callable[[MockLLMServer], None] | None = None) -> dict[str, Any]:
    """Serve on 127.0.0.1:``port`` until SIGINT or SIGTERM (``ready(server)`` once it listens);
    return the server's request statistics (:meth:`MockLLMServer.stats`)."""
    import signal

    if not 0 <= port <= 65535:
        raise MockOptionError(f"--port must be 0..65535, not {port}")
    if not 0 <= latency <= 3600:  # NaN fails both (issue 35: --latency nan was accepted)
        raise MockOptionError(f"--latency must be 0 or more seconds (at most 3600), not {latency:g}")
    if not 0 <= retry_after <= 86400:
        raise MockOptionError(f"--retry-after must be 0 or more seconds (at most 86400), not {retry_after:g}")
    if slowgen is not None and not 0 < slowgen <= 60:
        raise MockOptionError(f"--slowgen must be more than 0 and at most 60 seconds, not {slowgen:g}")
    if context_limit is not None and context_limit < 64:
        raise MockOptionError(f"--context-limit must be at least 64 tokens, not {context_limit}")
    server = MockLLMServer(policy=policy, latency=latency, seed=seed, port=port, retry_after=retry_after,
                           context_limit=context_limit, context_style=context_style,
                           advertise_context=advertise_context, sloppy_mode=sloppy_mode, slowgen=slowgen)

    async def serve() -> None:
        try:
            await server.start()
        except OSError as exc:
            raise MockOptionError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
        if ready:
            ready(server)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - Windows
                pass
        try:
            await stop.wait()
        finally:
            await server.stop()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:  # pragma: no cover - platforms without add_signal_handler
        pass
    return server.stats()
