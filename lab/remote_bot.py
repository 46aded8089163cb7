"""A scripted participant over the wire: plays one table seat with any persona.

It connects to ``calbench serve`` exactly as ``calbench-play --join`` does, decodes each
request's observation with ``engine.wire`` and lets a persona (IMAP by default) answer.
Dry runs of a served table, the network tests and ``benchmarks/server.py`` use it; it also
records when each frame arrived, so a benchmark can measure latency from one client's
action to every recipient's update.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from engine.actions import actions_to_json
from engine.wire import observation_from_wire

__all__ = ["RemoteBot"]


@dataclass
class RemoteBot:
    url: str
    code: str
    persona: Any = None  # default: a fresh IMAP persona
    think: float = 0.0  # seconds to wait before answering (a person is slower than a bot)
    stop_after: int | None = None  # close the connection after this many answers (disconnect tests)
    hold_after: int | None = None  # after this many answers, stay connected and answer nothing more (a tab left open)
    on_frame: Callable[[dict[str, Any]], Any] | None = None
    frames: list[dict[str, Any]] = field(default_factory=list)
    arrivals: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    sent: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    seat: int | None = None
    result: dict[str, Any] | None = None
    answers: int = 0

    def __post_init__(self) -> None:
        if self.persona is None:
            from personas.scripted.imap import IMAPPersona

            self.persona = IMAPPersona()

    async def run(self) -> dict[str, Any] | None:
        """Play until the game is over (returns the ``game_over`` frame) or ``stop_after`` answers."""
        import aiohttp

        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(self.url, max_msg_size=0) as ws:
                await ws.send_str(json.dumps({"type": "join", "code": self.code}))
                async for msg in ws:
                    if msg.type != aiohttp.WSMsgType.TEXT:
                        break
                    frame = json.loads(msg.data)
                    self.arrivals.append((time.perf_counter(), frame))
                    self.frames.append(frame)
                    if self.on_frame is not None:
                        self.on_frame(frame)
                    t = frame.get("type")
                    if t == "welcome":
                        self.seat = frame["seat"]
                    elif t == "request":
                        holding = self.hold_after is not None and self.answers >= self.hold_after
                        if holding and frame["kind"] != "register":
                            continue
                        await self._answer(ws, frame)
                        if self.stop_after is not None and self.answers >= self.stop_after:
                            return None
                    elif t in ("game_over", "cancelled", "stopped", "taken_over") or (t == "error" and frame.get("fatal")):
                        self.result = frame
                        return frame
        return None

    async def _answer(self, ws, frame: dict[str, Any]) -> None:
        obs = observation_from_wire(frame["obs"])
        kind = frame["kind"]
        if kind == "register":
            await self.persona.register(obs)
            return
        if self.think:
            await asyncio.sleep(self.think)
        reply = await getattr(self.persona, kind)(obs)
        out = {"type": "reply", "id": frame["id"], "actions": actions_to_json(reply.actions), "text": reply.text}
        self.sent.append((time.perf_counter(), out))
        self.answers += 1
        try:
            await ws.send_str(json.dumps(out))
        except ConnectionResetError:
            pass  # the server is closing: the frames it sent before (game_over, stopped) are still read
