"""The game screen in a browser: textual-serve runs ``calbench-play --join`` per visitor.

Participants install nothing: ``calbench serve`` answers ``http://HOST:PORT/`` with
textual-serve's page, whose terminal runs the same Textual app as ``calbench-play --join``
in a process of its own, connected to the table on the same server.  The code is typed on
the first screen, or carried in the link (``http://HOST:PORT/?code=CODE``): the page then
opens ``/ws/CODE``, and the app starts with that code.

Only the table's websocket crosses to the app process; the browser sees the screen.
"""

from __future__ import annotations

import re
import shlex
import sys
from typing import Any

import aiohttp_jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server

__all__ = ["WebFront"]

_CODE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_POOL_ID = re.compile(r"[A-Za-z0-9_.@:-]{1,128}")  # an online pool's id for a participant (Prolific, MTurk ...)


def _to_int(value: str | None, default: int, lo: int, hi: int) -> int:
    try:
        return max(lo, min(hi, int(value or default)))
    except ValueError:
        return default


def _python_cli(entry: str) -> str:
    """A shell command running this Python's CalBench command line (``main`` or ``play_main``)."""
    return (f"{shlex.quote(sys.executable)} -c "
            + shlex.quote(f"import sys; from calbench_tui.cli import {entry}; sys.exit({entry}())"))


class WebFront(Server):
    """textual-serve's server, with the code carried from the link to the app it starts.

    Table mode (``table_url``): every visitor gets ``calbench-play --join``, with the code
    from the link or typed on the first screen.  Study mode (``study``): the link's code
    names one participant, and the visitor gets ``calbench study run PATH --participant ID``;
    a link without a known code opens nothing.  An online pool may add the participant's id
    in its own system (``&participant=ID``, the study's ``[pool] id_param``): it travels in
    the app websocket's path and reaches ``study run --pool-id``, which keeps it with the
    participant.
    """

    def __init__(self, *, host: str, port: int, table_url: str = "", study: tuple[str, str] | None = None,
                 participants: dict[str, str] | None = None, title: str = "CalBench",
                 pool_param: str = "participant") -> None:
        super().__init__("calbench-play --join", host=host, port=port, title=title)
        self.table_url = table_url  # set once the server listens (its port may be chosen then)
        self.study = study  # (study file, database) in study mode
        self.participants = dict(participants or {})  # code -> participant id
        self.pool_param = pool_param  # the link's query parameter carrying a pool's id (study mode)

    def command_for(self, code: str, pool_id: str | None = None) -> str | None:
        """The app a visitor with ``code`` (possibly empty) gets, or None for nothing."""
        if self.study is not None:
            pid = self.participants.get(code)
            if pid is None:
                return None
            path, db = self.study
            return (_python_cli("main") + f" study run {shlex.quote(path)} --participant {shlex.quote(pid)}"
                    + f" --db {shlex.quote(db)}"
                    + (f" --pool-id {shlex.quote(pool_id)}" if pool_id and _POOL_ID.fullmatch(pool_id) else ""))
        command = _python_cli("play_main") + f" --join {shlex.quote(self.table_url)}"
        return command + (f" --code {shlex.quote(code)}" if code else "")

    def add_routes(self, app: web.Application) -> None:
        """Mount the page, its assets and the app websockets on ``app`` (the table server's)."""
        aiohttp_jinja2.setup(app, loader=__import__("jinja2").FileSystemLoader(self.templates_path))
        app.add_routes([
            web.get("/", self.handle_index, name="index"),
            web.get("/ws", self.handle_websocket, name="websocket"),
            web.get("/ws/{code}", self.handle_websocket, name="websocket_code"),
            web.get("/ws/{code}/pool/{pool}", self.handle_websocket, name="websocket_pool"),
            web.static("/static", self.statics_path, show_index=False, name="static"),
        ])
        app.on_shutdown.append(self.on_shutdown)

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        code = request.query.get("code", "")
        if not _CODE.fullmatch(code or "-") or (self.study is not None and self.command_for(code) is None):
            raise web.HTTPNotFound(text="This link does not open a CalBench session. Check the link you were given.")
        pool = request.query.get(self.pool_param) if self.study is not None else None
        if pool is not None and not _POOL_ID.fullmatch(pool):
            raise web.HTTPBadRequest(text=f"The {self.pool_param} in this link is not an id. Check the link you "
                                          "were given.")
        return await self._index(request)

    @aiohttp_jinja2.template("app_index.html")
    async def _index(self, request: web.Request) -> dict[str, Any]:
        router = request.app.router
        code = request.query.get("code", "")
        route = ("websocket_code", {"code": code}) if _CODE.fullmatch(code) else ("websocket", {})
        pool = request.query.get(self.pool_param) if self.study is not None else None
        if pool and _CODE.fullmatch(code) and _POOL_ID.fullmatch(pool):  # the pool's id rides in the path
            route = ("websocket_pool", {"code": code, "pool": pool})
        host = request.host  # the address the participant used, so links work from other machines
        scheme = "wss" if request.secure else "ws"
        static = router["static"].url_for(filename="/")
        return {"font_size": _to_int(request.query.get("fontsize"), 16, 8, 40),
                "app_websocket_url": f"{scheme}://{host}{router[route[0]].url_for(**route[1])}",
                "config": {"static": {"url": f"{request.scheme}://{host}{str(static).rstrip('/')}/"}},
                "application": {"name": self.title}, "ping_url": ""}

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        code = request.match_info.get("code", "")
        pool = request.match_info.get("pool")
        command = self.command_for(code, pool) if _CODE.fullmatch(code or "-") else None
        if command is None:
            raise web.HTTPNotFound(text="unknown code")
        ws = web.WebSocketResponse(heartbeat=15)
        width = _to_int(request.query.get("width"), 80, 20, 400)
        height = _to_int(request.query.get("height"), 24, 10, 200)
        service: AppService | None = None
        try:
            await ws.prepare(request)
            service = AppService(command, write_bytes=ws.send_bytes, write_str=ws.send_str, close=ws.close,
                                 download_manager=self.download_manager, debug=False)
            await service.start(width, height)
            await self._process_messages(ws, service)
        finally:
            if service is not None:
                await service.stop()
        return ws
