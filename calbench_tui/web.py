"""The game screen in a browser: textual-serve runs ``calbench-play --join`` per visitor.

Participants install nothing: ``calbench serve`` answers ``http://HOST:PORT/?code=CODE``
with a page whose terminal runs the same Textual app as ``calbench-play --join`` in a
process of its own, connected to the table on the same server.

What the web port guards (issue 24):

* **No process without a code.**  An app process starts only for a websocket that names a
  join code of the table (or a study participant's link code).  ``/`` without a code is a
  plain form asking for it (no process); an unknown code gets a 404 page.
* **One live app per code, and caps.**  A second page with the same code replaces the
  first one's app (its page is told, in words; the table records the takeover); at most
  ``max_per_client`` apps run for one client address (the forwarded address when a
  reverse proxy on this machine sends the request), and never more than one per code.
* **The code never shows in the process list**: the app gets it in its environment
  (``CALBENCH_JOIN_CODE``), not on its command line.
* **Behind a TLS proxy**: the page's script, font and websocket addresses follow
  ``--public-url`` when given, else the proxy's ``X-Forwarded-Proto`` / ``-Host``
  headers, so an ``https://`` page opens ``wss://`` (no mixed content).
* **The page itself** (``web_page.html``) loads nothing from elsewhere (the Roboto Mono
  font is served from here), focuses the terminal as soon as it is connected (keys work
  without a click, also after a reload) and, when the connection drops, shows
  "disconnected — reconnecting" and reloads once the server answers again.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import shlex
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp_jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server

__all__ = ["WebFront", "REPLACED"]

_CODE = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: The websocket close code a page gets when the same code was opened in another page.
REPLACED = 4001
_HERE = Path(__file__).resolve().parent

_POOL_ID = re.compile(r"[A-Za-z0-9_.@:-]{1,128}")  # an online pool's id for a participant (Prolific, MTurk ...)
_NO_LINK = "This link does not open a CalBench session. Check the link you were given."


def _to_int(value: str | None, default: int, lo: int, hi: int) -> int:
    try:
        return max(lo, min(hi, int(value or default)))
    except ValueError:
        return default


def _python_cli(entry: str) -> str:
    """A shell command running this Python's CalBench command line (``main`` or ``play_main``)."""
    return (f"{shlex.quote(sys.executable)} -c "
            + shlex.quote(f"import sys; from calbench_cli.cli import {entry}; sys.exit({entry}())"))


class _App(AppService):
    """textual-serve's app process, with extra environment (the join code) kept off its command line."""

    def __init__(self, *args: Any, env: dict[str, str] | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.env = dict(env or {})

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        return {**super()._build_environment(width=width, height=height), **self.env}

    async def stop_bounded(self, timeout: float = 10.0) -> None:
        try:
            async with asyncio.timeout(timeout):
                await self.stop()
        except (asyncio.TimeoutError, Exception):
            process = self._process
            if process is not None and process.returncode is None:
                process.kill()


class WebFront(Server):
    """textual-serve's server, with the code carried from the link to the app it starts.

    Table mode (``table_url``): a visitor with one of ``codes`` gets ``calbench-play
    --join``.  Study mode (``study``): the link's code names one participant, and the
    visitor gets ``calbench study run PATH --participant ID``.  A link without a known code
    opens nothing (see the module docstring for the caps).  An online pool may add the
    participant's id in its own system (``&participant=ID``, the study's ``[pool] id_param``):
    it travels in the app websocket's path and reaches ``study run --pool-id``, which keeps it
    with the participant.
    """

    #: the study's public link (lab.study.pool.PoolDoor; set by ``serve --study``), or None
    pool_door: Any = None

    def __init__(self, *, host: str, port: int, table_url: str = "", study: tuple[str, str] | None = None,
                 participants: dict[str, str] | None = None, title: str = "CalBench",
                 codes: set[str] | None = None, public_url: str | None = None,
                 max_per_client: int = 8, pool_param: str = "participant") -> None:
        super().__init__("calbench-play --join", host=host, port=port, title=title)
        self.table_url = table_url  # set once the server listens (its port may be chosen then)
        self.study = study  # (study file, database) in study mode
        self.participants = dict(participants or {})  # code -> participant id
        self.codes = set(codes or ())  # table mode: the join codes a process may be started for
        self.public_url = public_url.rstrip("/") + "/" if public_url else None
        self.max_per_client = max_per_client
        self.pool_param = pool_param  # the link's query parameter carrying a pool's id (study mode)
        self.live: dict[str, tuple[web.WebSocketResponse, _App, str]] = {}  # code -> (socket, app, client)
        self.started = 0  # app processes started (the tests count them)
        self.refused: list[tuple[str, str]] = []  # (client, why) of every refused start
        self._lock = asyncio.Lock()

    # -- what a code opens ------------------------------------------------------------------
    def command_for(self, code: str, pool_id: str | None = None) -> str | None:
        """The app a visitor with ``code`` gets, or None for nothing (the code goes in the environment)."""
        if not code or not _CODE.fullmatch(code):
            return None
        if self.study is not None:
            pid = self.participants.get(code)
            if pid is None:
                return None
            path, db = self.study
            return (_python_cli("main") + f" study run {shlex.quote(path)} --participant {shlex.quote(pid)}"
                    + f" --db {shlex.quote(db)}"
                    + (f" --pool-id {shlex.quote(pool_id)}" if pool_id and _POOL_ID.fullmatch(pool_id) else ""))
        if code not in self.codes:
            return None
        return _python_cli("play_main") + f" --join {shlex.quote(self.table_url)}"

    @property
    def sessions(self) -> int:
        """Browser sessions open now (each with its app process)."""
        return len(self.live)

    # -- routes -----------------------------------------------------------------------------
    def add_routes(self, app: web.Application) -> None:
        """Mount the page, its assets and the app websockets on ``app`` (the table server's)."""
        import jinja2

        aiohttp_jinja2.setup(app, loader=jinja2.ChoiceLoader([
            jinja2.DictLoader({"web_page.html": self._page_template()}),
            jinja2.FileSystemLoader(str(_HERE / "web_pages"))]))
        app.add_routes([
            web.get("/", self.handle_index, name="index"),
            web.get("/ws/{code}", self.handle_websocket, name="websocket_code"),
            web.get("/ws/{code}/pool/{pool}", self.handle_websocket, name="websocket_pool"),
            web.static("/static", self.statics_path, show_index=False, name="static"),
        ])
        app.on_shutdown.append(self.on_shutdown)

    def _page_template(self) -> str:
        """textual-serve's page with our head (local font, focus, reconnect banner) and no
        stylesheet from another site (its Google Fonts link)."""
        page = (Path(self.templates_path) / "app_index.html").read_text(encoding="utf-8")
        page = re.sub(r"<link[^>]*href=\"https?://[^\"]*\"[^>]*/?>", "", page)
        head = (_HERE / "web_pages" / "web_head.html").read_text(encoding="utf-8")
        page = page.replace("<head>", "<head>\n" + head, 1)
        return re.sub(r"(<body[^>]*>)", r'\1\n    <div id="calbench-link" role="status" aria-live="polite"></div>',
                      page, count=1)

    def _base(self, request: web.Request) -> tuple[str, str, str]:
        """(http scheme, host, path prefix) the participant's browser uses to reach us."""
        if self.public_url:
            parts = urlsplit(self.public_url)
            return parts.scheme, parts.netloc, parts.path.rstrip("/")
        proto = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
        scheme = proto if proto in ("http", "https") else request.scheme
        host = request.headers.get("X-Forwarded-Host", "").split(",")[0].strip() or request.host
        if not re.fullmatch(r"[A-Za-z0-9.\-\[\]:]{1,255}", host):
            host = request.host
        return scheme, host, ""

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        code = request.query.get("code", "").strip()
        if not code and self.study is None:
            return aiohttp_jinja2.render_template("web_code.html", request, {"title": self.title, "error": ""})
        if self.pool_door is not None and code == self.pool_door.code:
            return await self._pool_admit(request)
        if self.command_for(code) is None:
            if self.study is None and _CODE.fullmatch(code):
                return aiohttp_jinja2.render_template(
                    "web_code.html", request,
                    {"title": self.title, "error": "That code does not open a seat here. Check it and try again."},
                    status=404)
            raise web.HTTPNotFound(text=_NO_LINK)
        pool = request.query.get(self.pool_param) if self.study is not None else None
        if pool is not None and not _POOL_ID.fullmatch(pool):
            raise web.HTTPBadRequest(text=f"The {self.pool_param} in this link is not an id. Check the link you "
                                          "were given.")
        scheme, host, prefix = self._base(request)
        ws_scheme = "wss" if scheme == "https" else "ws"
        ws_path = f"/ws/{code}" + (f"/pool/{pool}" if pool else "")  # the pool's id rides in the path
        context = {"font_size": _to_int(request.query.get("fontsize"), 16, 8, 40),
                   "app_websocket_url": f"{ws_scheme}://{host}{prefix}{ws_path}",
                   "config": {"static": {"url": f"{scheme}://{host}{prefix}/static/"}},
                   "application": {"name": self.title}, "ping_url": ""}
        response = aiohttp_jinja2.render_template("web_page.html", request, context)
        response.headers["Cache-Control"] = "no-store"
        response.headers["Referrer-Policy"] = "no-referrer"  # the code is in the address
        return response

    async def _pool_admit(self, request: web.Request) -> web.StreamResponse:
        """The public link: lab.study.pool admits the pool's id; the visitor goes on to their own link."""
        from urllib.parse import quote

        from lab.study.pool import PoolRefusal

        pool = request.query.get(self.pool_param, "").strip()
        try:
            code, pid = await self.pool_door.admit(pool if _POOL_ID.fullmatch(pool) else None)
        except PoolRefusal as exc:
            raise web.HTTPForbidden(text=str(exc)) from None
        self.participants[code] = pid
        prefix = self._base(request)[2]
        raise web.HTTPFound(f"{prefix}/?code={code}&{self.pool_param}={quote(pool, safe='')}")

    def _client(self, request: web.Request) -> str:
        """The client's address; a reverse proxy on this machine names it in X-Forwarded-For."""
        peer = request.remote or "?"
        try:
            local = ipaddress.ip_address(peer).is_loopback
        except ValueError:
            local = False
        forwarded = request.headers.get("X-Forwarded-For", "")
        if local and forwarded:
            return forwarded.split(",")[-1].strip()[:64] or peer
        return peer

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        code = request.match_info.get("code", "")
        command = self.command_for(code, request.match_info.get("pool"))
        if command is None:
            raise web.HTTPNotFound(text="unknown code")
        client = self._client(request)
        async with self._lock:  # one decision at a time: two pages of one code cannot both start
            previous = self.live.get(code)
            mine = sum(1 for c, (_, _, who) in self.live.items() if who == client and c != code)
            if mine >= self.max_per_client:
                self.refused.append((client, "per-client cap"))
                raise web.HTTPTooManyRequests(
                    text=f"at most {self.max_per_client} sessions may be open from one address")
            if previous is not None:  # the same code in another page: that page's app goes first
                old_ws, old_app, _ = previous
                self.live.pop(code, None)
                # (the close handshake is not awaited here: that page may be slow to answer it)
                asyncio.ensure_future(old_ws.close(code=REPLACED, message=b"opened in another window"))
                await old_app.stop_bounded()
            ws = web.WebSocketResponse(heartbeat=15, max_msg_size=64 * 1024)
            width = _to_int(request.query.get("width"), 80, 20, 400)
            height = _to_int(request.query.get("height"), 24, 10, 200)
            await ws.prepare(request)
            service = _App(command, write_bytes=ws.send_bytes, write_str=ws.send_str, close=ws.close,
                           download_manager=self.download_manager, debug=False,
                           env={} if self.study is not None else {"CALBENCH_JOIN_CODE": code})
            self.live[code] = (ws, service, client)
            self.started += 1
        try:
            await service.start(width, height)
            await self._process_messages(ws, service)
        except (ValueError, AssertionError, TypeError, KeyError, IndexError):
            pass  # a page that sends something else than textual-serve's frames: its session ends
        finally:
            if self.live.get(code, (None,))[0] is ws:
                self.live.pop(code, None)
            await service.stop_bounded()
            if not ws.closed:
                await ws.close()
        return ws
