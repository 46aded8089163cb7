"""The one fold: a game's events, applied one by one to its state (SPEC §4, §12).

A :class:`Fold` starts from the initial calendars (a task's, or the ones a trace
registered) and moves along the events with :meth:`Fold.apply`, the way OpenSpiel's
``State.apply_action`` moves a game: ``round_start`` records the round's meeting and the
calendars as the round starts, ``batch_applied`` is re-validated with the rules the game
used (``engine.rules.check_batch``) and applied, ``resolution`` resolves the round
(``engine.state.resolve_round``, when the task is known) and keeps what the trace recorded
of it, message events are counted.  Every other kind (``engine.events.EVENT_KINDS``)
leaves it as it was.

Who reads it: the game loop itself (``engine.game``: ``run_game`` advances through a fold,
and a resume is "apply the kept events"), the trace reader (``engine.trace.fold_trace`` is
this fold plus the checks against what the trace recorded), verification
(``engine.verify``), reports (``lab.report.stats``), the replay and the end screen.
No other module applies a batch or resolves a round (``tests/architecture/test_one_fold.py``).

The game loop builds each ``batch_applied`` and ``resolution`` event from the state after
the change (the calendar render after the batch, the state hash), so it calls the two
transitions the events stand for, :meth:`Fold.advance_batch` and :meth:`Fold.resolve`,
before emitting them, and :meth:`Fold.apply` for the events it has already emitted
(``round_start``, messages).  ``apply`` of a recorded event runs the same two transitions.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .actions import EnvelopeError, actions_from_json
from .events import FOLDED_KINDS, MESSAGE_CHANNEL, BatchApplied, MessageSent, Resolved, RoundStart
from .model import Calendar, Task
from .rules import BatchOutcome, check_batch
from .state import GameState, Resolution, apply_outcome, initial_state, resolve_round

Calendars = tuple[Calendar, ...]


class Fold:
    """One game's state, moved along its events.

    ``state``: the :class:`~engine.state.GameState` (calendars, costs; with a task also cost
    levels and resolved rounds).  ``meetings``: round -> the round's meeting as JSON.
    ``round_starts``: round -> every calendar as the round started.  ``resolutions``: each
    ``resolution`` event as recorded, with its seq and the folded calendars then.
    ``batches``: each applied batch ``(seq, agent, round, BatchOutcome)``.
    ``checkpoints``: ``(seq, calendars)`` after every applied batch.  ``messages_sent``: per
    agent; ``messages``: per channel.  ``problems``: what could not be applied, in words (``refused`` counts them);
    ``unresolved``: resolutions the task could not resolve (an unknown round).
    """

    __slots__ = ("task", "state", "meetings", "round_starts", "resolutions", "batches", "checkpoints",
                 "messages_sent", "messages", "problems", "refused", "unresolved", "ended", "last_seq")

    def __init__(self, calendars: Calendars, *, task: Task | None = None,
                 problems: list[str] | None = None) -> None:
        self.task = task
        n = len(calendars)
        self.state = initial_state(task) if task is not None else GameState(tuple(calendars), (0,) * n, (0,) * n)
        self.meetings: dict[int, dict[str, Any]] = {}
        if task is not None:
            self.meetings = {r: m.to_json() for r, m in enumerate(task.meetings)}
        self.round_starts: dict[int, Calendars] = {}
        self.resolutions: list[tuple[int, Resolved, Calendars]] = []
        self.batches: list[tuple[int, int, Any, BatchOutcome]] = []
        self.checkpoints: list[tuple[int, Calendars]] = []
        self.messages_sent = [0] * n
        self.messages = {c: 0 for c in MESSAGE_CHANNEL.values()}
        self.problems: list[str] = problems if problems is not None else []
        self.refused = 0  # batches not applied (their lines are in ``problems``)
        self.unresolved = 0
        self.ended = False
        self.last_seq: int | None = None

    @classmethod
    def for_task(cls, task: Task) -> "Fold":
        return cls(task.calendars, task=task)

    @property
    def calendars(self) -> Calendars:
        return self.state.calendars

    @property
    def num_agents(self) -> int:
        return len(self.state.calendars)

    # -- the two transitions ------------------------------------------------------------
    def advance_batch(self, seat: int, outcome: BatchOutcome) -> None:
        """Write a validated batch to ``seat``'s calendar and charge its cost."""
        st = self.state
        if self.task is not None:
            self.state = apply_outcome(st, self.task, seat, outcome)
            return
        cals, costs = list(st.calendars), list(st.costs)
        cals[seat] = outcome.calendar
        costs[seat] += outcome.cost
        self.state = replace(st, calendars=tuple(cals), costs=tuple(costs))

    def resolve(self, round_index: int) -> Resolution:
        """Resolve round ``round_index`` of the task (the game loop; a recorded ``resolution``)."""
        assert self.task is not None, "resolving a round needs the task"
        self.state, res = resolve_round(self.state, self.task, round_index)
        return res

    # -- events -------------------------------------------------------------------------
    def apply(self, event: dict[str, Any], seq: int | None = None) -> Any:
        """Move the fold past one event; returns what it read of a folded kind (None otherwise).

        A ``batch_applied`` returns its :class:`~engine.rules.BatchOutcome` when the rules
        accept it, else None and a line in ``problems`` (it is not applied).
        """
        t = event.get("type")
        if t not in FOLDED_KINDS:
            return None
        if seq is None:
            s = event.get("seq")
            seq = s if isinstance(s, int) and not isinstance(s, bool) else -1
        self.last_seq = seq
        d = event.get("data") or {}
        if t == "batch_applied":
            return self._batch(BatchApplied.read(d), seq)
        if t == "round_start":
            rs = RoundStart.read(d)
            if rs.round is not None:
                self.round_starts[rs.round] = self.state.calendars
                if rs.meeting is not None:
                    self.meetings[rs.round] = rs.meeting
            return rs
        if t == "resolution":
            return self._resolution(Resolved.read(d), seq)
        if t == "game_end":
            self.ended = True
            return None
        msg = MessageSent.read(t, d)
        self.messages[msg.channel] += 1
        if msg.sender is not None and 0 <= msg.sender < len(self.messages_sent):
            self.messages_sent[msg.sender] += 1
        return msg

    def apply_all(self, events: list[dict[str, Any]]) -> "Fold":
        for i, ev in enumerate(events):
            s = ev.get("seq")
            self.apply(ev, s if isinstance(s, int) and not isinstance(s, bool) else i)
        return self

    def _refuse(self, line: str) -> None:
        self.refused += 1
        self.problems.append(line)

    def _batch(self, b: BatchApplied, seq: int) -> BatchOutcome | None:
        agent, r = b.agent, b.round
        if not (isinstance(agent, int) and 0 <= agent < self.num_agents):
            self._refuse(f"event {seq} (batch_applied): agent {agent!r} is not a seat of this game")
            return None
        where = f"round {r}, agent {agent}"
        meeting = self.meetings.get(r) if isinstance(r, int) else None
        if meeting is None:
            self._refuse(f"event {seq} ({where}): a batch for a round whose meeting is unknown")
            return None
        try:
            actions = actions_from_json(b.actions)
        except EnvelopeError as exc:
            self._refuse(f"event {seq} ({where}): the recorded actions cannot be read: {exc}")
            return None
        mcost = meeting.get("cost", 1)
        for a in b.actions:  # the cost recorded on the schedule action wins
            if isinstance(a, dict) and a.get("type") == "schedule" and isinstance(a.get("cost"), int):
                mcost = a["cost"]
        outcome = check_batch(self.state.calendars[agent], actions, meeting_id=meeting.get("id"),
                              require_schedule=b.phase == "DECISION", meeting_cost=mcost)
        if not isinstance(outcome, BatchOutcome):
            self._refuse(f"event {seq} ({where}): the recorded batch breaks the rules, "
                         f"so the game could not have applied it: {outcome}")
            return None
        self.advance_batch(agent, outcome)
        self.batches.append((seq, agent, r, outcome))
        self.checkpoints.append((seq, self.state.calendars))
        return outcome

    def _resolution(self, res: Resolved, seq: int) -> Resolved:
        r = res.round
        if self.task is not None:
            if isinstance(r, int) and not isinstance(r, bool) and 0 <= r < len(self.task.meetings):
                self.resolve(r)
            else:
                self.unresolved += 1
        self.resolutions.append((seq, res, self.state.calendars))
        return res

    # -- reading ------------------------------------------------------------------------
    def outcome_of(self, round_index: int) -> Resolved | None:
        """The recorded ``resolution`` of a round (the last one, if a trace has two)."""
        return next((res for _s, res, _c in reversed(self.resolutions) if res.round == round_index), None)

    @property
    def folds_cleanly(self) -> bool:
        """Every batch was applied and (with a task) every resolution resolved."""
        return not self.refused and not self.unresolved


def fold_events(task: Task, events: list[dict[str, Any]]) -> Fold:
    """A task's events folded from its initial calendars (no checks against the record)."""
    return Fold.for_task(task).apply_all(events)


__all__ = ["Fold", "fold_events"]
