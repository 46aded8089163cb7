"""``calbench serve`` against hostile or clumsy clients (issue 24, items 18-20, 23-24).

Real ``calbench serve`` processes and real sockets on the loopback; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from calbench_devtools.page_client import process_cmdline as _cmdline, process_parent as _parent
from lab.remote_bot import RemoteBot

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "import sys; from calbench_cli.cli import main; sys.exit(main())"]
PLAY = [sys.executable, "-c", "import sys; from calbench_cli.cli import play_main; sys.exit(play_main())"]


def _serve(tmp_path, *extra, agents="human,imap,human,imap,imap"):
    db = tmp_path / "serve.db"
    err = open(tmp_path / "serve.err", "w")
    proc = subprocess.Popen([*CLI, "serve", "--agents", agents, "--task", "canonical:3", "--port", "0", "--json",
                             "--db", str(db), "--linger", "0", *extra],
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


def _events(db: Path, game_id: str) -> list[tuple[str, dict]]:
    from saves.store import Store

    async def load():
        store = await Store.open(db)
        try:
            return await store.load_trace(game_id)
        finally:
            await store.close()

    return [(e["type"], e["data"]) for e in asyncio.run(load())["events"]]


def _status(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT game_id, status FROM games").fetchall()


class StalledClient:
    """A websocket client that joins a seat, then sends pings and never reads a byte.

    A raw socket with a tiny receive buffer: the server's frames pile up in the kernel and
    in the server's own buffers, as they do for a client that stopped reading."""

    def __init__(self, url: str, code: str) -> None:
        host_port = url.split("//", 1)[1].split("/", 1)[0]
        host, port = host_port.rsplit(":", 1)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        self.sock.settimeout(10)
        self.sock.connect((host, int(port)))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /table HTTP/1.1\r\nHost: {host_port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
                           ).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        assert b" 101 " in head.split(b"\r\n", 1)[0], head
        self.send({"type": "join", "code": code})
        self.sent = 0

    def send(self, frame: dict) -> None:
        payload = json.dumps(frame).encode()
        mask = os.urandom(4)
        n = len(payload)
        header = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack("!H", n))
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def flood(self, frames: int = 400_000) -> int:
        """Pings, as fast as the server takes them, until it stops reading us (bounded).

        Past the rate limit each ping is answered with an error frame that nobody reads; the
        bound is large enough for those answers to overflow the loopback buffers (a few MB), so
        a send times out.  (20,000 pings fit in the buffers: seat 0 was then dropped only by
        the websocket heartbeat, ~30 s later, and the send timeout went untested here.)"""
        try:
            for _ in range(frames):
                self.send({"type": "ping"})
                self.sent += 1
        except (socket.timeout, OSError):
            pass
        return self.sent

    def close(self) -> None:
        self.sock.close()


def test_a_client_that_stops_reading_is_dropped_and_the_table_plays_on(tmp_path):
    """Item 18, end to end: seat 0 stops reading (and floods pings); seat 2 still plays the whole
    game, and seat 0 is dropped, held, then played by the timeout rule — recorded.  (Before,
    the table stood still until the websocket heartbeat gave up on seat 0, if it did; the
    deterministic check is the test above.)"""
    proc, info, db = _serve(tmp_path, "--no-web", "--hold", "1", "--send-timeout", "2")
    stalled = None
    try:
        code0, code2 = info["seats"][0]["code"], info["seats"][1]["code"]
        stalled = StalledClient(info["url"], code0)

        async def main():
            bot = RemoteBot(info["url"], code2)
            play = asyncio.ensure_future(bot.run())
            await asyncio.to_thread(stalled.flood)
            return await asyncio.wait_for(play, 120)

        result = asyncio.run(main())
        assert result["type"] == "game_over" and result["status"] == "completed"
        assert proc.wait(timeout=30) == 0
    finally:
        if stalled is not None:
            stalled.close()
        _stop(proc)
    events = _events(db, info["game_id"])
    assert [g for g, s in _status(db)] == [info["game_id"]] and _status(db)[0][1] == "completed"
    assert any(t == "seat_timeout" and d.get("agent_id") == 0 for t, d in events)
    assert not any(t == "seat_timeout" and d.get("agent_id") == 2 for t, d in events)


class StuckConnection:
    """A connection whose writes never finish (a peer that stopped reading, with every buffer
    on the way full) and whose close never finishes either."""

    def __init__(self) -> None:
        self.sent = 0
        self.never = asyncio.Event()

    async def send(self, frame):
        self.sent += 1
        await self.never.wait()

    async def close(self, reason):
        await self.never.wait()


async def test_a_connection_whose_writes_never_finish_never_holds_the_table(tmp_path):
    """Item 18, at the table: seat 0's connection takes no frame at all.  The table does not
    wait for it: seat 0 is dropped after the send timeout, held, then played by the timeout
    rule, and seat 2 plays the whole game (before: the join itself waited for ever)."""
    from engine.game import GameConfig
    from engine.taskref import hydrate_labels, resolve_tasks
    from lab.server import TableServer
    from lab.table import Table
    from saves.store import Store

    store = await Store.open(tmp_path / "t.db")
    table = Table(hydrate_labels(resolve_tasks("canonical:3")[0]), ["human", "imap", "human", "imap", "imap"],
                  GameConfig(deterministic=True), game_id="stuck-1", store=store, hold_seconds=0.2,
                  send_timeout=0.5)
    server = TableServer([table], port=0)
    await server.start()
    try:
        codes = {c["seat"]: c["code"] for c in table.codes()}
        stuck = StuckConnection()
        await asyncio.wait_for(table.join(codes[0], stuck), 10)
        bot = RemoteBot(server.url, codes[2])
        outcome, result = await asyncio.wait_for(asyncio.gather(table.run(), bot.run()), 120)
    finally:
        await asyncio.wait_for(server.stop(), 30)
        await store.close()
    assert outcome.status == "completed" and result["status"] == "completed"
    assert table.dropped and table.dropped[0]["seat"] == 0 and "could not be sent" in table.dropped[0]["reason"]
    assert stuck.sent == 1  # the first frame, then nothing more was written to it
    events = outcome.trace["events"]
    assert any(e["type"] == "seat_timeout" and e["data"]["agent_id"] == 0 for e in events)
    assert not any(e["type"] == "seat_timeout" and e["data"]["agent_id"] == 2 for e in events)


def test_ctrl_c_stops_the_host_while_a_client_does_not_read(tmp_path):
    """Item 18: with a client that stopped reading, one ctrl+c still stops the host at once."""
    proc, info, db = _serve(tmp_path, "--no-web", "--hold", "600")
    stalled = None
    try:
        code0, code2 = info["seats"][0]["code"], info["seats"][1]["code"]
        stalled = StalledClient(info["url"], code0)

        async def main():
            bot = RemoteBot(info["url"], code2)
            play = asyncio.ensure_future(bot.run())
            # the game is under way (filed, playing) before the stop: a stop while it is being
            # filed is tests/lab/test_stop_while_filing.py's case
            for _ in range(1200):  # a bound on a broken server, not a speed check
                if any(f.get("type") in ("event", "request") for f in bot.frames) or play.done():
                    break
                await asyncio.sleep(0.05)
            await asyncio.to_thread(stalled.flood, 20_000)  # as many as before the bound was raised
            proc.send_signal(signal.SIGINT)
            await asyncio.wait([play], timeout=30)
            return bot

        bot = asyncio.run(main())
        assert proc.wait(timeout=30) == 130
        assert bot.result is not None and bot.result["type"] == "stopped"
    finally:
        if stalled is not None:
            stalled.close()
        _stop(proc)
    assert _status(db) == [(info["game_id"], "stopped")]


def test_join_codes_never_start_with_a_dash_and_code_equals_is_accepted(tmp_path):
    """Item 19: codes from an alphabet without a leading '-', still unguessable; '--code -X' and
    '--code=-X' both parse (a code handed out before this change may start with '-')."""
    for argv in (["--code", "-AbCdEf0123456789"], ["--code=-AbCdEf0123456789"]):
        out = subprocess.run([*PLAY, "--join", "ws://127.0.0.1:9/table", *argv], cwd=REPO, capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL)
        # parsed: it gets as far as asking for a terminal (this test has none), not an argparse error
        assert "expected one argument" not in out.stderr, out.stderr
        assert "interactive terminal" in out.stderr, out.stderr
    from lab.table import new_code

    codes = [new_code() for _ in range(4000)]  # about 62 of these started with '-' before
    assert not [c for c in codes if c.startswith("-")]
    assert len(set(codes)) == len(codes) and all(len(c) >= 16 for c in codes)


def _children(pid: int, depth: int = 99) -> list[int]:
    """The app processes under ``pid``, ``depth`` generations down (Linux /proc): the zygote
    that forks them (a direct child of the server, started with it) is not one."""
    out, todo = [], [(pid, 0)]
    while todo:
        p, d = todo.pop()
        if d >= depth:
            continue
        kids = _kids(p)
        out += kids
        todo += [(k, d + 1) for k in kids]
    return [p for p in out if not (_parent(p) == pid and "calbench_tui.zygote" in _cmdline(p))]


def _kids(pid: int) -> list[int]:
    """``pid``'s direct children (Linux /proc); none once it is gone."""
    kids: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                kids += [int(x) for x in fh.read().split()]
    except OSError:
        pass
    return kids


def _wait_for_the_zygote(pid: int, timeout: float = 120.0) -> None:
    """Until the server's zygote runs as itself: the server starts it in the background as it
    starts, and a process forked a moment ago still reads as the server until it execs (so it
    would count as an app process in :func:`_children`).  The bound only ends a broken test."""
    t0 = time.monotonic()
    while not any("calbench_tui.zygote" in _cmdline(k) for k in _kids(pid)):
        assert time.monotonic() - t0 < timeout, "the server's zygote never started"
        time.sleep(0.05)


def _environ(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return fh.read().replace(b"\0", b"\n").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_the_web_port_starts_no_app_process_without_a_valid_code(tmp_path):
    """Item 20: 50 websockets without a code or with a wrong one start no process (before: one
    app process each); the page without a code is a plain form."""
    proc, info, db = _serve(tmp_path)
    web = info["web"].rstrip("/")
    wsbase = web.replace("http://", "ws://")
    try:
        _wait_for_the_zygote(proc.pid)
        async def main():
            async with aiohttp.ClientSession() as http:
                async with http.get(web + "/") as r:  # the code form: a page, no process
                    assert r.status == 200 and "join code" in await r.text()
                for i in range(25):
                    for path in ("/ws", f"/ws/not-a-code-{i}"):
                        with pytest.raises(aiohttp.WSServerHandshakeError) as err:
                            await http.ws_connect(wsbase + path)
                        assert err.value.status == 404
                assert _children(proc.pid) == []

        asyncio.run(main())
    finally:
        _stop(proc)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_one_app_per_code_a_cap_per_address_and_no_code_in_the_process_list(tmp_path):
    """Items 20 and 24: one app per code (a second page replaces the first, which is told with
    close code 4001); a cap per client address (issue 34: refused in words, close code 4002);
    the code reaches the app, never on a command line."""
    proc, info, db = _serve(tmp_path, "--max-sessions-per-address", "1")
    web = info["web"].rstrip("/")
    wsbase = web.replace("http://", "ws://")
    codes = [s["code"] for s in info["seats"]]
    try:
        async def main():
            async with aiohttp.ClientSession() as http:
                first = await http.ws_connect(f"{wsbase}/ws/{codes[0]}?width=80&height=24")
                t0 = time.monotonic()
                while not _children(proc.pid):
                    assert time.monotonic() - t0 < 30, "no app process started for a valid code"
                    await asyncio.sleep(0.2)
                apps = _children(proc.pid)
                for p in _children(proc.pid, depth=1) + apps:
                    assert codes[0] not in _cmdline(p) and codes[1] not in _cmdline(p)
                    assert codes[0] not in _environ(p)  # (the zygote's child gets it through a pipe)
                t0 = time.monotonic()  # the app joined the seat with the code it was given (the host says so)
                while "seat 0 joined" not in (tmp_path / "serve.err").read_text():
                    assert time.monotonic() - t0 < 90, (tmp_path / "serve.err").read_text()
                    await asyncio.sleep(0.2)

                # the cap per address: a second code from this address is refused, in words, before any process
                refused = await http.ws_connect(f"{wsbase}/ws/{codes[1]}")
                msg = await refused.receive(timeout=30)
                assert msg.type == aiohttp.WSMsgType.CLOSE and refused.close_code == 4002 and "limit" in msg.extra
                assert set(_children(proc.pid)) <= set(apps)  # nothing was started for it

                # the same code again: the first page's app is replaced, and that page is told
                async def read_to_close(ws, timeout=30):  # as a browser does, all along
                    msg = await ws.receive(timeout=timeout)
                    while msg.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT):
                        msg = await ws.receive(timeout=timeout)

                reader = asyncio.ensure_future(read_to_close(first))
                second = await http.ws_connect(f"{wsbase}/ws/{codes[0]}?width=80&height=24")
                reading = asyncio.ensure_future(read_to_close(second, None))  # (an unread page is dropped in time)
                await asyncio.wait_for(reader, 30)
                assert first.close_code == 4001
                t0 = time.monotonic()
                while len(_children(proc.pid)) != 1 or set(apps) & set(_children(proc.pid)):
                    assert time.monotonic() - t0 < 90, ("the replaced app process did not end",
                                                     [(p, _cmdline(p)[:80]) for p in _children(proc.pid)], apps)
                    await asyncio.sleep(0.2)
                await second.close()
                reading.cancel()

        asyncio.run(main())
    finally:
        _stop(proc)


async def _raw(url):
    http = aiohttp.ClientSession()
    return http, await http.ws_connect(url)


async def _next(ws, kind, timeout=20.0):
    while True:
        msg = await asyncio.wait_for(ws.receive(), timeout)
        assert msg.type == aiohttp.WSMsgType.TEXT, msg
        f = json.loads(msg.data)
        if f["type"] == kind:
            return f


def test_the_server_builds_human_input_from_what_it_validated(tmp_path):
    """Item 23: a client's human_input cannot replace source, actions, text or the time taken."""
    proc, info, db = _serve(tmp_path, "--no-web")
    try:
        codes = {s["seat"]: s["code"] for s in info["seats"]}

        async def main():
            bot = asyncio.ensure_future(RemoteBot(info["url"], codes[2]).run())
            http, ws = await _raw(info["url"])
            await ws.send_str(json.dumps({"type": "join", "code": codes[0]}))
            forged = {"source": "forged", "actions": "forged", "text": "forged", "response_ms": -5,
                      "remote": False, "request": "forged", "keys": "abc"}
            answered = 0
            while answered < 3:
                req = await _next(ws, "request", timeout=60)
                if req["kind"] == "register":
                    continue
                await ws.send_str(json.dumps({"type": "reply", "id": req["id"], "actions": [], "text": "mine",
                                              "human_input": forged}))
                answered += 1
            await ws.close()
            await http.close()
            bot.cancel()

        asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        _stop(proc)
    inputs = [d for t, d in _events(db, info["game_id"]) if t == "human_input" and d["agent_id"] == 0]
    assert inputs
    for d in inputs:
        assert d["source"] == "human" and d["remote"] is True and d["actions"] == [] and d["text"] == "mine"
        assert d["request"] in ("speak", "volunteer", "decide")
        assert isinstance(d["response_ms"], (int, float)) and d["response_ms"] >= 0
        assert d["client"] == {"keys": "abc", "source": "forged", "actions": "forged", "text": "forged",
                               "response_ms": -5, "remote": False, "request": "forged"}


def test_a_takeover_is_recorded_and_both_sides_and_the_host_are_told(tmp_path):
    """Item 24: a second connection with the same code takes the seat; the first reads why in
    words, the second is told it took the seat over, the host prints a line, and the trace has
    a seat_takeover event, recorded with the second connection's first answer.  (The first
    connection answers twice, then stays open without answering, so the game is still waiting
    on seat 0 when the second comes: a takeover after the seat's last answer is recorded as
    the game ends, tests/lab/test_seat_notes.py.)"""
    proc, info, db = _serve(tmp_path, "--no-web")
    try:
        codes = {s["seat"]: s["code"] for s in info["seats"]}

        async def main():
            first = RemoteBot(info["url"], codes[0], hold_after=2)
            run_first = asyncio.ensure_future(first.run())
            other = asyncio.ensure_future(RemoteBot(info["url"], codes[2]).run())
            t0 = time.monotonic()
            while first.answers < 2:
                assert time.monotonic() - t0 < 60
                await asyncio.sleep(0.05)
            second = RemoteBot(info["url"], codes[0], persona=first.persona)
            result = await asyncio.wait_for(asyncio.gather(second.run(), other), 120)
            await asyncio.wait_for(run_first, 10)
            return first, second, result

        first, second, result = asyncio.run(main())
        assert first.result["type"] == "taken_over"
        assert "another connection" in first.result["message"] and "no longer plays it" in first.result["message"]
        welcome = [f for f in second.frames if f["type"] == "welcome"][0]
        assert welcome["took_over"] is True and "You took over seat 0" in welcome["message"]
        assert result[0]["status"] == "completed"
        assert proc.wait(timeout=30) == 0
    finally:
        _stop(proc)
    assert "seat 0 was taken over" in (tmp_path / "serve.err").read_text()
    assert "the takeover is recorded in the game" in (tmp_path / "serve.err").read_text()
    takeovers = [d for t, d in _events(db, info["game_id"]) if t == "seat_takeover"]
    assert len(takeovers) == 1 and takeovers[0]["agent_id"] == 0 and takeovers[0]["seat"] == 0
    assert takeovers[0]["phase"] != "GAME_END" and takeovers[0]["status"] == "playing"


async def test_the_displaced_player_reads_why_in_words_not_an_error(tmp_path):
    """Item 24, on the displaced player's screen: the same code opened elsewhere is said as
    what happened ("…no longer plays it"), never "the game stopped because of an error"."""
    from calbench_tui.app import make_app, screen_text
    from calbench_tui.settings import Settings
    from engine.game import GameConfig
    from engine.taskref import hydrate_labels, resolve_tasks
    from lab.server import TableServer
    from lab.table import Table
    from saves.store import Store

    store = await Store.open(tmp_path / "t.db")
    table = Table(hydrate_labels(resolve_tasks("canonical:3")[0]), ["human", "imap", "human", "imap", "imap"],
                  GameConfig(), game_id="takeover-1", store=store)
    server = TableServer([table], port=0)
    await server.start()
    codes = {c["seat"]: c["code"] for c in table.codes()}
    app = make_app(settings=Settings(join=server.url, code=codes[0]))
    game = asyncio.ensure_future(table.run())
    others = []
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            others.append(asyncio.ensure_future(RemoteBot(server.url, codes[2]).run()))
            t0 = time.monotonic()
            while table.status != "playing" or app.game_screen is None:
                assert time.monotonic() - t0 < 60, "the game never started"
                await pilot.pause(0.05)
            others.append(asyncio.ensure_future(RemoteBot(server.url, codes[0]).run()))  # the same code, elsewhere
            t0 = time.monotonic()
            while not (app.error and "no longer plays it" in app.error):
                assert time.monotonic() - t0 < 60, f"the takeover was not said: {app.error!r}"
                await pilot.pause(0.05)
            t0 = time.monotonic()
            while not any("no longer plays it" in str(n.message) for n in app._notifications):
                assert time.monotonic() - t0 < 30, "no notice on screen"
                await pilot.pause(0.05)
            notes = [str(n.message) for n in app._notifications]
            text = screen_text(app)
        assert not [n for n in notes if "because of an error" in n or "The game stopped" in n]
        assert "because of an error" not in text
    finally:
        for t in [*others, game]:
            t.cancel()
        await asyncio.wait([*others, game], timeout=10)
        await server.stop()
        await store.close()
