"""The persona interface: who sits in a seat (DESIGN.md).

One small async interface for humans, LLMs and scripted protocols alike.  The engine
awaits these methods and never knows which kind of persona it is talking to.  A
persona receives only observations (``engine.observe``) — the privacy boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .actions import Action
from .observe import DecisionObservation, SeatBriefing, TurnObservation, VoluntaryObservation


@dataclass(slots=True)
class Reply:
    """A persona's answer, plus what the trace needs.

    ``error`` is ``None`` for a normal reply; ``"parse_error"`` when the persona's output
    could not be read (the game treats it as a pass / a rejected batch); ``"seat_timeout"``
    or ``"infra_error"`` when the persona could not answer at all (an endpoint down, retries
    exhausted).  Infrastructure failures are kept apart from agent failures in summaries.
    """

    actions: tuple[Action, ...] = ()
    thinking: str | None = None
    text: str | None = None
    usage: dict[str, Any] | None = None
    latency_ms: float | None = None
    raw: Any = None
    prompt: str | None = None
    error: str | None = None
    error_detail: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Persona(Protocol):
    kind: str  # "human" | "llm" | "scripted" | ...
    model: str | None  # e.g. "imap", "llm:gpt-4o-mini"

    async def register(self, briefing: SeatBriefing) -> str | None:
        """Called once; may return the system prompt it uses (recorded in the trace)."""

    async def speak(self, obs: TurnObservation) -> Reply: ...

    async def volunteer(self, obs: VoluntaryObservation) -> Reply: ...

    async def decide(self, obs: DecisionObservation) -> Reply: ...


class PassivePersona:
    """Never says anything and schedules nothing: a seat nobody fills."""

    kind = "passive"
    model = None

    async def register(self, briefing: SeatBriefing) -> str | None:
        return None

    async def speak(self, obs: TurnObservation) -> Reply:
        return Reply()

    async def volunteer(self, obs: VoluntaryObservation) -> Reply:
        return Reply()

    async def decide(self, obs: DecisionObservation) -> Reply:
        return Reply()
