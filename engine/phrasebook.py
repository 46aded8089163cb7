"""The phrasebook: what a message says, in a person's words (blinded study games).

In a blinded study a participant must not tell a scripted partner from an LLM one by how
its messages look.  The protocols write English that gives them away — fixed sentences,
protocol markers ("(PENDING)", "Decision for meeting M2:", "impossible"), a payload tag
(``⟨decision⟩``) — and an LLM writes its own style.  The phrasebook renders every message
a participant sends or receives from *what it says*, never from who sent it:

1. **An act** (:class:`Act`): the message's meaning as a person would put it, a tuple of
   clauses ``(verb, data)`` — ``works`` (slots free for me), ``costs`` (slot → cost),
   ``costly`` (possible at some cost, no figure), ``fails``, ``ask`` (do these work for
   you?), ``ask_costs``, ``propose``, ``confirm`` (settled), ``give_up``, ``yes``, ``no``,
   ``option`` (a slot if an earlier meeting moves) and the ``move_*`` clauses of
   moving an earlier meeting.  :func:`act_of_payload` reads a typed payload by what its
   protocol declares its kind says (``Kind.says`` in ``engine/protocols/<name>.py``; a kind
   with no such declaration is read from the message's English);
   :func:`act_of_text` reads English with the engine's one free-text reader
   (``engine.protocol.read_text``).  So an IMAP ``decision``, an SD-MAP ``propose``, a DSM
   ``decision`` and an LLM's "let's meet at slot 5" are all ``propose (5,)``.
2. **Words** (:meth:`Phrasebook.say`): each clause in one of several phrasings, chosen by a
   hash of the game's seed, the round, the turn, the sender and the act — so the same act
   from the same seat at the same moment reads the same whoever (scripted or LLM) sent it,
   wording varies across a game, and a game played again (a resume, a replay, a dry run)
   reads exactly the same.  No protocol marker, no payload tag, no meeting-id boilerplate;
   every phrasing reads back through ``engine.protocol.read_text`` to the same slots
   (the bots and the VPS estimator read English too).
3. **A tag** a person would use (:func:`person_tag`): ``proposal`` for a ``decision`` or a
   ``propose``, ``question``, ``answer``, ``agreement``, ``no slot``, ``move`` — read from
   the words, so it is the same for every sender.

Standard library only; every layer may use it (``personas/voice.py`` wraps a blinded game's
partners, ``personas/seat_model.py`` renders a participant's quick actions, the chat pane
shows the tag).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Sequence

from . import protocols
from .protocol import fmt_slots, read_text, typed_payload

__all__ = ["Act", "Phrasebook", "act_of_payload", "act_of_text", "person_tag", "VERBS", "PERSON_TAGS"]

#: Every clause verb, in the order a message says them (an answer before a new proposal).
VERBS = ("no", "yes", "fails", "works", "costly", "costs", "ask", "ask_costs", "option", "propose", "confirm",
         "give_up", "move_ask", "move_propose", "move_ok", "move_no", "move_confirm", "move_fail")
_ORDER = {v: i for i, v in enumerate(VERBS)}

#: The tag a person gives a message, by its leading verb (the ``⟨decision⟩`` of a protocol is a proposal).
PERSON_TAGS = {
    "propose": "proposal", "option": "proposal", "confirm": "agreement", "yes": "agreement",
    "ask": "question", "ask_costs": "question", "works": "answer", "costs": "answer", "costly": "answer",
    "fails": "answer", "no": "answer", "give_up": "no slot", "move_ask": "move", "move_propose": "move",
    "move_ok": "move", "move_no": "move", "move_confirm": "move", "move_fail": "move",
}


@dataclass(frozen=True)
class Act:
    """What a message says: clauses ``(verb, data)`` in :data:`VERBS` order (data hashable)."""

    clauses: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, *clauses: tuple[str, Any]) -> "Act":
        kept = [(v, d) for v, d in clauses if v in _ORDER and d not in ((), None, False)]
        return cls(tuple(sorted(kept, key=lambda c: _ORDER[c[0]])))

    def __bool__(self) -> bool:
        return bool(self.clauses)

    @property
    def verbs(self) -> tuple[str, ...]:
        return tuple(v for v, _ in self.clauses)

    def signature(self) -> str:
        return repr(self.clauses)


_slots = protocols.slots_of


# ---------------------------------------------------------------------------------------
# Reading: typed payloads and English into acts
# ---------------------------------------------------------------------------------------
def act_of_payload(p: Any, content: str = "", num_slots: int = 1000) -> Act:
    """The act of a typed payload (``engine.protocol``: ``{"protocol", "kind", ...}``); a
    text kind, an unknown kind or an unreadable payload is read from ``content``."""
    tp = typed_payload(p)
    if tp is None:
        return act_of_text(content, num_slots)
    # what its kind says, as its protocol declares it (``Kind.says``, engine/protocols/)
    says = next((r.says for r in protocols.rules(tp.get("protocol"), tp.get("kind")) if r.says is not None), None)
    clauses = says(tp) if says is not None else None
    act = Act.of(*clauses) if clauses is not None else None
    return act if act else act_of_text(content, num_slots)


def act_of_text(text: str, num_slots: int = 1000) -> Act:
    """The act of English (``engine.protocol.read_text``); an empty act when it says
    nothing the reader can tell (pleasantries, reasoning, a label)."""
    r = read_text(text or "", num_slots)
    low = (text or "").lower()
    decided = r.decided
    proposed = tuple(dict.fromkeys(s for s in r.proposed if s != decided))
    costs = tuple(sorted((s, c) for s, c in r.costs.items() if c > 0 and s not in r.fails))
    priced = {s for s, _ in costs}
    works = _slots(s for s in r.works if s not in priced and s not in proposed and s != decided)
    asked = _slots(r.asked)
    about_costs = "cost" in low
    clauses: list[tuple[str, Any]] = [
        ("fails", _slots(r.fails)), ("works", works), ("costs", costs),
        ("ask_costs" if about_costs else "ask", asked),
        ("propose", tuple(sorted(proposed))), ("confirm", (decided,) if decided is not None else ()),
    ]
    if not any(d for _, d in clauses):
        clauses = [("no", r.no), ("yes", r.yes and not r.no)]
    return Act.of(*clauses)


# ---------------------------------------------------------------------------------------
# Words
# ---------------------------------------------------------------------------------------
def _list(slots: Sequence[int], joiner: str = "and") -> str:
    """"slot 5", "slots 3 and 5", "slots 3, 5 and 9", "slots 0-3 and 7" (a run of 3+ as a range,
    as ``engine.protocol.fmt_slots`` writes it)."""
    parts = fmt_slots(slots).replace("–", "-").split(", ")
    if len(parts) == 1 and "-" not in parts[0]:
        return f"slot {parts[0]}"
    body = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} {joiner} {parts[-1]}"
    return f"slots {body}"


def _or(slots: Sequence[int]) -> str:
    """"slot 5", "slot 3 or 5", "slot 3, 5 or 9" (one of them: a question or an offer)."""
    return _list(slots, "or").replace("slots ", "slot ", 1)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _is(slots: Sequence[int], one: str, many: str) -> str:
    return one if len(slots) == 1 else many


def _phr_works(d: tuple[int, ...]) -> list[str]:
    s = _list(d)
    return [f"{s} {_is(d, 'works', 'work')} for me.", f"I'm free at {s}.", f"I can do {s}.",
            f"{s.capitalize()} {_is(d, 'is', 'are')} fine with me.", f"I could do {s}.", f"{s.capitalize()} {_is(d, 'is', 'are')} open for me."]


def _phr_costly(d: tuple[int, ...]) -> list[str]:
    s = _list(d)
    return [f"{s.capitalize()} {_is(d, 'is', 'are')} possible, but I'd have to move something.",
            f"I could do {s} if I move something around.",
            f"{s.capitalize()} would be possible for me, though not ideal."]


def _phr_costs(d: tuple[tuple[int, int], ...]) -> list[str]:
    groups: dict[int, list[int]] = {}
    for s, c in d:
        groups.setdefault(c, []).append(s)
    parts = [(_list(ss), c, len(ss)) for c, ss in sorted(groups.items())]
    # The reader ties a cost to the slot right before it, or to every slot after it.
    return [" ".join(f"At a cost of {c} I could do {s}." for s, c, _ in parts),
            " ".join(f"{_cap(s)} would cost {c} for me." if n == 1 else f"Cost {c} for me at {s}." for s, c, n in parts),
            " ".join(f"I can do {s} at a cost of {c}." if n == 1 else f"For a cost of {c} I can do {s}."
                     for s, c, n in parts)]


def _phr_fails(d: tuple[int, ...]) -> list[str]:
    s = _list(d)
    return [f"I can't do {s}.", f"{s.capitalize()} doesn't work for me." if len(d) == 1
            else f"{s.capitalize()} don't work for me.", f"I'm busy at {s}.",
            f"{s.capitalize()} {_is(d, 'is', 'are')} taken on my side.", f"Sorry, {s} {_is(d, 'is', 'are')} not possible for me."]


def _phr_ask(d: tuple[int, ...]) -> list[str]:
    s = _or(d)
    return [f"Would {s} work for you?", f"Are you free at {s}?", f"Does {s} work for you?",
            f"Can you do {s}?", f"Could you do {s}?"]


def _phr_ask_costs(d: tuple[int, ...]) -> list[str]:
    s = _list(d)
    return [f"What are your costs for {s}?", f"Could you tell me your costs at {s}?",
            f"Please tell me your costs for {s}.", f"What are your costs at {s}?"]


def _phr_propose(d: tuple[int, ...]) -> list[str]:
    s = _or(d)
    return [f"How about {s}?", f"Let's meet at {s}." if len(d) == 1 else f"Could we do {s}?",
            f"I suggest {s}.", f"Shall we go for {s}?" if len(d) == 1 else f"What about {s}?",
            f"I propose {s}."]


def _phr_confirm(d: tuple[int, ...]) -> list[str]:
    s = _list(d)
    return [f"Settled: {s}.", f"Confirmed, we meet at {s}.", f"Let's lock in {s}.", f"Great, let's go with {s}."]


def _phr_option(d: tuple[tuple[int, int, int, int], ...]) -> list[str]:
    bits = [f"slot {slot} if meeting M{m} moves from slot {f} to slot {t}" for slot, m, f, t in d]
    joined = " or ".join(bits)
    return [f"I could also take {joined}.", f"Another option: {joined}."]


def _moves_text(d) -> str:
    return " ".join(f"Meeting M{m} moves from slot {f} to slot {t}." for m, f, t in d)


def _phr_move_ask(d: tuple[int, ...]) -> list[str]:
    m, f = (d + (0, 0))[:2]
    return [f"I had to give up slot {f} for meeting M{m}; could you find it a new slot?",
            f"Meeting M{m} can't stay at slot {f} on my side. Can you find it another slot?"]


def _phr_move_propose(d: tuple[int, ...]) -> list[str]:
    m, f, t = (d + (0, 0, 0))[:3]
    return [f"Could we move meeting M{m} from slot {f} to slot {t}?",
            f"How about moving meeting M{m} to slot {t} (from slot {f})?"]


def _phr_move_ok(d: tuple[int, ...]) -> list[str]:
    m, t = (d + (0, 0))[:2]
    return [f"Moving meeting M{m} to slot {t} works for me.", f"Sure, I can move meeting M{m} to slot {t}."]


def _phr_move_no(d: tuple[int, ...]) -> list[str]:
    m, t = (d + (0, 0))[:2]
    return [f"I can't move meeting M{m} to slot {t}.", f"Slot {t} doesn't work for me for meeting M{m}."]


def _phr_move_confirm(d) -> list[str]:
    text = _moves_text(d)
    return [f"Also: {text}", f"So {text[0].lower()}{text[1:]}", text]


def _phr_move_fail(d: tuple[int, ...]) -> list[str]:
    m = (d + (0,))[0]
    return [f"I couldn't find a new slot for meeting M{m}, so it stays where it is.",
            f"No luck moving meeting M{m}; let's leave it where it is."]


_PHRASES = {
    "no": lambda d: ["No, sorry.", "That doesn't work for me.", "Sorry, no."],
    "yes": lambda d: ["Yes, fine.", "Sure, sounds good.", "Ok, agreed."],
    "fails": _phr_fails, "works": _phr_works, "costly": _phr_costly, "costs": _phr_costs,
    "ask": _phr_ask, "ask_costs": _phr_ask_costs, "option": _phr_option, "propose": _phr_propose,
    "confirm": _phr_confirm,
    "give_up": lambda d: ["I can't find a slot that works for all of us this time.",
                          "Nothing works for everyone, so let's not schedule this one this round.",
                          "Sorry, I don't see a slot that works for all of us."],
    "move_ask": _phr_move_ask, "move_propose": _phr_move_propose, "move_ok": _phr_move_ok,
    "move_no": _phr_move_no, "move_confirm": _phr_move_confirm, "move_fail": _phr_move_fail,
}
#: Words only the ``give_up`` phrasings use: how :func:`person_tag` knows one.
_GIVE_UP_WORDS = ("works for all of us", "works for everyone, so", "for all of us.")
_OPENERS = ("", "", "", "Hi! ", "Hey. ", "Ok. ", "Hello. ")
_CLOSERS = ("", "", "", " Thanks!", " Let me know.", " Cheers.")
#: A scripted partner's message the phrasebook can read nothing in (rare: an unknown kind
#: whose English names no slot).
NOTHING = ("Sorry, which slot do you mean?", "Sorry, I didn't follow. Which slot?")


def _reads_back(verb: str, data: Any, text: str) -> bool:
    """Whether ``engine.protocol.read_text`` reads ``text`` as saying ``(verb, data)`` about
    its slots (a phrasing whose list the reader would split wrongly is not used)."""
    want = {"works": "works", "costly": "works", "fails": "fails", "ask": "asked", "ask_costs": "asked",
            "propose": "proposed"}.get(verb)
    if want is None and verb != "costs":
        return True
    r = read_text(text, 1 << 16)
    if verb == "costs":
        return all(r.costs.get(s) == c for s, c in data)
    return set(data) <= set(getattr(r, want))


class Phrasebook:
    """Renders acts for one game: ``seed`` is the game's (its id), so wording is the same
    whenever the game is played or replayed and differs between games."""

    def __init__(self, seed: Any) -> None:
        self.seed = str(seed)

    def _digest(self, *key: Any) -> bytes:
        return hashlib.blake2b("|".join(map(str, (self.seed,) + key)).encode(), digest_size=32).digest()

    def say(self, act: Act, *, round: int, turn: int, sender: int) -> str:
        """The words of ``act`` sent by ``sender`` at ``(round, turn)`` (never empty)."""
        h = self._digest(round, turn, sender, act.signature())
        if not act:
            return NOTHING[h[0] % len(NOTHING)]
        parts = []
        for i, (verb, data) in enumerate(act.clauses):
            options = [t for t in _PHRASES[verb](data) if _reads_back(verb, data, t)] or _PHRASES[verb](data)[:1]
            parts.append(options[h[(i + 2) % len(h)] % len(options)])
        text = " ".join(_cap(p) for p in parts)
        opener = _OPENERS[h[0] % len(_OPENERS)]
        closer = _CLOSERS[h[1] % len(_CLOSERS)] if "?" not in text else ""
        return f"{opener}{text}{closer}"


def person_tag(content: str, num_slots: int = 1000) -> str | None:
    """What a person calls a message (``proposal``, ``question``, ``answer``, ``agreement``,
    ``no slot``, ``move``), read from its words (:func:`act_of_text`) — the same for every
    sender; None when the words say nothing the reader can tell."""
    low = (content or "").lower().replace("’", "'")
    if any(w in low for w in _GIVE_UP_WORDS):
        return "no slot"
    if re.search(r"\bmov\w*\b[^.?!]*\bmeeting m\d|\bmeeting m\d+\b[^.?!]*\bmov", low) and "option" not in low \
            and "also take" not in low:
        return "move"
    act = act_of_text(content, num_slots)
    if not act:
        return None
    verbs = act.verbs
    for v in ("propose", "confirm", "ask", "ask_costs"):
        if v in verbs:
            return PERSON_TAGS[v]
    return PERSON_TAGS[verbs[0]]
