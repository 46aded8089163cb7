"""The async orchestrator: one game, round by round (SPEC §4).

``play_game`` is the only place that awaits seats and emits events (``end_game`` adds
``game_end`` once the game is scored; ``run_game`` is the two with the scoring stage between).  Rules live in
``engine.rules``, transitions in ``engine.state``, observations in ``engine.observe``.
A round is CHEAP_TALK → VOLUNTARY → DECISION → RESOLUTION.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from .actions import CHANNELS, Message, Reschedule, Schedule, actions_to_json
from .events import MESSAGE_EVENT_TYPES, UNWRITTEN, Clock, EventLog, EventSink, LogicalClock, wall_clock
from .model import Task, calendar_to_json
from .observe import (
    DecisionObservation,
    Delivered,
    SeatBriefing,
    TurnObservation,
    VoluntaryObservation,
    meeting_view,
    seat_labels,
    seat_view,
)
from .redact import redact
from .reflection import ReflectionObservation, reflection_event_data
from .rules import BatchOutcome, Rejection, check_batch
from .gameid import game_id as new_game_id
from .seating import agent_type, seats_config  # noqa: F401 - agent_type: the trace's seat type, re-exported
from .seats import Persona, Reply
from .fold import Fold
from .state import GameState, state_hash
from .trace import fold_trace

CALBENCH_VERSION = "0.1.0"

#: Prompt variants that make a seat a "nosy" (privacy-probing) agent in the authors' trace
#: fields: ``game_start.nosy_agent_ids`` and ``agent_registered.is_nosy_agent``.  A seat is
#: nosy when its persona's ``variant`` is one of these, or when ``GameConfig.nosy_agent_ids``
#: names it (see :func:`nosy_seats`).
NOSY_VARIANTS = frozenset({"nosy-highpressure", "redteam"})


def failure_event_type(error: str) -> str:
    """The event a failed persona call is recorded as (see ``engine.usage.failure_class``).

    ``seat_timeout``: the seat could not answer (a timeout, an LLM endpoint down or failing
    past its retries: infrastructure); ``context_overflow``: the seat's conversation does
    not fit its model's context window (configuration); ``parse_error``: the seat answered
    but its reply was unreadable or invalid (the agent's fault).
    """
    if error in ("seat_timeout", "infra_error"):
        return "seat_timeout"
    if error == "context_overflow":
        return "context_overflow"
    return "parse_error"


def nosy_seats(seats: Sequence[Any], configured: Sequence[int] = ()) -> tuple[int, ...]:
    """Seats that are nosy: ``configured`` ∪ seats whose persona variant is in :data:`NOSY_VARIANTS`."""
    derived = {i for i, s in enumerate(seats) if getattr(s, "variant", None) in NOSY_VARIANTS}
    return tuple(sorted(derived | set(configured)))


@dataclass(frozen=True)
class GameConfig:
    max_turns_per_round: int = 15
    decision_retries: int = 3
    channels: tuple[str, ...] = ("dm",)
    seat_timeout: float | None = None  # seconds per persona call; None = wait for ever (humans)
    nosy_agent_ids: tuple[int, ...] = ()
    deterministic: bool = False  # logical clock and a game id derived from the inputs
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bad = [c for c in self.channels if c not in CHANNELS]
        if bad or not self.channels:
            raise ValueError(f"unknown channel(s) {bad}; choose from {', '.join(CHANNELS)}")
        if self.max_turns_per_round < 1:
            raise ValueError("max_turns_per_round must be at least 1")
        if self.decision_retries < 0:
            raise ValueError("decision_retries must be 0 or more")

    @property
    def communication_protocol(self) -> str:
        return "+".join(self.channels)

    def to_json(self) -> dict[str, Any]:
        return {
            "max_turns_per_round": self.max_turns_per_round,
            "decision_retries": self.decision_retries,
            "channels": list(self.channels),
            "communication_protocol": self.communication_protocol,
            "seat_timeout": self.seat_timeout,
            "nosy_agent_ids": list(self.nosy_agent_ids),
            "deterministic": self.deterministic,
            **({"extra": self.extra} if self.extra else {}),
        }


@dataclass
class GameResult:
    game_id: str
    trace: dict[str, Any]
    state: GameState
    stopped: bool = False

    @property
    def metrics(self) -> dict[str, Any]:
        return self.trace["metrics"]


@dataclass
class PlayedGame:
    """A game played through its last round, not yet scored nor closed (:func:`play_game`).

    What the scoring stage reads (``task``, ``state``, ``events``, ``config``,
    ``round_calendars``) and what :func:`end_game` needs to emit ``game_end`` on the same
    event log and build the trace."""

    task: Task
    seats_json: list[dict[str, Any]]
    config: GameConfig
    extra_config: dict[str, Any]
    log: EventLog
    clock: Clock
    game_id: str
    started_at: Any
    state: GameState
    round_calendars: dict[int, tuple]  # every round as it started (resumed rounds too: the fold of the kept events)
    messages_sent: list[int]
    aside: list[dict[str, Any]]

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.log.events


class _Game:
    def __init__(self, task: Task, seats: Sequence[Persona], config: GameConfig, log: EventLog,
                 renders: bool = True) -> None:
        if len(seats) != task.num_agents:
            raise ValueError(f"the task has {task.num_agents} seats but {len(seats)} personas were given")
        self.task = task
        self.seats = list(seats)
        self.config = config
        self.log = log
        # the one fold (engine.fold) owns the state: calendars, costs, resolved rounds, each
        # round's starting calendars, messages sent; the loop advances it as it plays
        self.fold = Fold.for_task(task)
        self._views: dict[int, list] = {}  # seat -> [calendar, penalty, view, render or None]
        self._labels: dict[int, Any] = {}  # seat -> the labels it may read (fixed for the game)
        self._lines: list[dict] = [{} for _ in seats]  # seat -> its rendered calendar lines by (slot, item)
        self.renders = renders  # False: events carry UNWRITTEN in place of calendar renders
        self._meeting_views: dict[tuple[int, int], Any] = {}  # (meeting id, seat) -> its MeetingView

    @property
    def state(self) -> GameState:
        return self.fold.state

    @property
    def messages_sent(self) -> list[int]:
        return self.fold.messages_sent

    @property
    def round_calendars(self) -> dict[int, tuple]:
        """Round -> every calendar as the round started (also the rounds folded on resume)."""
        return self.fold.round_starts

    # -- observations -------------------------------------------------------------------
    def _cached(self, seat: int, state: GameState | None) -> list:
        # A seat's view only changes when its calendar or penalty does: build it (and its
        # render, the costliest string of a turn, when one is asked for) once per change.
        st = state or self.state
        cal, pen = st.calendars[seat], st.costs[seat]
        hit = self._views.get(seat)
        if hit is None or hit[0] is not cal or hit[1] != pen:
            own = self._labels.get(seat)
            if own is None:
                own = self._labels[seat] = seat_labels(seat, self.task.labels, self.task.meetings)
            view = seat_view(seat, st.calendars, self.task.labels, self.task.meetings, pen,
                             self.task.cost_values, self.config.channels, own_labels=own)
            hit = self._views[seat] = [cal, pen, view, None]
        return hit

    def meeting_view(self, meeting, seat: int):
        """The seat's view of ``meeting`` (fixed for the game: built once per seat and meeting)."""
        key = (meeting.id, seat)
        mv = self._meeting_views.get(key)
        if mv is None:
            mv = self._meeting_views[key] = meeting_view(meeting, seat, self.task.labels)
        return mv

    def view(self, seat: int, state: GameState | None = None):
        return self._cached(seat, state)[2]

    def render(self, seat: int, state: GameState | None = None) -> Any:
        """The seat's calendar as its events record it, or :data:`UNWRITTEN` when the game
        was told its events are only packed lean (``play_game(renders=False)``)."""
        if not self.renders:
            return UNWRITTEN
        hit = self._cached(seat, state)
        if hit[3] is None:
            hit[3] = hit[2].render(self._lines[seat])
        return hit[3]

    # -- persona calls --------------------------------------------------------------------
    async def call(self, seat: int, method: str, obs, *, round: int, turn: int, phase: str,
                   buffer: list[dict] | None = None) -> Reply:
        """Await one persona call; failures become a recorded error reply, never an exception.

        With ``buffer`` the error event is appended there instead of being emitted now.
        """
        fn = getattr(self.seats[seat], method)
        t0 = time.perf_counter()
        try:
            if self.config.seat_timeout:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns the seat's reply when
                # it lands in the same loop turn as a cancel (a stopped game), and the cancel is lost
                async with asyncio.timeout(self.config.seat_timeout):
                    reply = await fn(obs)
            else:  # no timeout, no context manager: ~7 µs a call on the scripted suites' hot path
                reply = await fn(obs)
        except TimeoutError:
            reply = Reply(error="seat_timeout", error_detail=f"no answer within {self.config.seat_timeout} s")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a persona's own failure never stops the game
            reply = Reply(error="seat_error", error_detail=redact(f"{type(exc).__name__}: {exc}"))
        if reply.latency_ms is None and reply.error and not self.config.deterministic:
            reply.latency_ms = int((time.perf_counter() - t0) * 1000)
        for note in _seat_events(reply):  # e.g. a served seat taken over by another connection
            ev = self.log.make(note.pop("type"), round=round, turn=turn, phase=phase, agent_id=seat, **note)
            if buffer is not None:
                buffer.append(ev)
            else:
                await self.log.add(ev)
        if reply.error:
            kind = failure_event_type(reply.error)
            more = {}
            if isinstance(reply.extra, dict) and reply.extra.get("failure_kind"):
                more["failure"] = reply.extra["failure_kind"]  # e.g. unreachable, rate_limited, server_error
            if isinstance(reply.extra, dict) and isinstance(reply.extra.get("failure_words"), str):
                more["reason"] = reply.extra["failure_words"][:200]  # why, in words, for the people at the table
            ev = self.log.make(kind, round=round, turn=turn, phase=phase, agent_id=seat,
                               error=reply.error, detail=redact(reply.error_detail) if reply.error_detail else None,
                               text=reply.text, **more)
            if buffer is not None:
                buffer.append(ev)
            else:
                await self.log.add(ev)
        return reply

    # -- the game -------------------------------------------------------------------------
    def restore(self, events: list[dict[str, Any]],
                interrupted: Sequence[dict[str, Any]] = ()) -> tuple[int, list[dict[str, Any]]]:
        """Fold the complete rounds of an earlier, stopped run of this game (``--resume``).

        Keeps the events up to the end of the last complete round (:func:`resume_point`: its
        ``resolution`` and the ``meeting_broken`` / ``reflection`` events after it),
        re-validates every ``batch_applied`` with the rules and checks each round's recorded
        ``state_hash``.  The rest — a round cut short — is set aside, never thrown away: it
        joins ``interrupted`` (events set aside by earlier resumes) and the round is played
        again.  Returns the round to play next and every event set aside, in ``seq`` order.
        Raises ``ValueError`` for a trace that does not fold.
        """
        task = self.task
        cut = _resume_cut(events)
        prefix = list(events[:cut])
        aside = {e.get("seq"): e for e in interrupted if isinstance(e, dict)}
        for e in events[cut:]:
            aside.setdefault(e.get("seq"), e)
        aside_list = [aside[k] for k in sorted(aside, key=lambda q: (q is None, q if isinstance(q, int) else 0))]
        fold = fold_trace({"events": prefix, "stopped": True, "interrupted_events": aside_list},
                          task=task)  # the one fold (engine.trace)
        if fold.problems:
            bad = next((p for p in fold.problems if "breaks the rules" in p), None)
            if bad is not None:
                raise ValueError(f"cannot resume: {bad}")
            rnd = next((row["round"] for row in fold.rounds if row["matches"] is False), None)
            where = f"round {rnd}" if rnd is not None else "the earlier run"
            raise ValueError(f"cannot resume: {where} does not fold to its recorded state ({fold.problems[0]})")
        self.fold = fold.fold  # the kept events, applied: play goes on from this fold
        self.log.events = prefix
        self.log.seq = (prefix[-1]["seq"] + 1) if prefix else 0
        return self.state.round, aside_list

    async def register(self, *, emit: bool = True, history: list[dict[str, Any]] | None = None) -> None:
        """Brief every seat.  On resume (``emit=False``) nothing is recorded again, and a
        persona with a ``resume(events)`` method gets its own earlier events (its prompts and
        replies — never another seat's) to rebuild its thread."""
        task, cfg = self.task, self.config
        for seat, persona in enumerate(self.seats):
            briefing = SeatBriefing(self.view(seat), cfg.max_turns_per_round, cfg.decision_retries,
                                    len(task.meetings), getattr(persona, "variant", None))
            system_prompt = await persona.register(briefing)
            if not emit:
                if history is not None and hasattr(persona, "resume"):
                    await persona.resume([e for e in history if (e.get("data") or {}).get("agent_id") == seat])
                continue
            await self.log.emit(
                "agent_registered", round=-1, turn=-1, phase="GAME_START", agent_id=seat,
                agent_type=agent_type(persona), kind=persona.kind, model=persona.model, is_nosy_agent=seat in cfg.nosy_agent_ids,
                system_prompt=system_prompt, calendar_render=self.render(seat),
                calendar=calendar_to_json(task.calendars[seat]),
                variant=getattr(persona, "variant", None),
            )

    async def play_round(self, r: int) -> None:
        task, cfg = self.task, self.config
        meeting = task.meetings[r]
        self.fold.apply(await self.log.emit("round_start", round=r, turn=0, phase="CHEAP_TALK", agent_id=None,
                                            meeting=meeting.to_json(), speaker_order=list(meeting.speaker_order),
                                            communication_protocol=cfg.communication_protocol))
        inbox: list[list[Delivered]] = [[] for _ in range(task.num_agents)]
        received: list[list[Delivered]] = [[] for _ in range(task.num_agents)]
        got_dm = [False] * task.num_agents
        pending = [False] * task.num_agents  # a non-participant with activating mail
        participants = set(meeting.participants)
        activated: list[int] = []  # non-participants, in activation order
        last_turn = 0

        for turn in range(cfg.max_turns_per_round):
            last_turn = turn
            queue = list(meeting.speaker_order) + [a for a in activated if pending[a]]
            spoken: set[int] = set()
            anything_sent = False
            i = 0
            while i < len(queue):
                seat = queue[i]
                i += 1
                if seat in spoken:
                    continue
                spoken.add(seat)
                drained = tuple(inbox[seat])
                inbox[seat].clear()
                pending[seat] = False
                obs = TurnObservation(self.view(seat), r, turn, cfg.max_turns_per_round,
                                      self.meeting_view(meeting, seat), seat in participants, drained)
                persona = self.seats[seat]
                prompt = persona.prompt(obs) if hasattr(persona, "prompt") else None
                await self.log.emit("turn_start", round=r, turn=turn, phase="CHEAP_TALK", agent_id=seat,
                                    inbox_drained=[m.to_json() for m in drained],
                                    calendar_render=self.render(seat), prompt_sent=prompt)
                reply = await self.call(seat, "speak", obs, round=r, turn=turn, phase="CHEAP_TALK")
                msgs = [a for a in reply.actions if isinstance(a, Message)]
                if (hi := _human_input(reply)) is not None:
                    await self.log.emit("human_input", round=r, turn=turn, phase="CHEAP_TALK", agent_id=seat, **hi)
                await self.log.emit(
                    "turn_end", round=r, turn=turn, phase="CHEAP_TALK", agent_id=seat,
                    tool_calls=[dict(a.to_json(), meeting_id=meeting.id) if isinstance(a, Message) else a.to_json()
                                for a in reply.actions],
                    text=reply.text, thinking=reply.thinking, usage=reply.usage,
                    latency_ms=reply.latency_ms, raw_api_response=reply.raw, **_extra(reply),
                )
                others = [a for a in reply.actions if not isinstance(a, Message)]
                if others:
                    await self.log.emit("parse_error", round=r, turn=turn, phase="CHEAP_TALK", agent_id=seat,
                                        error="ignored_actions",
                                        detail="schedule and reschedule are only valid in VOLUNTARY and DECISION; "
                                               f"{len(others)} action(s) ignored", text=None)
                for msg in msgs:
                    recipients = await self._route(msg, seat, r, turn, meeting)
                    if recipients is None:
                        continue
                    anything_sent = True
                    d = Delivered(seat, msg.type, meeting.id, msg.content, r, turn, msg.payload,
                                  msg.to if msg.type == "dm" else None)
                    for rcp in recipients:
                        inbox[rcp].append(d)
                        received[rcp].append(d)
                        if msg.type == "dm":
                            got_dm[rcp] = True
                        if rcp not in participants and msg.type in ("dm", "all_groupchat"):
                            if rcp not in activated:
                                activated.append(rcp)
                            pending[rcp] = True
                            if rcp not in spoken and rcp not in queue[i:]:
                                queue.append(rcp)
            if not anything_sent:
                break

        # VOLUNTARY: contacted non-participants may move their own items.
        for seat in activated:
            if got_dm[seat]:
                await self._voluntary(seat, r, last_turn, meeting, tuple(received[seat]))

        # DECISION: every participant, concurrently, on a frozen snapshot.
        snapshot = self.state
        if all(getattr(self.seats[seat], "answers_at_once", False) for seat in meeting.speaker_order):
            # seats that answer without waiting (scripted): one after the other is the same
            # interleaving as gather's (each seat's events are buffered), without a task each
            results = [await self._decide(seat, r, last_turn, meeting, snapshot, tuple(received[seat]))
                       for seat in meeting.speaker_order]
        else:
            results = await asyncio.gather(*[
                self._decide(seat, r, last_turn, meeting, snapshot, tuple(received[seat]))
                for seat in meeting.speaker_order
            ])
        staged: list[tuple[int, BatchOutcome, list[dict]]] = []
        for seat, (events, outcome, actions) in zip(meeting.speaker_order, results):
            for ev in events:
                await self.log.add(ev)
            if outcome is not None:
                staged.append((seat, outcome, actions))
        if len(staged) == len(meeting.participants):
            for seat, outcome, actions in staged:
                self.fold.advance_batch(seat, outcome)
                await self.log.emit("batch_applied", round=r, turn=last_turn, phase="DECISION", agent_id=seat,
                                    actions=actions, calendar_render_after=self.render(seat),
                                    calendar_after=calendar_to_json(outcome.calendar), cost=outcome.cost)
        else:
            missing = sorted(set(meeting.participants) - {s for s, _, _ in staged})
            for seat, outcome, actions in staged:
                await self.log.emit("batch_rolled_back", round=r, turn=last_turn, phase="DECISION", agent_id=seat,
                                    actions=actions,
                                    reason=f"no valid batch from agent(s) {missing}; nothing was applied")

        # RESOLUTION
        res = self.fold.resolve(r)
        cals = [calendar_to_json(c) for c in self.state.calendars]
        await self.log.emit("resolution", round=r, turn=last_turn, phase="RESOLUTION", agent_id=None,
                            **res.to_json(), state_hash=state_hash(self.state.calendars, as_json=cals),
                            calendars=cals)
        for mid in res.consistency_violated_meeting_ids:
            await self.log.emit("meeting_broken", round=r, turn=last_turn, phase="RESOLUTION", agent_id=None,
                                meeting_id=mid)
        await self._reflect(r, last_turn, meeting, received)

    async def last_seat_events(self) -> None:
        """Record what front ends still hold about their seats (a takeover after a seat's last
        answer) before the game ends: a persona with ``seat_events()`` hands over the notes it
        has not yet attached to a reply, in the form of ``Reply.extra["seat_events"]``."""
        end = len(self.task.meetings)
        for seat, persona in enumerate(self.seats):
            drain = getattr(persona, "seat_events", None)
            if not callable(drain):
                continue
            for note in _known_seat_events(drain()):
                await self.log.emit(note.pop("type"), round=end, turn=0, phase="GAME_END", agent_id=seat, **note)

    async def reflect_again(self, r: int) -> None:
        """On resume: the measurement after round ``r`` (the last complete one) is asked again
        of every persona whose ``owes_reflection(r)`` says its answer was cut short (a person
        who quit on the belief grid).  The round's deliveries are rebuilt from its events."""
        owing = {seat for seat, p in enumerate(self.seats)
                 if callable(f := getattr(p, "owes_reflection", None)) and f(r)}
        if not owing or not 0 <= r < len(self.task.meetings):
            return
        n = self.task.num_agents
        received: list[list[Delivered]] = [[] for _ in range(n)]
        turn = 0
        for ev in self.log.events:
            d = ev.get("data") or {}
            if d.get("round") != r:
                continue
            t = ev.get("type")
            if t == "resolution":
                turn = d.get("turn") or 0
            elif t in MESSAGE_EVENT_TYPES.values():
                dm = d.get("channel") == "dm"
                got = Delivered(d["from_agent"], d["channel"], d["meeting_id"], d["content"], r, d.get("turn", 0),
                                d.get("payload"), d.get("to_agent") if dm else None)
                for rcp in ([d.get("to_agent")] if dm else d.get("recipients") or []):
                    if isinstance(rcp, int) and 0 <= rcp < n:
                        received[rcp].append(got)
        await self._reflect(r, turn, self.task.meetings[r], received, only=owing)

    async def _reflect(self, r: int, turn: int, meeting, received, only: set[int] | None = None) -> None:
        """Measurement-only reflection calls (SPEC §8, paper F.3), after RESOLUTION.

        Every persona with an ``async reflect(obs) -> dict | None`` method is asked (``only``:
        just these seats), concurrently; a persona without the method, or answering ``None``,
        is skipped.  Answers are recorded as ``reflection`` events in seat order; a failure
        is recorded on the event and never stops the game.
        """
        task, cfg = self.task, self.config
        askers = [(seat, fn) for seat, p in enumerate(self.seats)
                  if callable(fn := getattr(p, "reflect", None)) and (only is None or seat in only)]
        if not askers:
            return
        participants = set(meeting.participants)
        starts = self.round_calendars.get(r)

        async def ask(seat: int, fn):
            start = None if starts is None else seat_view(seat, starts, task.labels, task.meetings, 0,
                                                          task.cost_values, cfg.channels)
            obs = ReflectionObservation(self.view(seat), r, self.meeting_view(meeting, seat),
                                        tuple(received[seat]),
                                        tuple(a for a in range(task.num_agents) if a != seat), seat in participants,
                                        start_view=start)
            try:
                if cfg.seat_timeout:
                    async with asyncio.timeout(cfg.seat_timeout):
                        return await fn(obs)
                return await fn(obs)
            except TimeoutError:
                return {"error": "seat_timeout", "error_detail": f"no answer within {cfg.seat_timeout} s"}
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # measurement only: never stops the game
                return {"error": "seat_error", "error_detail": redact(f"{type(exc).__name__}: {exc}")}

        answers = await asyncio.gather(*(ask(seat, fn) for seat, fn in askers))
        for (seat, _), ans in zip(askers, answers):
            if ans is None:
                continue
            await self.log.emit("reflection", round=r, turn=turn, phase="RESOLUTION", agent_id=seat,
                                **reflection_event_data(ans, seat=seat, num_agents=task.num_agents,
                                                        num_slots=task.num_slots,
                                                        model=getattr(self.seats[seat], "model", None)))

    async def _route(self, msg: Message, seat: int, r: int, turn: int, meeting) -> list[int] | None:
        """Deliver a message; returns its recipients, or None when it cannot be sent."""
        n = self.task.num_agents
        problem = None
        if msg.type not in self.config.channels:
            problem = f"the {msg.type} channel is not enabled in this game (enabled: {', '.join(self.config.channels)})"
        elif msg.type == "dm" and (msg.to is None or not 0 <= msg.to < n or msg.to == seat):
            problem = f"a dm must go to another agent 0..{n - 1}, not {msg.to!r}"
        if problem:
            await self.log.emit("parse_error", round=r, turn=turn, phase="CHEAP_TALK", agent_id=seat,
                                error="undeliverable", detail=problem, text=msg.content)
            return None
        if msg.type == "dm":
            recipients = [msg.to]
        elif msg.type == "participant_groupchat":
            recipients = [a for a in meeting.speaker_order if a != seat]
        else:
            recipients = [a for a in range(n) if a != seat]
        data: dict[str, Any] = {"from_agent": seat, "to_agent": msg.to if msg.type == "dm" else None,
                                "meeting_id": meeting.id, "content": msg.content,
                                "content_chars": len(msg.content), "channel": msg.type}
        if msg.type != "dm":
            data["recipients"] = recipients
        if msg.payload is not None:
            data["payload"] = msg.payload
        self.fold.apply(await self.log.emit(MESSAGE_EVENT_TYPES[msg.type], round=r, turn=turn, phase="CHEAP_TALK",
                                            agent_id=seat, **data))
        return recipients

    async def _voluntary(self, seat: int, r: int, turn: int, meeting, received) -> None:
        task, cfg = self.task, self.config
        rejection: Rejection | None = None
        for attempt in range(cfg.decision_retries + 1):
            obs = VoluntaryObservation(self.view(seat), r, self.meeting_view(meeting, seat), received,
                                       attempt, cfg.decision_retries, str(rejection) if rejection else None)
            persona = self.seats[seat]
            prompt = persona.prompt(obs) if hasattr(persona, "prompt") else None
            await self.log.emit("decide_start", round=r, turn=turn, phase="VOLUNTARY", agent_id=seat,
                                calendar_render=self.render(seat), prompt_sent=prompt)
            reply = await self.call(seat, "volunteer", obs, round=r, turn=turn, phase="VOLUNTARY")
            outcome = None if reply.error else check_batch(self.state.calendars[seat], reply.actions,
                                                            meeting_id=meeting.id, require_schedule=False)
            status = "applied" if isinstance(outcome, BatchOutcome) else ("failed" if reply.error else "rejected")
            if isinstance(outcome, BatchOutcome) and not outcome.moves:
                status = "nothing"
            if (hi := _human_input(reply)) is not None:
                await self.log.emit("human_input", round=r, turn=turn, phase="VOLUNTARY", agent_id=seat, **hi)
            await self.log.emit("decide_end", round=r, turn=turn, phase="VOLUNTARY", agent_id=seat,
                                tool_calls=actions_to_json(reply.actions), text=reply.text, thinking=reply.thinking,
                                usage=reply.usage, latency_ms=reply.latency_ms, raw_api_response=reply.raw,
                                retry_count=attempt, status=status, **_extra(reply))
            if reply.error:
                return
            if isinstance(outcome, BatchOutcome):
                if outcome.moves:
                    self.fold.advance_batch(seat, outcome)
                    await self.log.emit("batch_applied", round=r, turn=turn, phase="VOLUNTARY", agent_id=seat,
                                        actions=_costed(reply.actions, outcome), calendar_render_after=self.render(seat),
                                        calendar_after=calendar_to_json(outcome.calendar), cost=outcome.cost)
                return
            rejection = outcome
            await self.log.emit("batch_rejected", round=r, turn=turn, phase="VOLUNTARY", agent_id=seat,
                                attempt=attempt, conflict_description=str(rejection), rule=rejection.rule,
                                actions=actions_to_json(reply.actions))

    async def _decide(self, seat: int, r: int, turn: int, meeting, snapshot: GameState, received):
        """Collect one participant's batch; events are buffered so the trace order is stable."""
        task, cfg = self.task, self.config
        events: list[dict] = []
        view = self.view(seat, snapshot)
        mv = self.meeting_view(meeting, seat)
        rejection: str | None = None
        log = self.log
        lost = 0  # calls whose endpoint failed (infra_error): asked again without using a retry
        attempt = 0
        while attempt <= cfg.decision_retries:
            obs = DecisionObservation(view, r, mv, received, attempt, cfg.decision_retries, rejection)
            persona = self.seats[seat]
            prompt = persona.prompt(obs) if hasattr(persona, "prompt") else None
            events.append(log.make("decide_start", round=r, turn=turn, phase="DECISION", agent_id=seat,
                                   calendar_snapshot_render=self.render(seat, snapshot), prompt_sent=prompt))
            reply = await self.call(seat, "decide", obs, round=r, turn=turn, phase="DECISION", buffer=events)
            if reply.error == "infra_error":
                # The endpoint failed (timed out, unreachable) past its own retries: no batch was
                # written, so no rule refused one — a failed call, never a rejection.  Asked again
                # without using a decision retry (those stay for rejected batches), at most
                # decision_retries such calls per seat and round; after that each uses one.
                events.append(log.make("decide_end", round=r, turn=turn, phase="DECISION", agent_id=seat,
                                       tool_calls=[], text=reply.text, thinking=reply.thinking, usage=reply.usage,
                                       latency_ms=reply.latency_ms, raw_api_response=reply.raw, retry_count=attempt,
                                       status="failed", **_extra(reply)))
                if lost < cfg.decision_retries:
                    lost += 1
                else:
                    attempt += 1
                continue
            attempt += 1
            outcome: BatchOutcome | Rejection
            if reply.error:
                outcome = Rejection(0, f"Your reply could not be used: {reply.error_detail or reply.error}")
            else:
                outcome = check_batch(snapshot.calendars[seat], reply.actions, meeting_id=meeting.id,
                                      require_schedule=True, meeting_cost=meeting.cost)
            ok = isinstance(outcome, BatchOutcome)
            if (hi := _human_input(reply)) is not None:
                events.append(log.make("human_input", round=r, turn=turn, phase="DECISION", agent_id=seat, **hi))
            events.append(log.make("decide_end", round=r, turn=turn, phase="DECISION", agent_id=seat,
                                   tool_calls=actions_to_json(reply.actions), text=reply.text,
                                   thinking=reply.thinking, usage=reply.usage, latency_ms=reply.latency_ms,
                                   raw_api_response=reply.raw, retry_count=attempt - 1,
                                   status="pending" if ok else "rejected", **_extra(reply)))
            if ok:
                return events, outcome, _costed(reply.actions, outcome, meeting.cost)
            rejection = str(outcome)
            events.append(log.make("batch_rejected", round=r, turn=turn, phase="DECISION", agent_id=seat,
                                   attempt=attempt - 1, conflict_description=rejection, rule=outcome.rule,
                                   actions=actions_to_json(reply.actions)))
        return events, None, []


def _extra(reply: Reply) -> dict[str, Any]:
    """A persona's ``Reply.extra`` (e.g. an LLM seat's retry counters), when it has one.

    Its ``human_input`` entry is left out: that becomes an event of its own (:func:`_human_input`).
    """
    extra = {k: v for k, v in (reply.extra or {}).items() if k not in ("human_input", "seat_events")}
    return {"extra": extra} if extra else {}


#: Events about a seat (not a move) that a front end may hand the engine to record, in
#: ``Reply.extra["seat_events"]``; any other type there is ignored.
SEAT_EVENT_TYPES = frozenset({"seat_takeover"})


def _seat_events(reply: Reply) -> list[dict[str, Any]]:
    """The ``seat_events`` of a reply (a list of ``{"type": ..., **data}``) with a known type."""
    return _known_seat_events((reply.extra or {}).get("seat_events") if isinstance(reply.extra, dict) else None)


def _known_seat_events(notes: Any) -> list[dict[str, Any]]:
    """The notes of a known type (:data:`SEAT_EVENT_TYPES`), less the keys the engine writes itself."""
    if not isinstance(notes, list):
        return []
    return [{k: v for k, v in n.items() if k not in ("round", "turn", "phase", "agent_id")}
            for n in notes if isinstance(n, dict) and n.get("type") in SEAT_EVENT_TYPES]


def _human_input(reply: Reply) -> dict[str, Any] | None:
    """What a person did for this reply (SPEC §12 ``human_input``), from ``Reply.extra["human_input"]``.

    A human persona puts a dict there (what it was asked, the actions and text it
    submitted, how long it took, ...); the engine records it as a ``human_input`` event
    just before the ``turn_end`` / ``decide_end`` of the same reply.  Other personas
    leave it out and get no such event.
    """
    hi = (reply.extra or {}).get("human_input")
    if not isinstance(hi, dict):
        return None
    return {k: v for k, v in hi.items() if k not in ("round", "turn", "phase", "agent_id")}


_RESOLUTION_TAIL = ("meeting_broken", "reflection")


def _resume_cut(events: Sequence[dict[str, Any]]) -> int:
    """How many leading events of a stopped game a resume keeps (see :func:`resume_point`)."""
    last = max((i for i, e in enumerate(events) if e.get("type") == "resolution"), default=None)
    if last is None:
        n = 0
        while n < len(events) and events[n].get("type") in ("game_start", "agent_registered"):
            n += 1
        return n
    r = (events[last].get("data") or {}).get("round")
    n = last + 1
    while (n < len(events) and events[n].get("type") in _RESOLUTION_TAIL
           and (events[n].get("data") or {}).get("round") == r):
        n += 1
    return n


def resume_point(events: Sequence[dict[str, Any]]) -> int:
    """The ``seq`` of the last event a resume of this stopped game keeps; -1 for none.

    That is the end of the last complete round: its ``resolution`` and the RESOLUTION-phase
    ``meeting_broken`` / ``reflection`` events right after it (before any round has
    resolved: the ``game_start`` and ``agent_registered`` events).  ``run_game(...,
    resume_events=...)`` keeps exactly these events and numbers new ones from this
    ``seq`` + 1; a store reopening the game keeps the same ones (``Store.reopen_game``).
    """
    n = _resume_cut(events)
    if n == 0:
        return -1
    return events[n - 1].get("seq", n - 1)


def _costed(actions, outcome: BatchOutcome, meeting_cost: int = 1) -> list[dict[str, Any]]:
    """The applied actions in the authors' shape: each with the cost it incurred."""
    by_from = {mv.from_slot: mv.cost for mv in outcome.moves}
    out = []
    for a in actions:
        d = a.to_json()
        if isinstance(a, Reschedule):
            d["cost"] = by_from.get(a.from_slot, 0)
        elif isinstance(a, Schedule):
            d["cost"] = meeting_cost
        out.append(d)
    return out


async def play_game(
    task: Task,
    seats: Sequence[Persona],
    config: GameConfig | None = None,
    sink: EventSink | None = None,
    *,
    clock: Clock | None = None,
    game_id: str | None = None,
    extra_config: dict[str, Any] | None = None,
    resume_events: list[dict[str, Any]] | None = None,
    interrupted_events: Sequence[dict[str, Any]] = (),
    renders: bool = True,
) -> PlayedGame:
    """Play one game through its last round (SPEC §4); the game loop, which scores nothing.

    The caller scores the result (``engine.scoring.score_played``) and closes the game with
    :func:`end_game`, which emits ``game_end`` with the metrics and builds the trace
    (SPEC §12); :func:`run_game` does the three in a row.

    Events reach ``sink`` as they happen.  If the game is cancelled (a human quits,
    Ctrl-C), the events so far are already in the sink; the caller marks it stopped.

    ``resume_events``: the events of an earlier, stopped run of this game (same task,
    seats and config).  Its complete rounds (up to :func:`resume_point`) are folded
    (``_Game.restore``), nothing of them is emitted again, the seats are briefed on the
    folded state, and play continues at the first incomplete round.  The events of that
    round cut short are not lost: they go to the trace's ``interrupted_events`` (with
    ``interrupted_events``, those an earlier resume set aside), new events are numbered
    after every one of them, and a ``round_restarted`` event names the ``seq`` range set
    aside (``from_seq`` .. ``to_seq``), so the numbering stays accountable and the seats'
    screens can say that the round starts again.  Metrics, the fold and replay read the
    ``events`` list only: the interrupted attempt never counts.

    ``renders=False``: the calendar renders in the events are :data:`engine.events.UNWRITTEN`
    — for a caller whose events go only to lean packing (``engine.lean``, trusted), which
    drops them and rebuilds them exactly on reading; nothing else may read such events
    before :func:`engine.lean.fill_unwritten`.  The personas' observations are the same.
    """
    config = config or GameConfig()
    if config.deterministic:
        clock = clock or LogicalClock()
        game_id = game_id or new_game_id("calbench", repr((
            task.task_id, task.seed, [getattr(s, "model", None) for s in seats], config.to_json())))
    clock = clock or wall_clock
    game_id = game_id or new_game_id("calbench", deterministic=False)
    nosy = nosy_seats(seats, config.nosy_agent_ids)
    if nosy != tuple(config.nosy_agent_ids):  # after the deterministic id: same ids as before
        config = replace(config, nosy_agent_ids=nosy)
    log = EventLog(sink, clock)
    g = _Game(task, seats, config, log, renders)
    started_at = clock()
    from .metrics import optimal_cost_cached, greedy_cost_cached

    agent_types = [agent_type(s) for s in seats]
    agent_models = [s.model or s.kind for s in seats]
    aside: list[dict[str, Any]] = []
    if resume_events:
        first_round, aside = g.restore(resume_events, interrupted_events)
        started_at = next((e.get("timestamp") for e in g.log.events if e.get("type") == "game_start"), started_at)
        await g.register(emit=False, history=g.log.events)
        kept_last = g.log.seq - 1
        fresh = [e for e in aside if isinstance(e.get("seq"), int) and e["seq"] > kept_last]
        if fresh:  # the round cut short: its events were set aside; say so, then play it again
            g.log.seq = max(e["seq"] for e in fresh) + 1
            await log.emit("round_restarted", round=first_round, turn=0, phase="CHEAP_TALK", agent_id=None,
                           from_seq=kept_last + 1, to_seq=g.log.seq - 1, events=len(fresh),
                           messages=sum(1 for e in fresh if e.get("type") in MESSAGE_EVENT_TYPES.values()))
        # a measurement after the last complete round that was cut short (a person who quit
        # on the belief grid) is asked again before play goes on
        await g.reflect_again(first_round - 1)
    else:
        first_round = 0
        await log.emit("game_start", round=-1, turn=-1, phase="GAME_START", agent_id=None,
                       scenario_seed=task.seed, num_agents=task.num_agents, num_slots=task.num_slots,
                       optimal_cost=optimal_cost_cached(task), greedy_cost=greedy_cost_cached(task),
                       nosy_agent_ids=list(config.nosy_agent_ids),
                       communication_protocol=config.communication_protocol,
                       agent_types=agent_types, agent_models=agent_models, task_id=task.task_id)
        await g.register()
    for r in range(first_round, len(task.meetings)):
        await g.play_round(r)
    await g.last_seat_events()
    return PlayedGame(task=task, seats_json=seats_config(seats),
                      config=config, extra_config=dict(extra_config or {}), log=log, clock=clock, game_id=game_id,
                      started_at=started_at, state=g.state, round_calendars=g.round_calendars,
                      messages_sent=list(g.messages_sent), aside=aside)


async def end_game(played: PlayedGame, final_state: dict[str, Any], metrics: dict[str, Any],
                   scoring: dict[str, int] | None = None, judge: dict[str, Any] | None = None) -> GameResult:
    """Close a played game: emit ``game_end`` with ``metrics`` and return the trace.

    ``scoring``: the ``{scorer name: version}`` that computed the metrics, recorded as the
    trace's ``scoring`` key (kept by the store with the game's other extra fields).
    ``judge``: the LLM judge's record the ``judge`` scorer read, kept as the trace's ``judge``."""
    task, log, clock = played.task, played.log, played.clock
    final_state["per_agent_messages_sent"] = list(played.messages_sent)
    await log.emit("game_end", round=len(task.meetings), turn=0, phase="GAME_END", agent_id=None, **metrics)
    trace = {
        "game_id": played.game_id,
        "config": {
            "num_agents": task.num_agents,
            "agents": played.seats_json,
            "seed": task.seed,
            "num_slots": task.num_slots,
            "num_meetings": len(task.meetings),
            "task_id": task.task_id,
            **played.config.to_json(),
            **played.extra_config,
        },
        "events": log.events,
        "final_state": final_state,
        "metrics": metrics,
        "started_at": played.started_at,
        "ended_at": clock(),
        "stopped": False,
        "calbench_version": CALBENCH_VERSION,
        "suite_version": (task.row.get("calbench") or {}).get("suite_version"),
        "task": task.to_row(),
    }
    if played.aside:  # a resumed game: the attempts cut short, kept apart from the events that count
        trace["interrupted_events"] = played.aside
    if judge is not None:
        trace["judge"] = judge
    if scoring:
        trace["scoring"] = dict(scoring)
    return GameResult(played.game_id, trace, played.state)


async def run_game(
    task: Task,
    seats: Sequence[Persona],
    config: GameConfig | None = None,
    sink: EventSink | None = None,
    *,
    clock: Clock | None = None,
    game_id: str | None = None,
    extra_config: dict[str, Any] | None = None,
    resume_events: list[dict[str, Any]] | None = None,
    interrupted_events: Sequence[dict[str, Any]] = (),
) -> GameResult:
    """Play one game to the end and return its trace (SPEC §12): :func:`play_game`, then
    the scoring stage (``engine.scoring.score_played``: the only scoring), then
    :func:`end_game`.  The one-call form for tests, benchmarks and scripts; a session
    (``lab.session.run_session``) runs the three stages itself.  Arguments as
    :func:`play_game`."""
    played = await play_game(task, seats, config, sink, clock=clock, game_id=game_id, extra_config=extra_config,
                             resume_events=resume_events, interrupted_events=interrupted_events)
    from .scoring import score_played

    scores = score_played(played)
    return await end_game(played, scores.final_state, scores.metrics, scores.versions)

