"""Playing a seat of a table served elsewhere (``calbench-play --join URL --code CODE``).

The game runs on the server (``calbench serve``); this side only shows what the seat may
see and sends back what the person does.  Frames become the very Textual messages a local
game posts — :class:`~calbench_tui.messages.GameEvent` for each projected event,
:class:`~calbench_tui.messages.HumanTurn` for each request (with the observation decoded
by ``engine.wire`` into the same dataclasses) and :class:`~calbench_tui.messages.GameOver`
at the end — so the game, decision and end screens are the same as for a local game.

A dropped connection is retried for ``rejoin_seconds``; the server replays the seat's
events on every join, so the screen is rebuilt from them and play goes on where it was.
A first connection that fails (a wrong address, no server there) is not retried: the app
exits with one line saying so.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

from engine.actions import actions_to_json
from engine.wire import WireError, observation_from_wire
from personas.human import HumanRequest

from .messages import GameEvent, GameFailed, GameOver, HumanTurn

__all__ = ["RemoteGame", "RemoteError"]


class RemoteError(Exception):
    """The table refused us for good (bad code, seat taken over, table cancelled or stopped)."""


def _reason(exc: BaseException) -> str:
    """A short cause for a failed connection (aiohttp's own texts run long)."""
    cause = getattr(exc, "os_error", None) or exc
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    text = getattr(cause, "strerror", None) or str(cause) or type(cause).__name__
    return text.splitlines()[0][:120]


class RemoteGame:
    def __init__(self, app: Any, url: str, code: str, *, rejoin_seconds: float = 120.0) -> None:
        self.app = app
        self.url = url
        self.code = code
        self.rejoin_seconds = rejoin_seconds
        self.ws = None
        self.seat: int | None = None
        self.finished = False
        self.generation = 0  # bumped on every welcome: answers to older requests are not sent

    async def run(self) -> None:
        import aiohttp

        loop = asyncio.get_running_loop()
        deadline = None
        delay = 0.5
        async with aiohttp.ClientSession() as http:
            while not self.finished:
                try:
                    async with http.ws_connect(self.url, heartbeat=20, max_msg_size=0) as ws:
                        self.ws = ws
                        await ws.send_str(json.dumps({"type": "join", "code": self.code}))
                        deadline, delay = None, 0.5
                        async for msg in ws:
                            if msg.type == aiohttp.WSMsgType.TEXT:
                                await self.on_frame(json.loads(msg.data))
                            elif msg.type in (aiohttp.WSMsgType.ERROR, aiohttp.WSMsgType.CLOSE):
                                break
                            if self.finished:
                                return
                except RemoteError as exc:
                    self.app.remote_refused(str(exc))
                    return
                except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
                    if self.seat is None:  # never joined: a wrong address or no server, not a dropped line
                        self.app.remote_unreachable(f"cannot reach a table at {self.url} ({_reason(exc)}); "
                                                    f"check the address, and that 'calbench serve' runs there")
                        return
                finally:
                    self.ws = None
                if self.finished:
                    return
                now = loop.time()
                deadline = deadline or now + self.rejoin_seconds
                if now >= deadline:
                    msg = f"lost the connection to {self.url} and could not rejoin within {self.rejoin_seconds:g} s"
                    self.app.post_message(GameFailed(msg))
                    return
                self.app.notify("Connection lost: rejoining…", severity="warning", timeout=3)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def on_frame(self, frame: dict[str, Any]) -> None:
        t = frame.get("type")
        app = self.app
        if t == "welcome":
            self.generation += 1
            self.seat = frame["seat"]
            app.remote_welcome(frame)
        elif t == "lobby":
            app.remote_lobby(frame)
        elif t == "event":
            app.post_message(GameEvent(frame["event"]))
        elif t == "request":
            try:
                obs = observation_from_wire(frame.get("obs"))
            except WireError as exc:
                app.notify(f"The server sent an unreadable request: {exc}", severity="error")
                return
            kind = frame.get("kind")
            if kind == "register":
                app.post_message(HumanTurn(HumanRequest("register", obs, self.seat)))
                return
            fut = asyncio.get_running_loop().create_future()
            req = HumanRequest(kind, obs, self.seat, fut)
            gen, rid = self.generation, frame.get("id")
            fut.add_done_callback(lambda f: asyncio.ensure_future(self._answer(f, gen, rid)))
            app.post_message(HumanTurn(req))
        elif t == "game_over":
            self.finished = True
            if frame.get("trace"):
                app.post_message(GameOver(SimpleNamespace(game_id=frame.get("game_id"), trace=frame["trace"])))
                app.status = "completed"
            else:
                app.post_message(GameFailed(frame.get("error") or "the game ended with an error"))
                app.status = "failed"
        elif t == "error":
            if frame.get("fatal"):
                raise RemoteError(frame.get("message") or "the table refused this connection")
            app.notify(f"Server: {frame.get('message')}", severity="warning", timeout=6)
        elif t == "taken_over":
            self.finished = True
            taken = getattr(app, "remote_taken_over", None)
            if taken is None:
                raise RemoteError(frame.get("message") or t)
            taken(str(frame.get("message") or "this seat is played from another connection now"))
        elif t in ("cancelled", "stopped"):
            self.finished = True
            raise RemoteError(frame.get("message") or t)

    async def _answer(self, fut: asyncio.Future, generation: int, request_id: Any) -> None:
        if fut.cancelled() or generation != self.generation or self.ws is None:
            return
        reply = fut.result()
        human = (reply.extra or {}).get("human_input")
        frame = {"type": "reply", "id": request_id, "actions": actions_to_json(reply.actions), "text": reply.text,
                 "human_input": human if isinstance(human, dict) else {}}
        try:
            await self.ws.send_str(json.dumps(frame, default=str))
        except Exception:
            pass  # the connection dropped: the server re-sends the request when we rejoin
