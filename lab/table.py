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
* **Codes.** One random, unguessable code per human seat (``secrets.token_urlsafe``).  A
  code opens one seat only; the seat is bound to the connection, so a frame cannot act for
  another seat.  A second connection with the same code takes the seat over and the first
  is told so.
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
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.actions import EnvelopeError, actions_from_json
from engine.game import GameConfig
from engine.model import Task
from engine.observe import seat_event
from engine.seats import Reply
from engine.wire import observation_to_wire
from personas.human import HumanPersona, HumanRequest

from .runner import seat_llm_config
from .session import Session, SessionOutcome, run_session, saved_trace

__all__ = ["Connection", "Table", "TableError", "RemoteSeat", "new_code"]

#: Lengths of text a client may send in one reply (content of one message, whole frame).
MAX_TEXT = 4000
MAX_ACTIONS = 20


class TableError(Exception):
    """A join or a frame the table refuses; the message is what the client is told."""


class Connection(Protocol):
    async def send(self, frame: dict[str, Any]) -> None: ...

    async def close(self, reason: str) -> None: ...


def new_code() -> str:
    """A join code: 96 random bits, URL-safe (16 characters)."""
    return secrets.token_urlsafe(12)


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
    filled_by: str | None = None  # the persona that took the seat when the lobby gave up
    briefing: HumanRequest | None = None  # the registration, re-sent on every join

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
                 settings_key: str = "serve", make_persona=None, hold_seconds: float = 120.0,
                 lobby_wait: float = 600.0, lobby_fill: str | None = "imap",
                 extra_config: dict[str, Any] | None = None) -> None:
        if len(agents) != task.num_agents:
            raise TableError(f"the table names {len(agents)} seats but the task has {task.num_agents}")
        self.task = task
        self.agents = list(agents)
        self.config = config
        self.game_id = game_id
        self.store = store
        self.settings_key = settings_key
        self.hold_seconds = hold_seconds
        self.lobby_wait = lobby_wait
        self.lobby_fill = lobby_fill
        self.extra_config = dict(extra_config or {})
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
        old, rs.conn = rs.conn, conn
        if old is not None and old is not conn:
            try:
                await old.send({"type": "taken_over", "message": "this seat was opened from another connection"})
                await old.close("taken over")
            except Exception:
                pass
        rs.timed_out = False
        if rs.hold_task is not None:
            rs.hold_task.cancel()
            rs.hold_task = None
        await self._send(rs, self._welcome(rs))
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
        if rs.conn is not conn:
            return
        rs.conn = None
        if self.status == "playing":
            rs.hold_task = asyncio.ensure_future(self._hold(rs))
        await self._broadcast_lobby()

    async def _hold(self, rs: RemoteSeat) -> None:
        await asyncio.sleep(self.hold_seconds)
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
        extra = frame.get("human_input")
        extra = {k: v for k, v in extra.items() if isinstance(k, str) and isinstance(v, (str, int, float, bool))} \
            if isinstance(extra, dict) else {}
        req.answer(Reply(actions=actions, text=text, extra={"human_input": {**extra, "remote": True}}))

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
            started = self.status == "playing"
            self.status = "stopped" if started else "cancelled"
            message = ("the host stopped the table; the game so far is saved" if started
                       else "the host stopped the table before the game started")
            for rs in self.remote.values():
                await self._send(rs, {"type": "stopped", "message": message})
            raise

    async def _run(self) -> SessionOutcome | None:
        try:
            await asyncio.wait_for(self.full.wait(), self.lobby_wait)
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
        await self._broadcast_lobby()
        session = Session(self.task, seats, self.config, self.game_id, ",".join(self.agents), self.settings_key,
                          {**self.extra_config, **seat_llm_config(seats), "remote_seats": sorted(self.remote),
                           **({"lobby": self.lobby_record} if self.lobby_record else {})})
        try:
            self.outcome = await run_session(session, store=self.store, stream=True, listeners=[_Projector(self)],
                                             owner="serve")
        finally:
            for rs in self.remote.values():
                if rs.hold_task is not None:
                    rs.hold_task.cancel()
        self.status = "over"
        for rs in self.remote.values():
            await self._send(rs, self._game_over())
        return self.outcome

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
            session = Session(self.task, [], self.config, self.game_id, ",".join(self.agents), self.settings_key,
                              self.extra_config)
            trace = {"game_id": self.game_id, "config": {**session.config_json(), "lobby": self.lobby_record},
                     "events": [], "stopped": True, "task": self.task.to_row(),
                     "error": f"lobby: cancelled after {self.lobby_wait:g} s; seats {missing} never joined"}
            await self.store.import_trace(saved_trace(session, trace, "stopped"))
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
                if rs.timed_out:
                    self._apply_timeout(rs)
                    return
            asyncio.ensure_future(self._send_request(rs, req))
        return notify

    async def _send_request(self, rs: RemoteSeat, req: HumanRequest) -> None:
        await self._send(rs, {"type": "request", "id": rs.request_id if req.kind != "register" else 0,
                              "kind": req.kind, "obs": observation_to_wire(req.obs)})

    async def _broadcast_lobby(self) -> None:
        present = sorted(rs.seat for rs in self.remote.values() if rs.present)
        frame = {"type": "lobby", "status": self.status, "present": present,
                 "waiting": sorted(set(self.remote) - set(present)),
                 "wait_left_s": max(0.0, round(self.lobby_wait - (time.monotonic() - self.started_at), 1))}
        for rs in self.remote.values():
            await self._send(rs, frame)

    async def _send(self, rs: RemoteSeat, frame: dict[str, Any]) -> None:
        conn = rs.conn
        if conn is None:
            return
        try:
            await conn.send(frame)
        except Exception:  # the connection broke mid-send: the seat is held, nothing is lost
            await self.leave(rs, conn)
