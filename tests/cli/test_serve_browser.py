"""``calbench serve`` in a real browser (Debian's Chromium through Playwright), issue 24 items
21, 25 and 27: behind a TLS reverse proxy, ``--linger`` for browser sessions, focus on load,
no font from another site, and the "disconnected — reconnecting" banner.

Everything runs on the loopback; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from lab.remote_bot import RemoteBot

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "import sys; from calbench_cli.cli import main; sys.exit(main())"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)")


def _serve(tmp_path, *extra):
    db = tmp_path / "serve.db"
    err = open(tmp_path / "serve.err", "w")
    proc = subprocess.Popen([*CLI, "serve", "--agents", "human,imap,human,imap,imap", "--task", "canonical:3",
                             "--port", "0", "--json", "--db", str(db), *extra],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise AssertionError(f"serve printed nothing: {(tmp_path / 'serve.err').read_text()}")
    return proc, json.loads(line), db


def _stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
    proc.kill()
    proc.wait(timeout=10)


async def _browser(p, tmp_path, *more):
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    return await p.chromium.launch_persistent_context(str(profile), executable_path=CHROMIUM, headless=True,
                                                      args=[*FLAGS, *more], viewport={"width": 1200, "height": 800})


async def _until(predicate, what: str, timeout: float = 40.0, step: float = 0.2):
    t0 = time.monotonic()
    while not await predicate():
        assert time.monotonic() - t0 < timeout, f"timed out waiting for {what}"
        await asyncio.sleep(step)


def _seat_event(bot: RemoteBot, kind: str, seat: int) -> int:
    return sum(1 for f in bot.frames if f["type"] == "event" and f["event"]["type"] == kind
               and f["event"].get("agent_id") == seat)


def _joined(bot: RemoteBot, seat: int) -> bool:
    return any(f["type"] == "lobby" and seat in f.get("present", []) for f in bot.frames)


def test_keys_work_on_load_without_a_click_and_nothing_is_fetched_from_another_site(tmp_path):
    """Item 27: the terminal is focused as soon as it is connected (first load and after a reload),
    and the page fetches nothing but from the server (the font is served locally)."""
    playwright = pytest.importorskip("playwright.async_api")
    proc, info, db = _serve(tmp_path, "--hold", "60", "--linger", "0")
    origin = info["web"].rstrip("/")
    seat2 = info["seats"][1]["code"]
    requests: list[str] = []
    try:
        async def main():
            bot = RemoteBot(info["url"], info["seats"][0]["code"])
            bot_task = asyncio.ensure_future(bot.run())
            async with playwright.async_playwright() as p:
                context = await _browser(p, tmp_path)
                page = context.pages[0] if context.pages else await context.new_page()
                page.on("request", lambda r: requests.append(r.url))
                await page.goto(f"{origin}/?code={seat2}")
                await page.wait_for_selector("canvas", timeout=30_000)
                async def my_turn():
                    return _seat_event(bot, "turn_start", 2) >= 1
                await _until(my_turn, "the browser seat's first turn")
                # no click anywhere: the keys must reach the game (q closes the instructions, e ends the turn)
                await page.keyboard.press("q")
                t0 = time.monotonic()
                while _seat_event(bot, "turn_end", 2) < 1:
                    assert time.monotonic() - t0 < 40, "a key pressed without clicking never reached the game"
                    await page.keyboard.press("e")
                    pressed = time.monotonic()  # press again only if nothing came of it in 2 s
                    while _seat_event(bot, "turn_end", 2) < 1 and time.monotonic() - pressed < 2:
                        await asyncio.sleep(0.1)
                await page.reload()
                await page.wait_for_selector("canvas", timeout=30_000)
                async def focused():
                    return await page.evaluate(
                        "() => !!document.activeElement && "
                        "document.activeElement.classList.contains('xterm-helper-textarea')")
                await _until(focused, "the terminal to have the keyboard focus after a reload")
                fonts = await page.evaluate("() => document.fonts.check('16px \"Roboto Mono\"')")
                await context.close()
            bot_task.cancel()
            return fonts

        fonts = asyncio.run(main())
    finally:
        _stop(proc)
    print("fetched:", sorted({u.split("?")[0].rsplit("/", 1)[-1] for u in requests if "/static/" in u}))
    assert requests and all(u.startswith(origin + "/") or u.startswith(("data:", "blob:")) for u in requests), \
        [u for u in requests if not u.startswith(origin)]
    # the reduced fonts (calbench_tui/web_pages/static/fonts), not textual-serve's 380 KB of TTF
    assert any("/static/fonts/calbench-mono" in u for u in requests) and fonts
    assert not [u for u in requests if "/static/fonts/RobotoMono" in u or u.endswith("background.png")]


def _certificate(tmp_path: Path) -> ssl.SSLContext:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (needed for the TLS proxy's certificate)")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(cert), str(key))
    return ctx


class TlsProxy:
    """A reverse proxy terminating TLS, as a lab's nginx would: HTTP requests and websockets
    are passed to ``upstream`` with X-Forwarded-Proto/-Host/-For.  ``cut()`` drops every
    proxied connection and answers 502 until ``restore()``."""

    HOP = {"connection", "keep-alive", "upgrade", "transfer-encoding", "host", "content-length",
           "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions", "content-encoding"}

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.down = False
        self.sockets: set[web.WebSocketResponse] = set()
        self.upgrades = 0
        self.http: aiohttp.ClientSession | None = None
        self.runner: web.AppRunner | None = None
        self.port = 0

    def _headers(self, request: web.Request) -> dict[str, str]:
        out = {k: v for k, v in request.headers.items() if k.lower() not in self.HOP}
        out.update({"X-Forwarded-Proto": "https", "X-Forwarded-Host": request.host,
                    "X-Forwarded-For": request.remote or ""})
        return out

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.down:
            raise web.HTTPBadGateway(text="the upstream is away")
        url = self.upstream + request.path_qs
        if request.headers.get("Upgrade", "").lower() == "websocket":
            self.upgrades += 1
            async with self.http.ws_connect(url.replace("http://", "ws://", 1), headers=self._headers(request),
                                            max_msg_size=0) as up:
                down = web.WebSocketResponse(max_msg_size=0)
                await down.prepare(request)
                self.sockets.add(down)

                async def to_upstream():
                    async for msg in down:
                        if msg.type == aiohttp.WSMsgType.TEXT:
                            await up.send_str(msg.data)
                        elif msg.type == aiohttp.WSMsgType.BINARY:
                            await up.send_bytes(msg.data)
                    await up.close()

                async def to_browser():
                    async for msg in up:
                        if msg.type == aiohttp.WSMsgType.TEXT:
                            await down.send_str(msg.data)
                        elif msg.type == aiohttp.WSMsgType.BINARY:
                            await down.send_bytes(msg.data)
                    if not down.closed:
                        await down.close(code=up.close_code or 1000)

                tasks = [asyncio.ensure_future(to_upstream()), asyncio.ensure_future(to_browser())]
                try:
                    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for t in tasks:
                        t.cancel()
                    self.sockets.discard(down)
                return down
        async with self.http.request(request.method, url, headers=self._headers(request),
                                     data=await request.read()) as r:
            body = await r.read()
            headers = {k: v for k, v in r.headers.items() if k.lower() not in self.HOP}
            return web.Response(status=r.status, body=body, headers=headers)

    async def start(self, ssl_context: ssl.SSLContext) -> None:
        self.http = aiohttp.ClientSession(auto_decompress=True)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=ssl_context)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    def cut(self) -> None:
        self.down = True
        for ws in list(self.sockets):  # an abrupt loss of the line: no close handshake
            transport = ws._req.transport if ws._req is not None else None
            if transport is not None:
                transport.abort()

    def restore(self) -> None:
        self.down = False

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
        if self.http is not None:
            await self.http.close()


def test_behind_a_tls_reverse_proxy_the_page_uses_wss_and_a_lost_line_shows_reconnecting(tmp_path):
    """Item 21: behind a TLS proxy (X-Forwarded-Proto: https) the page's script, font and websocket
    are https/wss, so Chromium blocks nothing and the seat joins.  Item 27: when the line drops,
    the page says "disconnected — reconnecting" and comes back by itself."""
    playwright = pytest.importorskip("playwright.async_api")
    ctx = _certificate(tmp_path)
    # the proxy runs on this machine: its X-Forwarded-* headers are believed (issue 34: only a trusted proxy's are)
    proc, info, db = _serve(tmp_path, "--hold", "120", "--linger", "0", "--trusted-proxy", "127.0.0.1")
    seat2 = info["seats"][1]["code"]
    console: list[str] = []
    try:
        async def main():
            proxy = TlsProxy(info["web"])
            await proxy.start(ctx)
            bot = RemoteBot(info["url"], info["seats"][0]["code"])
            bot_task = asyncio.ensure_future(bot.run())
            try:
                async with playwright.async_playwright() as p:
                    context = await _browser(p, tmp_path, "--ignore-certificate-errors")
                    page = context.pages[0] if context.pages else await context.new_page()
                    page.on("console", lambda m: console.append(m.text))
                    await page.goto(f"https://127.0.0.1:{proxy.port}/?code={seat2}")
                    html = await page.content()
                    assert f"wss://127.0.0.1:{proxy.port}/ws/{seat2}" in html
                    await page.wait_for_selector("canvas", timeout=30_000)

                    async def joined():
                        return _joined(bot, 2)
                    await _until(joined, "the browser's seat to join through the proxy")
                    banner = page.locator("#calbench-link")
                    assert not await banner.is_visible()

                    upgrades = proxy.upgrades
                    proxy.cut()

                    async def reconnecting():
                        return await banner.is_visible() and "disconnected" in (await banner.inner_text())
                    await _until(reconnecting, "the 'disconnected — reconnecting' banner", timeout=20)
                    text = await banner.inner_text()
                    proxy.restore()

                    async def back():
                        return proxy.upgrades > upgrades and not await banner.is_visible()
                    await _until(back, "the page to reconnect by itself", timeout=40)
                    await page.wait_for_selector("canvas", timeout=30_000)
                    await context.close()
            finally:
                bot_task.cancel()
                await proxy.stop()
            return text

        text = asyncio.run(main())
    finally:
        _stop(proc)
    assert text.startswith("disconnected — reconnecting")
    assert not [m for m in console if "Mixed Content" in m], console


def test_a_browser_player_keeps_the_page_after_the_game_while_linger_lasts(tmp_path):
    """Item 25: the server stays up for a browser session after the game (--linger), and stops
    once the page is closed — not when the game's table connections close."""
    playwright = pytest.importorskip("playwright.async_api")
    proc, info, db = _serve(tmp_path, "--hold", "60", "--linger", "120")
    code0, code2 = info["seats"][0]["code"], info["seats"][1]["code"]
    try:
        async def main():
            bot = RemoteBot(info["url"], code0)
            bot_task = asyncio.ensure_future(bot.run())
            async with playwright.async_playwright() as p:
                context = await _browser(p, tmp_path)
                page = context.pages[0] if context.pages else await context.new_page()
                await page.goto(f"{info['web']}?code={code2}")
                await page.wait_for_selector("canvas", timeout=30_000)

                async def joined():
                    return _joined(bot, 2)
                await _until(joined, "the browser's seat to join")
                # the rest of the game is played by a bot that takes seat 2 over: the browser's
                # app closes its table connection, as it does at the end of a game
                other = RemoteBot(info["url"], code2)
                results = await asyncio.wait_for(asyncio.gather(bot_task, other.run()), 120)
                assert all(r["type"] == "game_over" and r["status"] == "completed" for r in results)
                t0 = time.monotonic()
                async with aiohttp.ClientSession() as http:
                    while time.monotonic() - t0 < 5:  # the page is still open: the server must stay, serving
                        assert proc.poll() is None, "the server left while a browser session was open"
                        async with http.get(info["web"], timeout=aiohttp.ClientTimeout(total=10)) as r:
                            assert r.status == 200  # (before: refused at once, the server was shutting down)
                        await asyncio.sleep(0.25)
                assert not await page.evaluate("() => document.body.classList.contains('-closed')")
                await context.close()
            exit_code = await asyncio.to_thread(proc.wait, 30)
            return exit_code

        assert asyncio.run(main()) == 0
    finally:
        _stop(proc)
