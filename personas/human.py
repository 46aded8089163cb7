"""The human persona: a seat played at the terminal (DESIGN.md, "one persona interface").

The engine awaits ``speak`` / ``volunteer`` / ``decide`` exactly as it awaits an LLM or a
scripted bot; it does not know a person is answering.  Each call builds a
:class:`HumanRequest` holding the observation (the seat's whole world, already filtered by
``engine.observe``) and an unresolved future, hands it to the interface through the
``notify`` callback, and waits.  The interface shows the observation, lets the person act,
and calls :meth:`HumanRequest.answer` with a :class:`engine.seats.Reply`.

Nothing here imports Textual: the same persona can be driven by a test, a script or a
different front end.  ``notify`` is called on the event loop that runs the game; when the
front end lives on another thread it must resolve the future with
``loop.call_soon_threadsafe`` (``HumanRequest.answer_threadsafe`` does that).

Every answer leaves a record of what the person did in ``Reply.extra["human_input"]``
(the request kind, the submitted actions and text, the response time); the engine
writes it to the trace as a ``human_input`` event.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from engine.actions import actions_to_json
from engine.observe import DecisionObservation, SeatBriefing, TurnObservation, VoluntaryObservation
from engine.seats import Reply

Observation = Union[SeatBriefing, TurnObservation, VoluntaryObservation, DecisionObservation]

#: What a request asks for: ``register`` (information only, no answer expected),
#: ``speak`` (a CHEAP_TALK turn), ``volunteer`` (VOLUNTARY) or ``decide`` (DECISION).
REQUEST_KINDS = ("register", "speak", "volunteer", "decide")


@dataclass(eq=False)
class HumanRequest:
    """One question the engine asks the person at the terminal."""

    kind: str
    obs: Observation
    seat: int
    future: asyncio.Future | None = None
    started: float = field(default_factory=time.perf_counter)

    @property
    def done(self) -> bool:
        return self.future is None or self.future.done()

    def answer(self, reply: Reply) -> bool:
        """Resolve the request (same event loop).  Returns False if it was already answered."""
        if self.future is None or self.future.done():
            return False
        self.future.set_result(reply)
        return True

    def answer_threadsafe(self, reply: Reply) -> None:
        if self.future is not None:
            self.future.get_loop().call_soon_threadsafe(self.answer, reply)


Notify = Callable[[HumanRequest], Any]


class HumanPersona:
    """A seat whose answers come from a person, through an interface that resolves futures."""

    kind = "human"

    def __init__(self, notify: Notify | None = None, *, name: str = "human") -> None:
        self.notify = notify
        self.model = name
        self.seat: int | None = None
        self.briefing: SeatBriefing | None = None
        self.pending: HumanRequest | None = None
        self.answered = 0
        self._notes: list[dict[str, Any]] | None = []  # see :meth:`note`; None once the game took the last

    def attach(self, notify: Notify) -> None:
        """Connect (or reconnect) the interface; a request already waiting is re-sent."""
        self.notify = notify
        if self.pending is not None and not self.pending.done:
            notify(self.pending)

    # -- the Persona protocol -------------------------------------------------------------
    async def register(self, briefing: SeatBriefing) -> str | None:
        self.briefing = briefing
        self.seat = briefing.view.seat
        if self.notify is not None:
            self.notify(HumanRequest("register", briefing, self.seat))
        return None

    async def speak(self, obs: TurnObservation) -> Reply:
        return await self._ask("speak", obs)

    async def volunteer(self, obs: VoluntaryObservation) -> Reply:
        return await self._ask("volunteer", obs)

    async def decide(self, obs: DecisionObservation) -> Reply:
        return await self._ask("decide", obs)

    # -- internals ------------------------------------------------------------------------
    async def _ask(self, kind: str, obs: Observation) -> Reply:
        if self.notify is None:
            raise RuntimeError("the human seat has no interface attached")
        loop = asyncio.get_running_loop()
        req = HumanRequest(kind, obs, obs.view.seat, loop.create_future())
        self.pending = req
        try:
            self.notify(req)
            reply = await req.future
        finally:
            if self.pending is req:
                self.pending = None
        if not isinstance(reply, Reply):
            raise TypeError(f"the interface answered a {kind} request with {type(reply).__name__}, not a Reply")
        if reply.latency_ms is None:
            reply.latency_ms = round((time.perf_counter() - req.started) * 1000, 3)
        reply.extra = {**(reply.extra or {}), "human_input": self._input_record(kind, reply)}
        if self._notes:
            reply.extra["seat_events"] = [*(reply.extra.get("seat_events") or ()), *self._notes]
            self._notes = []
        self.answered += 1
        return reply

    def note(self, event: dict[str, Any]) -> bool:
        """Have an event about this seat recorded in the trace (``{"type": "seat_takeover", ...}``,
        one of ``engine.game.SEAT_EVENT_TYPES``): it goes with the seat's next answer, or as
        the game ends.  False when the game has already taken its last notes."""
        if self._notes is None:
            return False
        self._notes.append(event)
        return True

    def seat_events(self) -> list[dict[str, Any]]:
        """The notes not yet recorded; the engine asks once, as the game ends, and later
        notes are refused (:meth:`note`)."""
        notes, self._notes = self._notes or [], None
        return notes

    @staticmethod
    def _input_record(kind: str, reply: Reply) -> dict[str, Any]:
        """What the person did, for the trace's ``human_input`` event (SPEC §12).

        The engine turns ``Reply.extra["human_input"]`` into that event.  A front end may
        add its own keys (e.g. ``{"human_input": {"keys": [...]}}`` in the reply's extra);
        they are kept next to these.
        """
        given = (reply.extra or {}).get("human_input")
        record: dict[str, Any] = {"source": "human", "request": kind, "actions": actions_to_json(reply.actions),
                                  "text": reply.text, "response_ms": reply.latency_ms}
        if isinstance(given, dict):
            record.update(given)
        return record
