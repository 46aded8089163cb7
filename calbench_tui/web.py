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
  font is served from here, cut to what the screens draw: ``web_pages/static/fonts``),
  focuses the terminal as soon as it is connected (keys work without a click, also after a
  reload) and, when the connection drops, shows
  "disconnected — reconnecting" and reloads once the server answers again.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, Sequence
from urllib.parse import urlsplit

import aiohttp_jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server

if TYPE_CHECKING:
    from .zygote import Zygote

__all__ = ["WebFront", "REPLACED", "REFUSED", "RESTARTING"]

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


#: The command line's entry points an app process runs (named, not imported: the interface
#: does not import the command line; the zygote and the cold start import them by name).
_CLI = "calbench_cli.cli"
#: A cold start (no zygote): the app process dies with the host, then runs the entry.
_COLD = ("import sys, importlib; from lab.lease import die_with_parent; die_with_parent({host}); "
         "m, f = {entry!r}.split(':'); sys.exit(getattr(importlib.import_module(m), f)(sys.argv[1:]))")
#: The page's websocket close codes besides :data:`REPLACED` (``web_head.html`` knows them).
REFUSED = 4002  # not started: the page shows the reason and does not reload
RESTARTING = 1012  # the server is stopping: the page shows "reconnecting" and comes back with it


def _python_cli(entry: str) -> str:
    """A shell command running this Python's CalBench command line (``main`` or ``play_main``)."""
    return (f"{shlex.quote(sys.executable)} -c "
            + shlex.quote(f"import sys; from {_CLI} import {entry}; sys.exit({entry}())"))


def _web_environment() -> dict[str, str]:
    """What every app process's environment holds besides its size: textual-serve's settings
    (Textual reads some of them when it is imported, so the zygote starts with them)."""
    env = AppService._build_environment(SimpleNamespace(debug=False))  # type: ignore[arg-type]
    env.pop("COLUMNS", None)
    env.pop("ROWS", None)
    return env


class _App(AppService):
    """textual-serve's app process, with extra environment (the join code) kept off its command
    line, forked by the front's zygote when it has one (a warm start), else started cold — in
    both cases in a session of its own (a ctrl+c at the host's terminal is not for it) and
    dying with the host."""

    def __init__(self, *args: Any, env: dict[str, str] | None = None, launch: tuple[str, list[str]] | None = None,
                 zygote: "Zygote | None" = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.env = dict(env or {})
        self.launch = launch  # (entry "module:function", its arguments)
        self.zygote = zygote

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        return {**super()._build_environment(width=width, height=height), **self.env}

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Any:
        if self.launch is None:
            return await super()._open_app_process(width, height)
        entry, argv = self.launch
        env = self._build_environment(width=width, height=height)
        process = None
        if self.zygote is not None and self.zygote.alive:
            try:
                process = await self.zygote.spawn(entry, argv, env)
            except OSError:
                process = None  # the zygote is gone: a cold start still serves this participant
        if process is None:
            pipe = asyncio.subprocess.PIPE
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-c", _COLD.format(host=os.getpid(), entry=entry), *argv,
                stdin=pipe, stdout=pipe, stderr=pipe, env=env, start_new_session=True)
        self._process = process
        self._stdin = process.stdin
        return process

    async def stop_bounded(self, timeout: float = 10.0) -> None:
        """Ask the app to quit and wait until its process has ended (quitting saves the
        participant's session: the last unsent words, the turn cut short), at most ``timeout``
        seconds; then it is killed.  textual-serve's own ``stop`` returns when its reader of the
        process ends, which a page already closed ends at once: a host stopping after that alone
        could exit first, and its apps die with it before they have saved."""
        process = self._process
        try:
            async with asyncio.timeout(timeout):
                await self.stop()
                if process is not None:
                    await process.wait()
        except (asyncio.TimeoutError, Exception):
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
                 max_per_client: int | None = 8, pool_param: str = "participant",
                 trusted_proxies: Sequence[str] = (), warm: bool = True) -> None:
        super().__init__("calbench-play --join", host=host, port=port, title=title)
        self.table_url = table_url  # set once the server listens (its port may be chosen then)
        self.study = study  # (study file, database) in study mode
        self.participants = dict(participants or {})  # code -> participant id
        self.codes = set(codes or ())  # table mode: the join codes a process may be started for
        self.public_url = public_url.rstrip("/") + "/" if public_url else None
        self.max_per_client = max_per_client  # None: no cap per address (a study: one session per link)
        self.trusted_proxies = parse_proxies(trusted_proxies)  # whose X-Forwarded-* headers are believed
        self.warm = warm  # app processes forked from a pre-imported zygote (else each starts cold)
        self.zygote: Zygote | None = None
        self._zygote_task: asyncio.Task | None = None
        self.events: Callable[[str], None] | None = None  # the host console: one line per join / departure
        self._static: dict[str, tuple[bytes, bytes, str]] = {}  # path -> (bytes, gzipped, content type)
        self.pool_param = pool_param  # the link's query parameter carrying a pool's id (study mode)
        self.live: dict[str, tuple[web.WebSocketResponse, _App, str]] = {}  # code -> (socket, app, client)
        self.started = 0  # app processes started (the tests count them)
        self.refused: list[tuple[str, str]] = []  # (client, why) of every refused start
        self._lock = asyncio.Lock()

    # -- what a code opens ------------------------------------------------------------------
    def launch_for(self, code: str, pool_id: str | None = None) -> tuple[str, list[str]] | None:
        """The app a visitor with ``code`` gets — (the command line's entry, its arguments) — or
        None for nothing (the join code goes in the environment, never in the arguments)."""
        if not code or not _CODE.fullmatch(code):
            return None
        if self.study is not None:
            pid = self.participants.get(code)
            if pid is None:
                return None
            path, db = self.study
            pool = ["--pool-id", pool_id] if pool_id and _POOL_ID.fullmatch(pool_id) else []
            return f"{_CLI}:main", ["study", "run", path, "--participant", pid, "--db", db, *pool]
        if code not in self.codes:
            return None
        return f"{_CLI}:play_main", ["--join", self.table_url]

    def command_for(self, code: str, pool_id: str | None = None) -> str | None:
        """:meth:`launch_for` as the shell command it amounts to (what a cold start runs), or None."""
        launch = self.launch_for(code, pool_id)
        if launch is None:
            return None
        entry, argv = launch
        return _python_cli(entry.partition(":")[2]) + " " + " ".join(shlex.quote(a) for a in argv)

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
            web.get("/static/{path:.+}", self.handle_static, name="static"),
        ])
        app.on_startup.append(self.on_startup)
        app.on_shutdown.append(self.on_shutdown)

    async def handle_static(self, request: web.Request) -> web.StreamResponse:
        """The page's script, styles and fonts, gzip-compressed once in memory when the browser
        takes gzip (textual.js: 514 KB → about 124 KB), cached by the browser for a day.  Our
        own ``web_pages/static`` comes first (the reduced fonts), then textual-serve's."""
        rel = request.match_info["path"]
        for root in (_HERE / "web_pages" / "static", Path(self.statics_path).resolve()):  # ours first (the fonts)
            path = (root / rel).resolve()
            if root in path.parents and path.is_file():
                break
        else:
            raise web.HTTPNotFound()
        key = str(path)
        if key not in self._static:
            import gzip
            import mimetypes

            raw = path.read_bytes()
            kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            packed = await asyncio.to_thread(lambda: gzip.compress(raw, 9, mtime=0))  # (0.5 MB: not on the loop)
            self._static[key] = (raw, packed, kind)
        raw, packed, kind = self._static[key]
        gz = "gzip" in request.headers.get("Accept-Encoding", "") and len(packed) < len(raw)
        headers = {"Content-Type": kind, "Cache-Control": "public, max-age=86400", "Vary": "Accept-Encoding"}
        if gz:
            headers["Content-Encoding"] = "gzip"
        return web.Response(body=packed if gz else raw, headers=headers)

    def _page_template(self) -> str:
        """textual-serve's page with our head (local font, focus, reconnect banner) and no
        stylesheet from another site (its Google Fonts link)."""
        page = (Path(self.templates_path) / "app_index.html").read_text(encoding="utf-8")
        page = re.sub(r"<link[^>]*href=\"https?://[^\"]*\"[^>]*/?>", "", page)
        head = (_HERE / "web_pages" / "web_head.html").read_text(encoding="utf-8")
        page = page.replace("<head>", "<head>\n" + head, 1)
        return re.sub(r"(<body[^>]*>)", r'\1\n    <div id="calbench-link" role="status" aria-live="polite"></div>',
                      page, count=1)

    def _trusted(self, request: web.Request) -> bool:
        """Whether the request came through a configured reverse proxy (``--trusted-proxy``):
        only then are its ``X-Forwarded-*`` headers believed."""
        return _in(request.remote, self.trusted_proxies)

    def _base(self, request: web.Request) -> tuple[str, str, str]:
        """(http scheme, host, path prefix) the participant's browser uses to reach us."""
        if self.public_url:
            parts = urlsplit(self.public_url)
            return parts.scheme, parts.netloc, parts.path.rstrip("/")
        if not self._trusted(request):
            return request.scheme, request.host, ""
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
        """The client's address: the peer's, or — from a trusted proxy — the last address its
        ``X-Forwarded-For`` names (the one the proxy itself saw; earlier ones the client wrote)."""
        peer = request.remote or "?"
        forwarded = request.headers.get("X-Forwarded-For", "") if self._trusted(request) else ""
        if forwarded:
            return forwarded.split(",")[-1].strip()[:64] or peer
        return peer

    def _say(self, line: str) -> None:
        if self.events is not None:
            self.events(line)

    def _who(self, code: str) -> str:
        if self.study is not None:
            return f"participant {self.participants.get(code, '?')}"
        return "a browser player"

    async def _refuse(self, request: web.Request, client: str, why: str) -> web.WebSocketResponse:
        """Open the page's websocket only to close it with :data:`REFUSED` and the reason: the
        page says it and does not reload (an HTTP refusal would send it into a reload loop)."""
        self.refused.append((client, why))
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.close(code=REFUSED, message=why.encode()[:120])
        return ws

    async def _launcher(self) -> "Zygote | None":
        """The zygote once it is up (None: cold starts; it failed or warm starts are off)."""
        task = self._zygote_task
        if task is None:
            return None
        try:
            await asyncio.shield(task)
        except Exception:
            return None
        return self.zygote if self.zygote is not None and self.zygote.alive else None

    async def on_startup(self, app: web.Application) -> None:
        """Start the zygote as the server starts (the first participant finds it warm)."""
        if not self.warm or not sys.platform.startswith("linux"):
            return
        from .zygote import Zygote

        self.zygote = Zygote(_web_environment())
        self._zygote_task = asyncio.ensure_future(self.zygote.start())

    async def on_shutdown(self, app: web.Application) -> None:
        """The server stops: every page is told "restarting" (it shows the reconnect banner and
        comes back when the server does), its app asked to quit (the session saved), the
        zygote stopped last (it kills what is left)."""
        live = list(self.live.values())
        self.live.clear()

        async def close_page(ws: web.WebSocketResponse) -> None:
            try:
                async with asyncio.timeout(3):
                    await ws.close(code=RESTARTING, message=b"the server is restarting")
            except Exception:
                pass

        async def close(ws: web.WebSocketResponse, app: _App) -> None:
            # the page's close frame goes out first; the app quits meanwhile (not after a slow
            # page's handshake): both within the server's own bound on stopping
            await asyncio.gather(close_page(ws), app.stop_bounded(4))

        if live:
            self._say(f"stopping: {len(live)} open page(s) told the server is restarting "
                      "(they reconnect when it is back)")
            await asyncio.gather(*(close(ws, app) for ws, app, _ in live))
        if self._zygote_task is not None:
            self._zygote_task.cancel()
            try:
                await self._zygote_task
            except BaseException:
                pass
        if self.zygote is not None:
            await self.zygote.stop()

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        code = request.match_info.get("code", "")
        launch = self.launch_for(code, request.match_info.get("pool"))
        if launch is None:
            raise web.HTTPNotFound(text="unknown code")
        client = self._client(request)
        launcher = await self._launcher()
        async with self._lock:  # one decision at a time: two pages of one code cannot both start
            previous = self.live.get(code)
            mine = sum(1 for c, (_, _, who) in self.live.items() if who == client and c != code)
            if self.max_per_client is not None and mine >= self.max_per_client:
                self._say(f"refused a page from {client}: {mine} sessions are open from that address")
                return await self._refuse(request, client, (
                    f"Not started: {mine} sessions are open from your address (the limit is {self.max_per_client}). "
                    "Close one, or ask the researcher.")[:120])
            if previous is not None:  # the same code in another page: that page's app goes first
                old_ws, old_app, _ = previous
                self.live.pop(code, None)
                # (the close handshake is not awaited here: that page may be slow to answer it)
                asyncio.ensure_future(old_ws.close(code=REPLACED, message=b"opened in another window"))
                await old_app.stop_bounded()
                self._say(f"{self._who(code)} opened their link again ({client}): the first page was told")
            else:
                self._say(f"{self._who(code)} connected ({client})")
            ws = web.WebSocketResponse(heartbeat=15, max_msg_size=64 * 1024)
            width = _to_int(request.query.get("width"), 80, 20, 400)
            height = _to_int(request.query.get("height"), 24, 10, 200)
            await ws.prepare(request)
            service = _App(self.command_for(code) or "", write_bytes=ws.send_bytes, write_str=ws.send_str,
                           close=ws.close, download_manager=self.download_manager, debug=False,
                           env={} if self.study is not None else {"CALBENCH_JOIN_CODE": code},
                           launch=launch, zygote=launcher)
            self.live[code] = (ws, service, client)
            self.started += 1
        try:
            await service.start(width, height)
            await self._process_messages(ws, service)
        except (ValueError, AssertionError, TypeError, KeyError, IndexError):
            pass  # a page that sends something else than textual-serve's frames: its session ends
        finally:
            mine = self.live.get(code, (None,))[0] is ws
            if mine:
                self.live.pop(code, None)
                self._say(f"{self._who(code)} left ({client})")
            await service.stop_bounded()
            if not ws.closed:
                await ws.close()
        return ws


def parse_proxies(values: Sequence[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """``--trusted-proxy`` values (addresses or networks, commas allowed); ValueError names a bad one."""
    out = []
    for raw in values:
        for part in str(raw).split(","):
            part = part.strip()
            if not part:
                continue
            try:
                out.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                raise ValueError(f"--trusted-proxy {part!r} is not an address or network (e.g. 127.0.0.1, "
                                 "10.0.0.0/8)") from None
    return out


def _in(address: str | None, networks: Sequence[Any]) -> bool:
    if not address or not networks:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in networks)
