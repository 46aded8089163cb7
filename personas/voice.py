"""A seat that speaks through the phrasebook (``engine/phrasebook.py``): blinded study games.

:class:`Voice` wraps a persona.  Every message it sends that reaches ``listener`` (a DM to
that seat, or a group chat that seat reads) gets new words: the act the message says —
its typed payload read by kind, else its English read by the engine's free-text reader —
in the phrasebook's words for this game (``Phrasebook(game id)``, keyed by round, turn and
sender).  The payload is kept as it was, so a bot reads exactly what it read before; only
``content`` changes, at send time, so the trace, the export and a replay hold what the
participant read.  ``listener=None`` gives new words to everything the seat sends (the
participant's own seat when a script plays it).

``typed_only`` (an LLM partner): a message is reduced to what the reader can tell in it —
slots that work or not, costs, proposals, questions about slots, yes or no — and a
message in which it can tell nothing (small talk, reasoning, a calendar label) is
withheld from the participant (from the whole chat, for a group chat line); the call's
record in the trace counts them (``phrasebook_withheld``) beside the model's own reply.  A scripted
partner's message is never withheld: one whose kind and words say nothing readable gets
the phrasebook's "which slot do you mean?".

Everything else (register, decide, reflect, resume, ``kind``, ``model`` …) is the inner
persona's.  Only games that set it up (``lab/study/runner.py``, with the study's
``phrasebook`` setting and a participant at the table) ever use it, so scripted-only
games are unchanged.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from engine.actions import Message
from engine.phrasebook import Phrasebook, act_of_payload

__all__ = ["Voice"]


class Voice:
    """A persona whose messages to ``listener`` go through ``book`` (see the module docstring)."""

    def __init__(self, inner: Any, book: Phrasebook, *, listener: int | None, typed_only: bool = False) -> None:
        self.inner = inner
        self.book = book
        self.listener = listener
        self.typed_only = typed_only
        self.withheld = 0  # messages of a typed-only seat that said nothing readable

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _reaches(self, m: Message, obs: Any) -> bool:
        if self.listener is None:
            return True
        if m.type == "dm":
            return m.to == self.listener
        if m.type == "participant_groupchat":
            return self.listener in obs.meeting.participants
        return m.type == "all_groupchat"

    def render(self, actions: tuple[Any, ...], obs: Any) -> tuple[Any, ...]:
        """``actions`` with every message that reaches the listener in the phrasebook's words."""
        out = []
        seat, slots = obs.view.seat, obs.view.num_slots
        for a in actions:
            if not isinstance(a, Message) or not self._reaches(a, obs):
                out.append(a)
                continue
            act = act_of_payload(a.payload, a.content, slots)
            if not act and self.typed_only:
                self.withheld += 1
                continue
            out.append(replace(a, content=self.book.say(act, round=obs.round, turn=obs.turn, sender=seat)))
        return tuple(out)

    async def speak(self, obs: Any) -> Any:
        reply = await self.inner.speak(obs)
        before = self.withheld
        out = replace(reply, actions=self.render(tuple(reply.actions), obs))
        if self.withheld > before:  # recorded with the seat's call (engine.game: Reply.extra)
            out.extra = {**(reply.extra or {}), "phrasebook_withheld": self.withheld - before}
        return out
