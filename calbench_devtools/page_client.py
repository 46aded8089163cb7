"""A light browser participant: speaks the served page's websocket protocol, no browser.

The page ``calbench serve`` hands a participant runs textual-serve's terminal; its script
opens ``ws(s)://HOST/ws/CODE?width=W&height=H`` and then exchanges JSON text frames
(``["resize", {...}]``, ``["stdin", TEXT]``, ``["ping", X]``) for binary frames of terminal
output.  :class:`PageClient` does the same, keeps the screen's text (escape sequences taken
out) so a test or a benchmark can wait for words on it, and times keystrokes to the next
screen update.  Used by ``benchmarks/browser_capacity.py`` and the serving tests.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from typing import Any

import aiohttp

__all__ = ["PageClient", "screen_text", "descendants", "process_stat", "process_cpu", "process_parent",
           "process_cmdline"]

_ESC = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (Linux ``/proc``; [] elsewhere): the server's app processes."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    kids = [int(x) for x in fh.read().split()]
                out += kids
                todo += kids
        except OSError:
            continue
    return out


def process_stat(pid: int) -> list[str]:
    """``/proc/PID/stat`` after the command name (index 0: the state, 1: the parent, 11/12: CPU ticks)."""
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()


def process_cpu(pid: int) -> float:
    """CPU-seconds (user + system) ``pid`` has used; 0.0 when it is gone."""
    try:
        rest = process_stat(pid)
        return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def process_parent(pid: int) -> int:
    try:
        return int(process_stat(pid)[1])
    except (OSError, IndexError, ValueError):
        return 0


def process_cmdline(pid: int) -> str:
    """``pid``'s command line, arguments joined by spaces; "" when it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def screen_text(data: bytes) -> str:
    """Terminal output as plain text (escape sequences taken out)."""
    return _ESC.sub(b"", data).decode("utf-8", "replace")


class PageClient:
    """One page's websocket: ``await connect()``, ``await wait_for("words")``, ``await key("y")``."""

    def __init__(self, ws_url: str, *, width: int = 100, height: int = 32) -> None:
        self.url = f"{ws_url}{'&' if '?' in ws_url else '?'}width={width}&height={height}"
        self.width, self.height = width, height
        self.text = ""  # everything shown so far, as plain text (escape sequences removed)
        self.frames = 0
        self.received = 0  # bytes of the terminal's output so far (uncompressed)
        self.close_code: int | None = None
        self.close_reason: str = ""
        self.connected_at: float | None = None
        self.first_frame_at: float | None = None
        self.echoes: list[float] = []  # seconds from a keystroke to the next screen update
        self._http: aiohttp.ClientSession | None = None
        self._ws: Any = None
        self._reader: asyncio.Task | None = None
        self._changed = asyncio.Event()
        self._key_sent: float | None = None

    async def connect(self, timeout: float = 120.0) -> "PageClient":
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout))
        self._ws = await self._http.ws_connect(self.url, heartbeat=None, max_msg_size=0)
        self.connected_at = time.perf_counter()
        await self._ws.send_json(["resize", {"width": self.width, "height": self.height}])
        self._reader = asyncio.ensure_future(self._read())
        return self

    async def _read(self) -> None:
        ws = self._ws
        try:
            while True:
                msg = await ws.receive()
                if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED,
                                aiohttp.WSMsgType.ERROR):
                    if msg.type == aiohttp.WSMsgType.CLOSE:
                        self.close_reason = str(msg.extra or "")
                    break
                if msg.type == aiohttp.WSMsgType.BINARY:
                    now = time.perf_counter()
                    if self.first_frame_at is None:
                        self.first_frame_at = now
                    if self._key_sent is not None:
                        self.echoes.append(now - self._key_sent)
                        self._key_sent = None
                    self.frames += 1
                    self.received += len(msg.data)
                    self.text += screen_text(msg.data)
                    if len(self.text) > 400_000:
                        self.text = self.text[-200_000:]
                    self._changed.set()
        except (aiohttp.ClientError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.close_code = ws.close_code
            self._changed.set()

    @property
    def closed(self) -> bool:
        return self._reader is not None and self._reader.done()

    async def wait_for(self, *words: str, timeout: float = 120.0, since: int = 0) -> bool:
        """Wait until one of ``words`` shows (after ``since`` characters of text); False at the
        timeout or when the page closed first."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            tail = self.text[since:]
            if any(w in tail for w in words):
                return True
            if self.closed or loop.time() >= end:
                return False
            self._changed.clear()
            try:
                async with asyncio.timeout(max(0.01, end - loop.time())):
                    await self._changed.wait()
            except TimeoutError:
                pass

    async def wait_closed(self, timeout: float = 60.0) -> int | None:
        if self._reader is not None:
            await asyncio.wait([self._reader], timeout=timeout)
        return self.close_code

    async def key(self, data: str, *, timed: bool = False) -> None:
        """Send keystrokes (as the terminal's stdin); ``timed``: time this one to the next update."""
        if timed:
            self._key_sent = time.perf_counter()
        await self._ws.send_json(["stdin", data])

    async def close(self) -> None:
        try:
            if self._ws is not None and not self._ws.closed:
                async with asyncio.timeout(5):
                    await self._ws.close()
        except (TimeoutError, aiohttp.ClientError, ConnectionError):
            pass
        if self._reader is not None:
            self._reader.cancel()
        if self._http is not None:
            await self._http.close()
