"""The table server: remote seats join a :class:`lab.table.Table` over a websocket.

``TableServer`` is an aiohttp application with one websocket route, ``/table``.  A client
opens it, sends ``{"type": "join", "code": CODE}`` first, and from then on exchanges JSON
frames with the table (see ``docs/lab-session.md`` for the protocol).  The server is
defensive about what arrives — it is the only part of CalBench that reads frames written
by someone else's program:

* a frame larger than ``max_frame`` bytes is refused by the websocket layer (the
  connection is closed with 1009 "message too big"; the seat is held and can rejoin);
* a frame that is not JSON, nests too deep or is not an object gets an ``error`` frame,
  and the game goes on;
* more than ``rate`` frames a second (bursts of ``burst``) get an ``error`` frame and are
  dropped;
* a connection that sends no ``join`` within ``join_timeout`` seconds is closed.

Other aiohttp routes (the browser front end lives in the interface package) can be added
with ``extra_routes``; everything is served on one host and port.  It binds 127.0.0.1
unless told otherwise.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from aiohttp import WSCloseCode, WSMsgType, web

from .table import Table, TableError

__all__ = ["TableServer", "ServerLimits"]


@dataclass(frozen=True)
class ServerLimits:
    max_frame: int = 256 * 1024  # bytes of one client frame
    rate: float = 20.0  # frames per second, sustained
    burst: int = 60
    join_timeout: float = 20.0
    max_depth: int = 32  # JSON nesting
    send_timeout: float = 15.0  # seconds one frame to a client may take before the client is dropped
    stop_timeout: float = 3.0  # seconds stop() gives the last frames and the close handshakes


class _WsConnection:
    """A websocket as the table sees it: send a frame, close, abort; sends are serialised and
    each is bounded by ``timeout`` (a client that stops reading cannot hold a writer)."""

    def __init__(self, ws: web.WebSocketResponse, transport: Any = None, timeout: float = 15.0) -> None:
        self.ws = ws
        self.transport = transport
        self.timeout = timeout
        self.lock = asyncio.Lock()

    async def send(self, frame: dict[str, Any]) -> None:
        async with self.lock:
            async with asyncio.timeout(self.timeout):
                await self.ws.send_str(json.dumps(frame, separators=(",", ":"), default=str))

    async def close(self, reason: str) -> None:
        try:
            async with asyncio.timeout(self.timeout):
                await self.ws.close(message=reason.encode()[:120])
        except asyncio.TimeoutError:
            self.abort()

    def abort(self) -> None:
        """Drop the TCP connection at once (a close handshake would wait for the client)."""
        if self.transport is not None:
            self.transport.abort()


class _Bucket:
    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self.tokens, self.t = float(burst), time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.t) * self.rate)
        self.t = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


def _too_deep(text: str, limit: int) -> bool:
    """Whether the JSON text nests brackets deeper than ``limit`` (read before parsing it)."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def read_frame(text: str, limits: ServerLimits) -> Any:
    """A client frame as JSON, or :class:`TableError` saying why not."""
    if _too_deep(text, limits.max_depth):
        raise TableError("the frame nests too deeply")
    try:
        frame = json.loads(text)
    except (ValueError, RecursionError):
        raise TableError("the frame is not valid JSON") from None
    if not isinstance(frame, dict):
        raise TableError("a frame must be a JSON object")
    return frame


class TableServer:
    """Serves tables' seats on ``ws://HOST:PORT/table``."""

    def __init__(self, tables: Iterable[Table] = (), *, host: str = "127.0.0.1", port: int = 8700,
                 limits: ServerLimits = ServerLimits(),
                 extra_routes: Callable[[web.Application], None] | None = None) -> None:
        self.host, self.port = host, port
        self.limits = limits
        self.tables: list[Table] = []
        self._by_code: dict[str, Table] = {}
        for t in tables:
            self.add_table(t)
        self._extra_routes = extra_routes
        self._runner: web.AppRunner | None = None
        self._sockets: set[web.WebSocketResponse] = set()
        self._transports: dict[web.WebSocketResponse, Any] = {}
        self.extra_connections: Callable[[], int] | None = None  # e.g. the browser page's app sessions

    @property
    def connections(self) -> int:
        """Open websocket connections (joined or still to send their join frame)."""
        return len(self._sockets) + (self.extra_connections() if self.extra_connections is not None else 0)

    def add_table(self, table: Table) -> None:
        self.tables.append(table)
        for rs in table.remote.values():
            self._by_code[rs.code] = table

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}/table"

    @property
    def web_url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/table", self.handle_table)
        if self._extra_routes is not None:
            self._extra_routes(app)
        return app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.make_app(), handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        if self.port == 0:  # an ephemeral port: read back the one the kernel chose
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        """Send the frames still queued (the tables' last words), close every open connection
        ("going away"), then stop listening.  Every step is bounded by ``stop_timeout``: a
        client that does not read cannot keep the server up (its connection is aborted)."""
        limit = self.limits.stop_timeout
        for t in self.tables:
            await t.flush(limit)

        async def close(ws: web.WebSocketResponse) -> None:
            try:
                async with asyncio.timeout(limit):
                    await ws.close(code=WSCloseCode.GOING_AWAY, message=b"the server is stopping")
            except Exception:
                transport = self._transports.get(ws)
                if transport is not None:
                    transport.abort()

        if self._sockets:
            await asyncio.gather(*(close(ws) for ws in list(self._sockets)))
        if self._runner is not None:
            try:
                async with asyncio.timeout(limit + 2):
                    await self._runner.cleanup()
            except asyncio.TimeoutError:
                pass
            self._runner = None

    async def handle_table(self, request: web.Request) -> web.WebSocketResponse:
        limits = self.limits
        ws = web.WebSocketResponse(heartbeat=20, max_msg_size=limits.max_frame)
        await ws.prepare(request)
        conn = _WsConnection(ws, request.transport, limits.send_timeout)
        self._sockets.add(ws)
        self._transports[ws] = request.transport
        table = seat = None
        try:
            try:
                msg = await ws.receive(timeout=limits.join_timeout)
            except asyncio.TimeoutError:
                await conn.send({"type": "error", "message": "send a join frame first"})
                return ws
            if msg.type != WSMsgType.TEXT:
                return ws
            try:
                frame = read_frame(msg.data, limits)
                if frame.get("type") != "join":
                    raise TableError("send a join frame first: {\"type\": \"join\", \"code\": CODE}")
                code = frame.get("code")
                table = self._by_code.get(code) if isinstance(code, str) else None
                if table is None:
                    raise TableError("unknown join code")
                seat = await table.join(code, conn)
            except TableError as exc:
                await conn.send({"type": "error", "message": str(exc), "fatal": True})
                return ws
            bucket = _Bucket(limits.rate, limits.burst)
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    if not bucket.take():
                        await conn.send({"type": "error", "message": "too many frames; slow down"})
                        continue
                    try:
                        await table.receive(seat, read_frame(msg.data, limits))
                    except TableError as exc:
                        await conn.send({"type": "error", "message": str(exc)})
                elif msg.type == WSMsgType.BINARY:
                    await conn.send({"type": "error", "message": "frames are JSON text"})
                elif msg.type == WSMsgType.ERROR:
                    break
        except (ConnectionError, asyncio.TimeoutError):
            pass
        finally:
            if table is not None and seat is not None:
                await table.leave(seat, conn)
            self._sockets.discard(ws)
            self._transports.pop(ws, None)
            if not ws.closed:
                await conn.close("")
        return ws
