"""One game session: create the saved game, run it, then finish, stop or fail it.

Every driver that plays a game — the terminal app, the suite runner, the study runner,
the table server, the executors — calls :func:`run_session`; none of them talks to the
store about a game's life on its own.  So a game's life is written once:

* **stream** (interactive games: human or LLM seats): the game is created ``running``
  before the first event, every event is committed as it is emitted (a kill loses at
  most the event being written), and the end is recorded in one transaction.
* **batch** (scripted suites, where a game takes milliseconds): events stay in memory
  and the finished game is handed whole to ``saver`` (or imported at once), so worker
  processes do not queue for SQLite's writer lock once per event.

Ends:

* completed — the trace is saved with its final state, metrics and seat rows;
* failed — a persona or the engine raised: the error text *and* a short traceback are
  saved with the events so far, and the outcome says so (the caller decides whether a
  suite goes on);
* stopped — the session was cancelled (ctrl+q, Ctrl-C, a server shutting down): the
  events so far stay saved, the game is marked ``stopped`` and ``CancelledError`` goes
  on up.  A batch game that is cancelled is not saved; ``--resume`` plays it again.

Listeners (any ``engine.events.EventSink``: a screen, a remote seat, a progress meter)
see every event as it happens; on a resumed game they are first shown the events kept
from the earlier run, so a screen or a client can rebuild its view from them.  The events
of the round that was cut short are kept too, apart (the trace's ``interrupted_events``),
and the engine's ``round_restarted`` event tells the seats that round starts again.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Sequence

from engine.events import Clock, EventSink, ListSink, MultiSink, wall_clock
from engine.game import GameConfig, GameResult, end_game, play_game
from engine.model import Task
from engine.redact import redact
from engine.scoring import score_played
from engine.seating import seats_config

__all__ = ["Session", "SessionOutcome", "packs_events", "run_session", "fail_session", "failure_trace", "saved_trace"]

Saver = Callable[[dict[str, Any]], Awaitable[Any]]


def packs_events(saver: Saver) -> Saver:
    """Mark ``saver`` as one that packs the finished trace's events lean in this process
    (``lab.runner.prepared``: ``engine.lean``, trusted) and reads nothing else of them.  A
    game filed through it, with no listener and no ``after`` measurement, is played with
    ``renders=False`` (``engine.game.play_game``): the calendar renders that packing drops
    are never written (~5 % of a scripted suite game's instructions)."""
    saver.packs_events = True  # type: ignore[attr-defined]
    return saver


@dataclass(frozen=True)
class Session:
    """What one game is: the task, who sits where, the rules, and how it is filed.

    Made by ``lab.gamespec.GameSpec.session`` only (every driver describes its game as a
    ``GameSpec``; ``tests/architecture/test_one_session.py``).

    ``agents`` is the table's spec label as stored with the game (``imap,llm:gpt-4o,...``);
    ``settings_key`` is what ``--resume`` matches games on; ``extra_config`` is merged into
    the trace's ``config`` (never a key: callers pass public settings only).
    """

    task: Task
    seats: Sequence[Any]
    config: GameConfig
    game_id: str
    agents: str
    settings_key: str
    extra_config: Mapping[str, Any] = field(default_factory=dict)
    clock: Clock | None = None

    def config_json(self) -> dict[str, Any]:
        """The ``config`` recorded when the game is created (the engine writes the full one at the end)."""
        return {**self.config.to_json(), **self.extra_config, "task_id": self.task.task_id,
                "num_agents": self.task.num_agents,
                "agents": seats_config(self.seats)}  # the same entries as the engine's trace at the end


@dataclass
class SessionOutcome:
    """How a session ended.  ``trace`` is the full trace when completed, a partial one when failed."""

    session: Session
    status: str  # completed | failed
    trace: dict[str, Any]
    result: GameResult | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def game_id(self) -> str:
        return self.session.game_id


def saved_trace(session: Session, trace: dict[str, Any], status: str) -> dict[str, Any]:
    """``trace`` with the ``saved`` key the store's import reads (agents, settings key, status,
    and the task's cost mode, which the store would otherwise rebuild the task to learn)."""
    return {**trace, "saved": {"agents": session.agents, "settings_key": session.settings_key,
                               "status": status, "source": "calbench", "cost_mode": session.task.cost_mode}}


def failure_trace(session: Session, events: list[dict[str, Any]], exc: BaseException) -> dict[str, Any]:
    """The partial trace of a game that raised: its events so far, the error and where it came from."""
    return {"game_id": session.game_id, "config": session.config_json(), "events": events,
            "final_state": None, "metrics": None, "ended_at": wall_clock(), "stopped": False,
            "task": session.task.to_row(), "error": redact(f"{type(exc).__name__}: {exc}"),
            "error_traceback": redact("".join(traceback.format_exception(exc, limit=10)))}


async def run_session(session: Session, *, store: Any = None, stream: bool = True,
                      listeners: Sequence[EventSink] = (), resume_upto: int | None = None,
                      saver: Saver | None = None,
                      after: Callable[[list[dict[str, Any]]], Awaitable[Any]] | None = None,
                      owner: str = "calbench") -> SessionOutcome:
    """Play ``session`` to its end, filing it in ``store`` (``saves.store.Store`` or None).

    ``resume_upto``: continue a stopped game of this id, keeping its events up to that
    ``seq`` (``engine.game.resume_point``); needs ``store`` and ``stream``.
    ``saver``: for batch games, an async callable given the finished trace (with its
    ``saved`` key) — the suite runner's burst writer; without it the trace is imported
    at once.  ``after``: an async measurement of the played game, given its events after the
    last round and before it is scored (the optional LLM judge: it returns its record, which
    the ``judge`` scorer reads, so ``game_end`` and the trace hold the same ``judge_vps``).  Raises
    ``asyncio.CancelledError`` after marking a streamed game stopped.

    A streamed game has one owner: before the game is created or reopened this process
    takes its lease (``lab.lease.hold_game``; ``owner`` names the role shown to others:
    "calbench-play", "study run", "serve") and holds it, with a heartbeat, until the game
    is filed.  Another live process's lease raises ``saves.lease.LeaseHeld`` (one line
    naming that process) before anything is written; a lease whose process is gone is
    taken over.
    """
    if store is not None and stream:
        from .lease import hold_game

        async with hold_game(store, session.game_id, owner):
            return await _run_session(session, store=store, stream=stream, listeners=listeners,
                                      resume_upto=resume_upto, saver=saver, after=after)
    return await _run_session(session, store=store, stream=stream, listeners=listeners,
                              resume_upto=resume_upto, saver=saver, after=after)


async def _run_session(session: Session, *, store: Any, stream: bool, listeners: Sequence[EventSink],
                       resume_upto: int | None, saver: Saver | None,
                       after: Callable[[list[dict[str, Any]]], Awaitable[Any]] | None) -> SessionOutcome:
    t0 = time.perf_counter()
    gid = session.game_id
    resume_events: list[dict[str, Any]] | None = None
    interrupted: list[dict[str, Any]] = []
    store_sink = None
    memory = ListSink()
    if resume_upto is not None and (store is None or not stream):
        raise ValueError("resuming a game needs a store and a streamed session")
    if store is not None and stream:
        try:
            if resume_upto is not None:
                # One transaction sets the round cut short aside (kept, marked interrupted) and
                # marks the game running again; the engine says the round restarts and plays it again.
                resume_events = await store.reopen_game(gid, resume_upto)
                interrupted = await store.interrupted_events(gid)
            else:
                await store.create_game(gid, task_row=session.task.to_row(), config=session.config_json(),
                                        agents=session.agents, settings_key=session.settings_key,
                                        started_at=wall_clock())
        except asyncio.CancelledError:
            # stopped while the game was being filed (ctrl+c as a table fills): its transaction
            # either committed (the game is then stopped, not left running) or rolled back
            await asyncio.shield(_mark_stopped(store, gid))
            raise
        store_sink = store.sink(gid, durable=True)
    if resume_events:
        for ev in resume_events:
            for listener in listeners:
                await listener.emit(ev)
    # Streamed games are in the database already; batch games are kept in memory.  One sink
    # needs no fan-out (a scripted suite emits hundreds of thousands of events).
    parts = [store_sink if store_sink is not None else memory, *listeners]
    sink = parts[0] if len(parts) == 1 else MultiSink(*parts)
    renders = not (store_sink is None and saver is not None and getattr(saver, "packs_events", False)
                   and not listeners and after is None)
    try:
        played = await play_game(session.task, session.seats, session.config, sink, clock=session.clock,
                                 game_id=gid, extra_config=dict(session.extra_config), renders=renders,
                                 **({"resume_events": resume_events, "interrupted_events": interrupted}
                                    if resume_events else {}))
        judged, after_error = await _measure(after, played)
        scores = score_played(played, judge=judged)  # scoring is a stage after the game (engine/scoring.py)
        result = await end_game(played, scores.final_state, scores.metrics, scores.versions, judge=judged)
        if after_error is not None:
            result.trace["after_error"] = after_error
    except asyncio.CancelledError:
        if store_sink is not None:
            await _close_quietly(store_sink)
            await asyncio.shield(_mark_stopped(store, gid))
        raise
    except Exception as exc:  # a broken persona or an engine bug: record it with its traceback
        trace = failure_trace(session, [] if store_sink is not None else list(memory.events), exc)
        await _file(store, store_sink, saver, session, trace, "failed")
        return SessionOutcome(session, "failed", trace, error=trace["error"], seconds=time.perf_counter() - t0)
    await _file(store, store_sink, saver, session, result.trace, "completed")
    return SessionOutcome(session, "completed", result.trace, result=result, seconds=time.perf_counter() - t0)


async def _measure(after: Callable[[list[dict[str, Any]]], Awaitable[Any]] | None,
                   played: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The measurement taken of a played game before it is scored (the LLM judge): its
    record for the ``judge`` scorer, and the error of one that broke (a measurement that
    broke never costs the game: it is filed, with the error)."""
    if after is None:
        return None, None
    try:
        got = await after(list(played.events))
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return None, redact(f"{type(exc).__name__}: {exc}")
    return (got if isinstance(got, dict) else None), None


async def fail_session(session: Session, exc: BaseException, *, store: Any = None, stream: bool = True,
                       saver: Saver | None = None) -> SessionOutcome:
    """File a game that could not start (its seats could not be made) as ``failed``, like one that raised.

    The same ends as :func:`run_session`: the error text and traceback are saved, with no
    events; the caller's suite goes on.
    """
    trace = failure_trace(session, [], exc)
    if store is not None and stream:
        await store.create_game(session.game_id, task_row=session.task.to_row(), config=session.config_json(),
                                agents=session.agents, settings_key=session.settings_key, started_at=wall_clock())
        await store.finish_game(session.game_id, trace, status="failed")
    else:
        await _file(store, None, saver, session, trace, "failed")
    return SessionOutcome(session, "failed", trace, error=trace["error"])


async def _file(store, store_sink, saver, session: Session, trace: dict[str, Any], status: str) -> None:
    if store_sink is not None:
        await _close_quietly(store_sink)  # the events so far are in the database already
        await store.finish_game(session.game_id, trace, status=status)
    elif saver is not None:
        await saver(saved_trace(session, trace, status))
    elif store is not None:
        await store.import_trace(saved_trace(session, trace, status))


async def _mark_stopped(store, game_id: str) -> None:
    try:
        await store.mark_status(game_id, "stopped")
    except Exception:
        pass


async def _close_quietly(sink) -> None:
    try:
        await sink.aclose()
    except Exception:
        pass
