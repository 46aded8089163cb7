"""A table: one game whose human seats are played from elsewhere (``calbench serve``).

The table owns what the network must not decide: which seat a join code opens, what that
seat may see, how long a seat is held when its connection drops, and what happens when a
seat stays empty.  It knows nothing of websockets: a connection is anything with
``async send(frame)`` and ``async close(reason)`` (:class:`Connection`), so the server,
the tests and a benchmark all drive the same object.

* **Seats.** Each human seat is an ordinary :class:`personas.human.HumanPersona`; the
  engine awaits it exactly as it awaits a person at the terminal.  Its requests (with the
  seat's observation, already filtered by ``engine.observe``) go to the seat's connection
  as ``request`` frames; a ``reply`` frame answers them.
* **Only the seat's own projection crosses the wire**: ``event`` frames carry
  ``engine.observe.seat_event(event, seat)`` — the same privacy gate that feeds the local
  screens — and requests carry the seat's observation.  The whole trace is sent only when
  the game is over (the end screen's omniscient view, SPEC §5).
* **Codes.** One random, unguessable code per human seat (:func:`new_code`: about 101
  random bits, never starting with ``-``, so ``--code CODE`` always parses).  A code opens
  one seat only; the seat is bound to the connection, so a frame cannot act for another
  seat.  A second connection with the same code takes the seat over: both connections are
  told in words, the host's ``on_takeover`` hook is called, and the seat's next answer
  records a ``seat_takeover`` event in the trace (one that comes after the seat's last
  answer is recorded as the game ends; one after the game is over has no trace to go to).
* **Sending never waits for a client.**  Each connection has its own outbox: a queue of
  at most ``send_queue`` frames, written by a task of its own, each frame within
  ``send_timeout`` seconds.  A client that stops reading fills its outbox or stalls a
  write; it is then dropped (its seat held, then the timeout rule, as for a lost line) —
  the table and the other seats never wait for it.
* **What a person did** (``human_input``) is built here from the reply the table
  validated (actions, text, the time the server measured); a client's own notes are kept
  apart under ``client`` and can never replace those fields.
* **Lobby.** The game starts when every human seat is taken.  After ``lobby_wait`` seconds
  the empty seats are filled with ``lobby_fill`` (a persona name) or, with
  ``lobby_fill=None``, the table is cancelled; either is recorded.
* **Dropped connections.** A seat is held for ``hold_seconds``: rejoining with the same
  code replays the seat's projected events and re-sends the waiting request, so the
  client rebuilds the whole view.  Past the hold, the seat's timeout rule applies to each
  request until it comes back: a talk turn ends with nothing said, a decision is no move —
  both recorded as ``seat_timeout`` events, never silently.
"""

from __future__ import annotations

import asyncio
import secrets
import string
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine import protocols
from engine.actions import EnvelopeError, actions_from_json
from engine.game import GameConfig
from engine.model import Task
from engine.observe import seat_event
from engine.seats import Reply
from engine.wire import observation_to_wire
from personas.human import HumanPersona, HumanRequest
from personas.spec import AgentsSpec

from .gamespec import GameSpec, settings_key as key_of
from .session import SessionOutcome

__all__ = ["Connection", "Table", "TableError", "RemoteSeat", "new_code"]

#: Lengths of text a client may send in one reply (content of one message, whole frame).
MAX_TEXT = 4000
MAX_ACTIONS = 20
#: Frames that may wait for one connection, and seconds one frame may take to leave.
SEND_QUEUE = 1000
SEND_TIMEOUT = 15.0
#: A client's own notes on a reply (``human_input``): how many keys, how long each value.
MAX_CLIENT_NOTES = 16
MAX_NOTE_TEXT = 200
_FIRST = string.ascii_letters + string.digits


class TableError(Exception):
    """A join or a frame the table refuses; the message is what the client is told."""


class Connection(Protocol):
    async def send(self, frame: dict[str, Any]) -> None: ...

    async def close(self, reason: str) -> None: ...


def new_code() -> str:
    """A join code: 17 URL-safe characters, about 101 random bits, never starting with ``-``.

    (A code starting with ``-`` reads as an option: ``--code -AbC`` did not parse.)
    """
    return secrets.choice(_FIRST) + secrets.token_urlsafe(12)


_CLOSE = object()


class _Outbox:
    """The frames waiting for one connection, written by a task of its own (see the module doc)."""

    def __init__(self, table: "Table", rs: "RemoteSeat", conn: Connection) -> None:
        self.table, self.rs, self.conn = table, rs, conn
        self.queue: asyncio.Queue = asyncio.Queue(table.send_queue)
        self.dropped = False
        self.task = asyncio.ensure_future(self._pump())

    def put(self, frame: Any) -> None:
        if self.dropped:
            return
        try:
            self.queue.put_nowait(frame)
        except asyncio.QueueFull:
            self.drop(f"more than {self.table.send_queue} frames were waiting for this connection")

    async def _pump(self) -> None:
        while True:
            frame = await self.queue.get()
            if frame is _CLOSE:
                self.queue.task_done()
                await self._close("taken over")
                return
            try:
                async with asyncio.timeout(self.table.send_timeout):
                    await self.conn.send(frame)
            except asyncio.CancelledError:
                raise
            except asyncio.TimeoutError:
                self.drop(f"a frame could not be sent within {self.table.send_timeout:g} s")
                return
            except Exception:  # the connection broke mid-send: the seat is held, nothing is lost
                self.drop("the connection broke")
                return
            finally:
                self.queue.task_done()

    def drop(self, why: str) -> None:
        """Stop writing to this connection, close it (bounded) and hold its seat."""
        if self.dropped:
            return
        self.dropped = True
        self.table.dropped.append({"seat": self.rs.seat, "reason": why})
        if asyncio.current_task() is not self.task:
            self.task.cancel()
        while not self.queue.empty():  # nobody waits on these any more
            self.queue.get_nowait()
            self.queue.task_done()
        asyncio.ensure_future(self._close(why))
        self.table._detach(self.rs, self.conn)

    async def _close(self, reason: str) -> None:
        try:
            async with asyncio.timeout(self.table.send_timeout):
                await self.conn.close(reason)
        except Exception:
            abort = getattr(self.conn, "abort", None)
            if abort is not None:
                abort()

    async def flush(self) -> None:
        if not self.dropped:
            await self.queue.join()


@dataclass(eq=False)
class RemoteSeat:
    """One human seat of a table, and the connection that plays it (if any)."""

    seat: int
    code: str
    persona: HumanPersona
    conn: Connection | None = None
    events: list[dict[str, Any]] = field(default_factory=list)  # projected events so far
    pending: HumanRequest | None = None
    request_id: int = 0
    timed_out: bool = False
    hold_task: asyncio.Task | None = None
    turn_task: asyncio.Task | None = None  # the per-turn deadline of the pending request (turn_seconds)
    filled_by: str | None = None  # the persona that took the seat when the lobby gave up
    briefing: HumanRequest | None = None  # the registration, re-sent on every join
    outbox: _Outbox | None = None  # the frames waiting for ``conn``

    @property
    def present(self) -> bool:
        return self.conn is not None


class _Projector:
    """The session listener that hands every engine event, projected, to each remote seat."""

    def __init__(self, table: "Table") -> None:
        self.table = table

    async def emit(self, event: dict[str, Any]) -> None:
        for rs in self.table.remote.values():
            view = seat_event(event, rs.seat)
            if view is None:
                continue
            rs.events.append(view)
            await self.table._send(rs, {"type": "event", "event": view})


class Table:
    """One game with remote human seats; see the module docstring."""

    def __init__(self, task: Task, agents: list[str], config: GameConfig, *, game_id: str, store: Any = None,
                 settings_key: str | None = None, make_persona=None, hold_seconds: float = 120.0,
                 lobby_wait: float = 600.0, lobby_fill: str | None = protocols.default_seat(),
                 extra_config: dict[str, Any] | None = None, send_queue: int = SEND_QUEUE,
                 send_timeout: float = SEND_TIMEOUT, on_takeover=None, resume_upto: int | None = None,
                 turn_seconds: float | None = None, on_event=None) -> None:
        if len(agents) != task.num_agents:
            raise TableError(f"the table names {len(agents)} seats but the task has {task.num_agents}")
        self.task = task
        self.agents = list(agents)
        self.config = config
        self.game_id = game_id
        self.store = store
        # what the table's games are filed under (saves of earlier versions have "serve")
        self.settings_key = settings_key or key_of({"app": "calbench-serve", "agents": ",".join(self.agents),
                                                    "channels": list(config.channels),
                                                    "max_turns": config.max_turns_per_round,
                                                    "retries": config.decision_retries})
        self.hold_seconds = hold_seconds
        self.lobby_wait = lobby_wait
        self.lobby_fill = lobby_fill
        self.extra_config = dict(extra_config or {})
        self.send_queue, self.send_timeout = send_queue, send_timeout
        self.resume_upto = resume_upto  # continue a stopped served game from this seq (serve --resume)
        self.on_takeover = on_takeover  # called with (seat, message) when a seat is opened elsewhere
        # a human seat's time for one request (a talk turn, a decision), connected or not;
        # then the seat's timeout rule applies, as a study's talk / decision limits do
        self.turn_seconds = turn_seconds if turn_seconds and turn_seconds > 0 else None
        self.on_event = on_event  # called with one line for the host's console (joins, departures, the start)
        self.dropped: list[dict[str, Any]] = []  # connections dropped for not reading (seat, reason)
        self._make_persona = make_persona
        self.remote: dict[int, RemoteSeat] = {}
        for seat, name in enumerate(self.agents):
            if name == "human":
                rs = RemoteSeat(seat, new_code(), HumanPersona(name="human"))
                rs.persona.attach(self._notifier(rs))
                self.remote[seat] = rs
        if not self.remote:
            raise TableError("the table has no human seat to serve (name one 'human' in --agents)")
        self.by_code = {rs.code: rs for rs in self.remote.values()}
        self.full = asyncio.Event()
        self.status = "lobby"  # lobby | playing | over | cancelled | stopped
        self.outcome: SessionOutcome | None = None
        self.lobby_record: dict[str, Any] = {}
        self.started_at = time.monotonic()

    # -- joining ----------------------------------------------------------------------------
    def codes(self) -> list[dict[str, Any]]:
        return [{"seat": rs.seat, "code": rs.code} for rs in sorted(self.remote.values(), key=lambda r: r.seat)]

    async def join(self, code: Any, conn: Connection) -> RemoteSeat:
        """Bind ``conn`` to the seat ``code`` opens; replay what that seat has seen so far."""
        rs = self.by_code.get(code) if isinstance(code, str) else None
        if rs is None:
            raise TableError("unknown join code")
        if rs.filled_by is not None:
            raise TableError(f"seat {rs.seat} was given to {rs.filled_by} when the lobby closed")
        old, old_box = rs.conn, rs.outbox
        rs.conn, rs.outbox = conn, _Outbox(self, rs, conn)
        took_over = old is not None and old is not conn
        if took_over and old_box is not None:
            old_box.put({"type": "taken_over", "message":
                         f"Seat {rs.seat} was opened with your join code from another connection (another "
                         "window or computer) and is played from there now; this window no longer plays it."})
            old_box.put(_CLOSE)
        if took_over:
            recorded = rs.persona.note({"type": "seat_takeover", "seat": rs.seat, "status": self.status,
                                        "at": time.time(),
                                        "reason": "the same join code was opened from another connection"})
            words = (f"seat {rs.seat} was taken over: its join code was opened from another connection; the first "
                     "one was told, and " + ("the takeover is recorded in the game" if recorded else
                                             "the game was over already, so its trace does not show it"))
            if self.on_takeover is not None:
                self.on_takeover(rs.seat, words)
        rs.timed_out = False
        if rs.hold_task is not None:
            rs.hold_task.cancel()
            rs.hold_task = None
        if not took_over:
            self._say(f"seat {rs.seat} joined" + ("" if self.status == "lobby" else " again"))
        welcome = self._welcome(rs)
        if took_over:
            welcome["took_over"] = True
            welcome["message"] = (f"You took over seat {rs.seat}: it was open in another window or computer, "
                                  "which no longer plays it.")
        await self._send(rs, welcome)
        if rs.briefing is not None:
            await self._send_request(rs, rs.briefing)
        for view in list(rs.events):
            await self._send(rs, {"type": "event", "event": view, "replay": True})
        if self.status == "over" and self.outcome is not None:
            await self._send(rs, self._game_over())
        elif rs.pending is not None and not rs.pending.done:
            await self._send_request(rs, rs.pending)
        if all(r.present for r in self.remote.values()):
            self.full.set()
        await self._broadcast_lobby()
        return rs

    async def leave(self, rs: RemoteSeat, conn: Connection) -> None:
        """``conn`` is gone; hold the seat (a later connection that took it over is not affected)."""
        if self._detach(rs, conn):
            await self._broadcast_lobby()

    def _detach(self, rs: RemoteSeat, conn: Connection) -> bool:
        """Unbind ``conn`` from its seat and start holding the seat; False when it was not bound."""
        if rs.conn is not conn:
            return False
        rs.conn = None
        box, rs.outbox = rs.outbox, None
        if box is not None and not box.dropped:
            box.dropped = True
            box.task.cancel()
        if self.status == "playing" and rs.hold_task is None:
            rs.hold_task = asyncio.ensure_future(self._hold(rs))
        if self.status in ("lobby", "playing"):
            self._say(f"seat {rs.seat} left" + (f"; its seat is held {self.hold_seconds:g} s"
                                                 if self.status == "playing" else ""))
        asyncio.ensure_future(self._broadcast_lobby())
        return True

    def _say(self, line: str) -> None:
        if self.on_event is not None:
            self.on_event(line)

    async def flush(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until every connection's waiting frames are written."""
        boxes = [rs.outbox.flush() for rs in self.remote.values() if rs.outbox is not None]
        if boxes:
            await asyncio.wait([asyncio.ensure_future(b) for b in boxes], timeout=timeout)

    async def _hold(self, rs: RemoteSeat) -> None:
        try:
            await asyncio.sleep(self.hold_seconds)
        finally:
            if rs.hold_task is asyncio.current_task():
                rs.hold_task = None
        if rs.conn is None:
            rs.timed_out = True
            self._apply_timeout(rs)

    def _apply_timeout(self, rs: RemoteSeat) -> None:
        req = rs.pending
        if req is not None and not req.done and req.kind != "register":
            req.answer(Reply(error="seat_timeout",
                             error_detail=f"the participant was disconnected for more than {self.hold_seconds:g} s"))

    # -- frames from a client ---------------------------------------------------------------
    async def receive(self, rs: RemoteSeat, frame: Any) -> None:
        """Act on one frame from seat ``rs``; a bad frame raises :class:`TableError` (the game goes on)."""
        if not isinstance(frame, dict):
            raise TableError("a frame must be a JSON object")
        kind = frame.get("type")
        if "seat" in frame and frame["seat"] != rs.seat:
            raise TableError(f"this connection plays seat {rs.seat} only")
        if kind == "ping":
            await self._send(rs, {"type": "pong"})
            return
        if kind != "reply":
            raise TableError(f"unknown frame type {kind!r}")
        req = rs.pending
        if req is None or req.done:
            raise TableError("nothing is waiting for an answer from your seat")
        if frame.get("id") != rs.request_id:
            raise TableError("that answer is for an earlier request")
        raw = frame.get("actions", [])
        if not isinstance(raw, list) or len(raw) > MAX_ACTIONS:
            raise TableError(f"'actions' must be a list of at most {MAX_ACTIONS} actions")
        try:
            actions = actions_from_json(raw)
        except EnvelopeError as exc:
            raise TableError(f"bad action: {exc}") from None
        for a in actions:
            if len(getattr(a, "content", "") or "") > MAX_TEXT:
                raise TableError(f"a message may hold at most {MAX_TEXT} characters")
        text = frame.get("text")
        if text is not None and (not isinstance(text, str) or len(text) > MAX_TEXT):
            raise TableError("'text' must be a short string")
        # The record of what the person did is the server's: the actions and text validated
        # above, the time measured here (HumanPersona), "remote"; a client's own notes go
        # under "client" and cannot replace any of those.
        notes = frame.get("human_input")
        client = {}
        if isinstance(notes, dict):
            for k, v in list(notes.items())[:MAX_CLIENT_NOTES]:
                if isinstance(k, str) and len(k) <= 64 and isinstance(v, (str, int, float, bool)) \
                        and not (isinstance(v, str) and len(v) > MAX_NOTE_TEXT):
                    client[k] = v
        record: dict[str, Any] = {"remote": True, **({"client": client} if client else {})}
        req.answer(Reply(actions=actions, text=text, extra={"human_input": record}))

    # -- the game ---------------------------------------------------------------------------
    async def run(self) -> SessionOutcome | None:
        """Wait in the lobby, then play the game; None when the lobby cancelled the table.

        Cancelled (the host's ctrl+c), it tells every connected seat with a ``stopped``
        frame before re-raising; a game in play is then saved as stopped by the session
        (status ``stopped``), a table still in its lobby saves nothing (status ``cancelled``).
        """
        try:
            return await self._run()
        except asyncio.CancelledError:
            if self.status == "over":  # stopped while telling the seats the game is over: it is saved as it ended
                raise
            started = self.status == "playing" and await self._game_saved()
            self.status = "stopped" if started else "cancelled"
            message = ("the host stopped the table; the game so far is saved" if started
                       else "the host stopped the table before the game started")
            for rs in self.remote.values():
                await self._send(rs, {"type": "stopped", "message": message})
            raise

    async def _game_saved(self) -> bool:
        """Whether the game made it into the store: a stop that lands while the session is
        still filing it (ctrl+c as the last seat joins) leaves nothing saved, and the table
        then says it stopped before the game started, not that the game is saved."""
        if self.store is None:
            return True
        try:
            return await asyncio.shield(self.store.game_status(self.game_id)) is not None
        except Exception:
            return True  # the store cannot tell: say what was meant to happen

    async def _run(self) -> SessionOutcome | None:
        try:
            async with asyncio.timeout(self.lobby_wait):
                await self.full.wait()
        except asyncio.TimeoutError:
            missing = sorted(rs.seat for rs in self.remote.values() if not rs.present)
            self.lobby_record = {"waited_s": self.lobby_wait, "missing": missing}
            if self.lobby_fill is None:
                await self._cancel(missing)
                return None
            for seat in missing:
                self.remote[seat].filled_by = self.lobby_fill
                self.agents[seat] = self.lobby_fill
            self.lobby_record["filled_with"] = self.lobby_fill
        seats = self._seats()
        self.status = "playing"
        self._say(f"game {self.game_id[:8]} started" + (f"; seats {self.lobby_record['missing']} went to "
                                                         f"{self.lobby_fill}" if self.lobby_record else ""))
        await self._broadcast_lobby()
        try:
            self.outcome = await self.spec().play(seats, store=self.store, stream=True, listeners=[_Projector(self)],
                                                  owner="serve", resume_upto=self.resume_upto,
                                                  more={"lobby": self.lobby_record} if self.lobby_record else None)
        finally:
            for rs in self.remote.values():
                for task in (rs.hold_task, rs.turn_task):
                    if task is not None:
                        task.cancel()
        self.status = "over"
        for rs in self.remote.values():
            await self._send(rs, self._game_over())
        return self.outcome

    def spec(self) -> GameSpec:
        """The table's game as a ``lab.gamespec.GameSpec`` (its seats as they are now)."""
        return GameSpec(self.task, AgentsSpec.of_names(self.agents), self.config, self.game_id, self.settings_key,
                        extra_config=self.extra_config, remote_seats=tuple(sorted(self.remote)))

    def _seats(self) -> list[Any]:
        out = []
        for seat, name in enumerate(self.agents):
            rs = self.remote.get(seat)
            if rs is not None and rs.filled_by is None:
                out.append(rs.persona)
            elif self._make_persona is not None:
                out.append(self._make_persona(name, seat))
            else:
                from personas.registry import make_personas

                out.append(make_personas(name, 1)[0])
        return out

    async def _cancel(self, missing: list[int]) -> None:
        self.status = "cancelled"
        if self.store is not None:
            await self.store.import_trace(self.spec().unplayed_trace(
                f"lobby: cancelled after {self.lobby_wait:g} s; seats {missing} never joined", lobby=self.lobby_record))
        for rs in self.remote.values():
            await self._send(rs, {"type": "cancelled", "message": "the table was cancelled: not every seat was taken"})

    # -- frames to clients ------------------------------------------------------------------
    def _welcome(self, rs: RemoteSeat) -> dict[str, Any]:
        return {"type": "welcome", "seat": rs.seat, "game_id": self.game_id, "status": self.status,
                "table": {"num_agents": self.task.num_agents, "num_rounds": len(self.task.meetings),
                          "num_slots": self.task.num_slots, "channels": list(self.config.channels),
                          "human_seats": sorted(self.remote)}}

    def _game_over(self) -> dict[str, Any]:
        out = self.outcome
        if out is None:
            return {"type": "game_over", "status": "failed", "error": "the game ended without a result"}
        return {"type": "game_over", "status": out.status, "game_id": self.game_id, "error": out.error,
                "trace": out.trace if out.status == "completed" else None}

    def _notifier(self, rs: RemoteSeat):
        def notify(req: HumanRequest) -> None:
            if req.kind == "register":
                rs.briefing = req
            else:
                rs.pending = req
                rs.request_id += 1
                if rs.turn_task is not None:
                    rs.turn_task.cancel()
                    rs.turn_task = None
                if rs.timed_out:
                    self._apply_timeout(rs)
                    return
                if self.turn_seconds is not None:
                    rs.turn_task = asyncio.ensure_future(self._turn_deadline(rs, req))
            asyncio.ensure_future(self._send_request(rs, req))
        return notify

    async def _turn_deadline(self, rs: RemoteSeat, req: HumanRequest) -> None:
        """``turn_seconds`` after a request was made, an unanswered one gets the seat's timeout
        rule (a talk turn ends with nothing said, a decision is no move), recorded as a
        ``seat_timeout`` with the reason, as a study's time limits are."""
        await asyncio.sleep(self.turn_seconds)
        if rs.pending is req and not req.done:
            req.answer(Reply(error="seat_timeout", error_detail=f"no answer within the table's turn limit of "
                             f"{self.turn_seconds:g} s"))
            self._say(f"seat {rs.seat}: no answer within {self.turn_seconds:g} s; its {req.kind} timed out")

    async def _send_request(self, rs: RemoteSeat, req: HumanRequest) -> None:
        frame = {"type": "request", "id": rs.request_id if req.kind != "register" else 0,
                 "kind": req.kind, "obs": observation_to_wire(req.obs)}
        if self.turn_seconds is not None and req.kind != "register":
            frame["deadline_s"] = self.turn_seconds  # from when the request was made
        await self._send(rs, frame)

    async def _broadcast_lobby(self) -> None:
        """Who is connected, to every seat: in the lobby who is still awaited; in play whose
        participant left (the players' seats bars say so); a seat the lobby filled with a
        persona is neither."""
        present = sorted(rs.seat for rs in self.remote.values() if rs.present)
        frame = {"type": "lobby", "status": self.status, "present": present,
                 "waiting": sorted(rs.seat for rs in self.remote.values() if not rs.present and rs.filled_by is None),
                 "wait_left_s": max(0.0, round(self.lobby_wait - (time.monotonic() - self.started_at), 1))}
        for rs in self.remote.values():
            await self._send(rs, frame)

    async def _send(self, rs: RemoteSeat, frame: dict[str, Any]) -> None:
        """Queue ``frame`` for the seat's connection; never waits for the client (see the module doc)."""
        if rs.conn is not None and rs.outbox is not None:
            rs.outbox.put(frame)
