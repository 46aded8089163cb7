"""The participant's seat in a study game: a persona wrapper that adds the time limits,
records every call's time, and asks for the belief grid after the chosen rounds.

The inner persona answers: a :class:`personas.human.HumanPersona` at the terminal, or a
scripted protocol for a simulated participant.  The engine sees one persona of kind
``human``.

Time limits (``[timing]``): a talk turn that runs out ends the turn (no message); a
decision (or voluntary move) that runs out submits the batch as it stands — what the
``draft`` callback returns, the moves staged on screen — or no move (``no_move``, or a
draft that is not a valid batch).  One timeout ends the decision: the engine asks a seat
whose batch it rejected again (``decision_retries``), and those retries of a decision that
ran out are answered at once with the same no move, never put to the person again (else
a participant who walked away would wait out the limit four times).  ``on_timeout`` tells
the driver what happened, in the participant's words.  A timeout is never silent: the reply carries ``human_input.timed_out = true`` (the engine
writes it as a ``human_input`` event) and the timing row has ``timed_out = 1``.

Belief grid: after RESOLUTION of a chosen round the engine calls ``reflect``; this seat
asks ``ask_beliefs(BeliefRequest)`` for a grid ``{target: [belief per slot]}`` on −3..3
(could the target have taken the meeting in the slot as the round started — free or an
errand it could move: −3 surely not, +3 surely yes; the notion of SPEC §8's truth, taken
at the same moment), hands it to ``on_beliefs`` and returns ``None`` — so
no ``reflection`` event (whose scale is a *change*, not a level) is written.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sequence

from engine.actions import actions_to_json
from engine.seats import Reply

__all__ = ["StudySeat", "BeliefRequest", "belief_rounds", "belief_targets"]


@dataclass(frozen=True)
class BeliefRequest:
    """What the grid shows: the round just resolved, the participant's own view, the seats asked about."""

    round: int
    seat: int
    num_slots: int
    targets: tuple[int, ...]
    view: Any  # engine.observe.SeatView (the participant's own calendar after the round)
    messages: tuple[Any, ...]  # what was delivered to the participant this round
    start_view: Any = None  # the participant's own calendar as the round started (when the truth is taken)
    took_part: bool = True  # the participant was in the round's meeting (else: [beliefs] watched_rounds)


def belief_rounds(spec: Any, num_rounds: int, own: Sequence[int] | None = None) -> set[int]:
    """The engine's (0-based) rounds after which the grid is asked, from ``[beliefs] rounds``:
    ``"all"``, ``"last"`` or a list of rounds counted from 1, as the study file and every
    screen count them (``lab.study.model`` reads the old 0-based lists into this form).

    ``own``: the rounds whose meeting the participant is in (``[beliefs] watched_rounds =
    false``, the default): only those are asked about — ``"all"`` is all of them, ``"last"``
    the last of them, a list the ones it names.  ``None``: every round (watched ones too)."""
    rounds = range(num_rounds) if own is None else sorted(r for r in own if 0 <= r < num_rounds)
    if spec == "all":
        return set(rounds)
    if spec == "last":
        return {rounds[-1]} if len(rounds) else set()
    return {int(r) - 1 for r in spec if 1 <= int(r) <= num_rounds} & set(rounds)


def belief_targets(spec: Any, seat: int, num_agents: int, meeting_participants: Sequence[int]) -> tuple[int, ...]:
    if spec == "meeting":
        return tuple(p for p in meeting_participants if p != seat)
    if spec == "all":
        return tuple(a for a in range(num_agents) if a != seat)
    return tuple(int(t) for t in spec if int(t) != seat and 0 <= int(t) < num_agents)


Timing = Callable[..., Awaitable[None]]


class StudySeat:
    """Wraps the participant's persona for one study game (see the module docstring)."""

    kind = "human"

    def __init__(self, inner: Any, *, model: str, talk_seconds: float | None, decision_seconds: float | None,
                 on_decision_timeout: str = "submit", on_timing: Timing | None = None,
                 rounds: set[int] = frozenset(), targets: Any = "meeting", watched_rounds: bool = False,
                 ask_beliefs: Callable[[BeliefRequest], Awaitable[dict[int, list[int]]]] | None = None,
                 on_beliefs: Callable[[BeliefRequest, dict[int, list[int]]], Awaitable[None]] | None = None,
                 draft: Callable[[], Sequence[Any] | None] | None = None,
                 on_timeout: Callable[[str, str], Any] | None = None,
                 answered: set[int] = frozenset()) -> None:
        self.inner = inner
        self.model = model
        self.talk_seconds = talk_seconds
        self.decision_seconds = decision_seconds
        self.on_decision_timeout = on_decision_timeout
        self.on_timing = on_timing
        self.rounds = set(rounds)
        self.targets = targets
        self.watched_rounds = watched_rounds  # also ask after rounds whose meeting the participant was not in
        self.ask_beliefs = ask_beliefs
        self.on_beliefs = on_beliefs
        self.draft = draft
        self.on_timeout = on_timeout  # told (phase, outcome) when a call runs out of time
        self._timed_out_decision: int | None = None  # the round whose decision ran out
        self.answered = set(answered)  # rounds whose grid is stored already (a resumed game)
        self.deadline: float | None = None  # time.monotonic() when the current call runs out
        self.deadline_phase: str | None = None
        self.timeouts = 0

    # the persona protocol ---------------------------------------------------------------------
    async def register(self, briefing: Any) -> Any:
        return await self.inner.register(briefing)

    async def speak(self, obs: Any) -> Reply:
        return await self._timed("talk", self.inner.speak, obs, self.talk_seconds)

    async def volunteer(self, obs: Any) -> Reply:
        return await self._timed("voluntary", self.inner.volunteer, obs, self.decision_seconds)

    async def decide(self, obs: Any) -> Reply:
        r = getattr(obs, "round", None)
        if getattr(obs, "attempt", 0) and r is not None and r == self._timed_out_decision:
            # the engine rejected the no move of a decision that ran out: it stays a no move
            return self._timeout_reply("decision", self.decision_seconds or 0, outcome="no_move", repeat=True)
        self._timed_out_decision = None
        return await self._timed("decision", self.inner.decide, obs, self.decision_seconds)

    def owes_reflection(self, round_: int) -> bool:
        """On resume: the grid after ``round_`` was due but is not stored (the person quit on
        it, or the browser page went away while it was open), so the engine asks it again
        before play goes on (``engine.game.reflect_again``), with the round's deliveries and
        the seat's view after it, as it was first shown."""
        return round_ in self.rounds and round_ not in self.answered and self.ask_beliefs is not None

    async def reflect(self, obs: Any) -> None:
        if obs.round not in self.rounds or self.ask_beliefs is None:
            return None
        await self._grid(obs.round, obs.view, obs.meeting.participants, tuple(obs.round_messages),
                         getattr(obs, "start_view", None))
        return None

    async def _grid(self, round_: int, view: Any, participants: Sequence[int], messages: tuple[Any, ...],
                    start_view: Any = None) -> None:
        seat = view.seat
        took_part = seat in tuple(participants)
        targets = belief_targets(self.targets, seat, view.num_agents, participants)
        if not targets or not (took_part or self.watched_rounds):
            # nothing to ask, or a round the participant only watched: no grid about it
            self.answered.add(round_)
            return None
        req = BeliefRequest(round_, seat, view.num_slots, targets, view, messages, start_view, took_part)
        t0 = time.perf_counter()
        grid = await self.ask_beliefs(req)
        # a cell left blank (None) stays blank: missing, not 0 ("no idea")
        clean = {int(t): [None if v is None else max(-3, min(3, int(v))) for v in list(row)[:req.num_slots]]
                 + [None] * max(0, req.num_slots - len(row)) for t, row in (grid or {}).items() if int(t) in targets}
        if self.on_timing is not None:
            await self.on_timing(phase="beliefs", round_=round_, turn=None,
                                 seconds=time.perf_counter() - t0, timed_out=False)
        if self.on_beliefs is not None:
            await self.on_beliefs(req, clean)
        self.answered.add(round_)
        return None

    # internals ------------------------------------------------------------------------------------
    async def _timed(self, phase: str, fn, obs: Any, limit: float | None) -> Reply:
        t0 = time.perf_counter()
        self.deadline = time.monotonic() + limit if limit else None
        self.deadline_phase = phase
        timed_out = False
        try:
            try:
                # asyncio.timeout, not wait_for: a cancel (the study stopped) that lands with the
                # participant's answer must not be lost (Python 3.11's wait_for drops it)
                async with asyncio.timeout(limit or None):
                    reply = await fn(obs)
            except TimeoutError:
                timed_out = True
                reply = self._timeout_reply(phase, limit)
            except asyncio.CancelledError:
                # the participant quit (ctrl+q) or the study stopped mid-call: the turn in
                # progress is timed too, flagged partial (no answer was given)
                if self.on_timing is not None:
                    try:
                        await asyncio.shield(self.on_timing(
                            phase=phase, round_=getattr(obs, "round", None), turn=getattr(obs, "turn", None),
                            seconds=time.perf_counter() - t0, timed_out=False, partial=True))
                    except (Exception, asyncio.CancelledError):  # a closing store: the row is lost, never the stop
                        pass
                raise
        finally:
            self.deadline = None
            self.deadline_phase = None
        seconds = time.perf_counter() - t0
        if timed_out:
            self.timeouts += 1
            outcome = (reply.extra or {}).get("human_input", {}).get("timeout_outcome")
            if phase == "decision":
                self._timed_out_decision = getattr(obs, "round", None)
            if self.on_timeout is not None:
                self.on_timeout(phase, outcome)
        if self.on_timing is not None:
            await self.on_timing(phase=phase, round_=getattr(obs, "round", None), turn=getattr(obs, "turn", None),
                                 seconds=seconds, timed_out=timed_out)
        return reply

    def _timeout_reply(self, phase: str, limit: float, *, outcome: str | None = None, repeat: bool = False) -> Reply:
        actions: tuple = ()
        if outcome is not None:
            pass
        elif phase == "talk":
            outcome = "end_turn"
        else:
            outcome = "no_move"
            if self.on_decision_timeout == "submit" and self.draft is not None:
                staged = tuple(self.draft() or ())
                if staged:
                    actions, outcome = staged, "submitted_as_it_stands"
        record = {"source": "human", "request": {"talk": "speak", "voluntary": "volunteer"}.get(phase, "decide"),
                  "actions": actions_to_json(actions), "text": None, "timed_out": True,
                  "limit_seconds": limit, "timeout_outcome": outcome}
        if repeat:
            record["repeat_of_timeout"] = True  # the engine's retry, answered without asking the person
        return Reply(actions=actions, latency_ms=0.0 if repeat else round(limit * 1000, 3),
                     extra={"human_input": record})
