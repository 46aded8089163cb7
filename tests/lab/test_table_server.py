"""Tables over the network: real websockets on the loopback, real games, real store.

Remote seats are played by :class:`lab.remote_bot.RemoteBot` (an IMAP persona answering
over the wire), so a served game can be compared with the same table played in-process.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from engine.game import GameConfig, run_game
from engine.trace import fold_trace
from engine.taskref import hydrate_labels, resolve_tasks
from engine.wire import WireError, observation_from_wire, observation_to_wire
from lab.remote_bot import RemoteBot
from lab.server import ServerLimits, TableServer
from lab.table import Table
from personas.registry import make_personas
from saves.store import Store

AGENTS = ["human", "imap", "human", "imap", "imap"]


def _task(ref: str = "canonical:3"):
    return hydrate_labels(resolve_tasks(ref)[0])


def _hashes(trace):
    return [(e["data"]["round"], e["data"].get("state_hash")) for e in trace["events"] if e["type"] == "resolution"]


async def _serve(tmp_path, *, agents=AGENTS, task=None, limits=ServerLimits(), **table_kw):
    store = await Store.open(tmp_path / "t.db")
    table = Table(task or _task(), list(agents), GameConfig(deterministic=True), game_id="table-1", store=store,
                  **table_kw)
    server = TableServer([table], port=0, limits=limits)
    await server.start()
    return store, table, server


async def _close(store, server):
    await server.stop()
    await store.close()


async def test_two_remote_clients_play_a_whole_game_identical_in_rules_to_an_in_process_one(tmp_path):
    task = _task()
    store, table, server = await _serve(tmp_path, task=task)
    try:
        codes = {c["seat"]: c["code"] for c in table.codes()}
        bots = [RemoteBot(server.url, codes[s]) for s in (0, 2)]
        runs = [asyncio.ensure_future(b.run()) for b in bots]
        outcome = await asyncio.wait_for(table.run(), 60)
        await asyncio.wait_for(asyncio.gather(*runs), 10)
        saved = await store.load_trace("table-1")
    finally:
        await _close(store, server)
    assert outcome.status == "completed"
    local = await run_game(task, make_personas("imap", task.num_agents), GameConfig(deterministic=True))
    assert _hashes(saved) == _hashes(local.trace) and len(_hashes(saved)) == len(task.meetings)
    assert saved["metrics"]["coordination_rate"] == local.trace["metrics"]["coordination_rate"]
    assert saved["final_state"]["calendars"] == local.trace["final_state"]["calendars"]
    assert fold_trace(saved).verified
    for bot in bots:
        assert bot.result["type"] == "game_over" and bot.result["trace"]["game_id"] == "table-1"


async def test_only_the_seats_own_projection_crosses_the_wire(tmp_path):
    task = _task()
    store, table, server = await _serve(tmp_path, task=task)
    try:
        codes = {c["seat"]: c["code"] for c in table.codes()}
        bots = [RemoteBot(server.url, codes[s]) for s in (0, 2)]
        runs = [asyncio.ensure_future(b.run()) for b in bots]
        await asyncio.wait_for(table.run(), 60)
        await asyncio.gather(*runs)
    finally:
        await _close(store, server)
    for bot in bots:
        seen = json.dumps([f for f in bot.frames if f["type"] != "game_over"])
        for other in range(task.num_agents):
            if other == bot.seat:
                continue
            for (agent, _eid), label in task.labels.errands.items():
                if agent == other:
                    assert label.text not in seen, f"seat {bot.seat} saw seat {other}'s label {label.text!r}"
        for f in bot.frames:
            if f["type"] == "request":
                assert f["obs"]["view"]["seat"] == bot.seat


async def test_wire_codec_round_trips_every_observation_of_a_real_game():
    task = _task("canonical:50")
    seen = []

    class Recorder:
        kind, model = "scripted", "rec"

        def __init__(self):
            from personas.scripted.imap import IMAPPersona
            self.inner = IMAPPersona()

        async def register(self, b):
            seen.append(b)
            return await self.inner.register(b)

        async def speak(self, o):
            seen.append(o)
            return await self.inner.speak(o)

        async def volunteer(self, o):
            seen.append(o)
            return await self.inner.volunteer(o)

        async def decide(self, o):
            seen.append(o)
            return await self.inner.decide(o)

    await run_game(task, [Recorder() for _ in range(task.num_agents)], GameConfig(deterministic=True))
    assert len(seen) > 50
    for obs in seen:
        wire = json.loads(json.dumps(observation_to_wire(obs)))
        assert observation_from_wire(wire) == obs
    with pytest.raises(WireError):
        observation_from_wire({"kind": "turn", "view": {"seat": "0"}})


async def _raw(url):
    http = aiohttp.ClientSession()
    ws = await http.ws_connect(url, max_msg_size=0)
    return http, ws


async def _next(ws, kind=None, timeout=5.0):
    while True:
        msg = await asyncio.wait_for(ws.receive(), timeout)
        if msg.type != aiohttp.WSMsgType.TEXT:
            return {"type": "_closed", "code": ws.close_code}
        f = json.loads(msg.data)
        if kind is None or f["type"] == kind:
            return f


async def test_hostile_clients_are_refused_and_the_game_goes_on(tmp_path):
    limits = ServerLimits(max_frame=64 * 1024, rate=20, burst=20)
    store, table, server = await _serve(tmp_path, limits=limits)
    try:
        codes = {c["seat"]: c["code"] for c in table.codes()}
        # a stale or guessed code
        http, ws = await _raw(server.url)
        await ws.send_str(json.dumps({"type": "join", "code": "not-a-code"}))
        f = await _next(ws)
        assert f["type"] == "error" and f["fatal"] and "unknown join code" in f["message"]
        await ws.close(); await http.close()
        # a connection that talks before joining
        http, ws = await _raw(server.url)
        await ws.send_str("{not json")
        f = await _next(ws)
        assert f["type"] == "error" and f.get("fatal")
        await ws.close(); await http.close()

        bot = RemoteBot(server.url, codes[2])
        bot_run = asyncio.ensure_future(bot.run())
        http, ws = await _raw(server.url)
        await ws.send_str(json.dumps({"type": "join", "code": codes[0]}))
        assert (await _next(ws, "welcome"))["seat"] == 0
        game = asyncio.ensure_future(table.run())
        req = await _next(ws, "request")
        while req["kind"] == "register":
            req = await _next(ws, "request")
        # forged seat id, malformed JSON, not an object, too deep, a bad action, an old request id
        for bad, expect in [
            ({"type": "reply", "seat": 3, "id": req["id"], "actions": []}, "plays seat 0 only"),
            ("{oops", "not valid JSON"),
            ("[1, 2]", "JSON object"),
            ("[" * 5000 + "]" * 5000, "nests too deeply"),
            ({"type": "reply", "id": req["id"], "actions": [{"type": "teleport"}]}, "bad action"),
            ({"type": "reply", "id": req["id"] - 1, "actions": []}, "earlier request"),
            ({"type": "launch"}, "unknown frame type"),
        ]:
            await ws.send_str(bad if isinstance(bad, str) else json.dumps(bad))
            f = await _next(ws, "error")
            assert expect in f["message"], (bad, f)
        # a flood: far more frames than the rate allows
        for _ in range(200):
            await ws.send_str(json.dumps({"type": "ping"}))
        got = []
        while len(got) < 200:
            f = await _next(ws)
            if f["type"] in ("pong", "error"):
                got.append(f)
        assert sum(f["type"] == "error" and "too many" in f["message"] for f in got) > 100
        # an oversized frame closes this connection only; the seat is held and can rejoin
        try:
            await ws.send_str("x" * (10 * 1024 * 1024))
        except ConnectionError:
            pass  # the server closed the connection while the frame was still being written
        else:
            assert (await _next(ws, "_closed", timeout=10))["type"] == "_closed"
        await http.close()
        bot0 = RemoteBot(server.url, codes[0])
        res = await asyncio.wait_for(asyncio.gather(bot0.run(), bot_run, game), 60)
        assert res[2].status == "completed"
        assert res[2].trace["metrics"]["coordination_rate"] == 1.0
    finally:
        await _close(store, server)


async def test_a_second_connection_takes_the_seat_over_and_the_first_is_told(tmp_path):
    store, table, server = await _serve(tmp_path)
    try:
        code = table.codes()[0]["code"]
        h1, w1 = await _raw(server.url)
        await w1.send_str(json.dumps({"type": "join", "code": code}))
        await _next(w1, "welcome")
        h2, w2 = await _raw(server.url)
        await w2.send_str(json.dumps({"type": "join", "code": code}))
        await _next(w2, "welcome")
        f = await _next(w1, "taken_over")
        assert "another connection" in f["message"]
        for h, w in ((h1, w1), (h2, w2)):
            await w.close()
            await h.close()
    finally:
        await _close(store, server)


async def test_rejoin_mid_round_restores_the_whole_view_and_play_goes_on(tmp_path):
    store, table, server = await _serve(tmp_path, hold_seconds=30)
    try:
        codes = {c["seat"]: c["code"] for c in table.codes()}
        first = RemoteBot(server.url, codes[0], stop_after=3)
        other = asyncio.ensure_future(RemoteBot(server.url, codes[2]).run())
        first_run = asyncio.ensure_future(first.run())
        game = asyncio.ensure_future(table.run())
        await asyncio.wait_for(first_run, 30)  # it left after 3 answers, mid-round
        events_before = [f["event"] for f in first.frames if f["type"] == "event"]
        again = RemoteBot(server.url, codes[0], persona=first.persona)
        res = await asyncio.wait_for(asyncio.gather(again.run(), other, game), 60)
    finally:
        await _close(store, server)
    replayed = [f["event"] for f in again.frames if f["type"] == "event" and f.get("replay")]
    assert replayed[:len(events_before)] == events_before
    assert res[2].status == "completed"
    assert not [e for e in res[2].trace["events"] if e["type"] == "seat_timeout"]


async def test_a_seat_gone_past_the_hold_gets_the_timeout_rule_recorded(tmp_path):
    store, table, server = await _serve(tmp_path, hold_seconds=0.2)
    try:
        codes = {c["seat"]: c["code"] for c in table.codes()}
        gone = RemoteBot(server.url, codes[0], stop_after=1)
        other = asyncio.ensure_future(RemoteBot(server.url, codes[2]).run())
        runs = asyncio.ensure_future(gone.run())
        outcome = await asyncio.wait_for(table.run(), 60)
        await asyncio.gather(runs, other)
    finally:
        await _close(store, server)
    assert outcome.status == "completed"
    timeouts = [e for e in outcome.trace["events"] if e["type"] == "seat_timeout" and e["data"]["agent_id"] == 0]
    assert timeouts and "disconnected" in (timeouts[0]["data"].get("detail") or "")


async def test_lobby_fills_an_empty_seat_after_the_wait_and_records_it(tmp_path):
    store, table, server = await _serve(tmp_path, lobby_wait=0.3, lobby_fill="imap")
    try:
        codes = {c["seat"]: c["code"] for c in table.codes()}
        bot = asyncio.ensure_future(RemoteBot(server.url, codes[2]).run())
        outcome = await asyncio.wait_for(table.run(), 60)
        await bot
        listed = await store.list_games()
    finally:
        await _close(store, server)
    assert outcome.status == "completed"
    assert outcome.trace["config"]["lobby"] == {"waited_s": 0.3, "missing": [0], "filled_with": "imap"}
    assert listed[0]["agents"].split(",")[0] == "imap"


async def test_lobby_cancels_the_table_when_told_and_records_it(tmp_path):
    store, table, server = await _serve(tmp_path, lobby_wait=0.2, lobby_fill=None)
    try:
        assert await table.run() is None
        listed = await store.list_games()
        trace = await store.load_trace("table-1")
    finally:
        await _close(store, server)
    assert listed[0]["status"] == "stopped"
    assert "lobby: cancelled" in trace["error"]


async def test_a_human_human_llm_table_over_the_wire(tmp_path, monkeypatch):
    """The interesting case of a pilot study: two remote people and an LLM seat (the loopback mock)."""
    from personas.llm.factory import LLMSettings
    from calbench_devtools.mock_endpoint import MockLLMServer
    from personas.registry import make_personas

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    async with MockLLMServer(policy="cooperative") as mock:
        llm = LLMSettings(base_url=mock.base_url, backoff_base=0.01)
        agents = ["human", "llm:mock-model", "human", "imap", "imap"]
        store, table, server = await _serve(
            tmp_path, agents=agents, make_persona=lambda name, seat: make_personas(name, 1, llm=llm)[0])
        try:
            codes = {c["seat"]: c["code"] for c in table.codes()}
            bots = [RemoteBot(server.url, codes[s]) for s in (0, 2)]
            runs = [asyncio.ensure_future(b.run()) for b in bots]
            outcome = await asyncio.wait_for(table.run(), 120)
            await asyncio.wait_for(asyncio.gather(*runs), 10)
        finally:
            await _close(store, server)
            await llm.pool.aclose()
        assert mock.stats()["requests"] > 0
    assert outcome.status == "completed"
    cfg = outcome.trace["config"]
    assert cfg["llm"][1]["model"] == "mock-model" and cfg["llm"][0] is None
    assert '"api_key":' not in json.dumps(cfg)  # the NAME of the key's variable only
    assert [a["type"] for a in cfg["agents"]][:3] == ["human", "llm", "human"]


async def test_in_play_the_presence_frame_names_only_seats_whose_participant_left(tmp_path):
    """Issue 34: the players' seats bars show a seat in the presence frame's "waiting" list as
    "left"; a seat the lobby gave to a persona is played, not left, so it is not listed."""
    store, table, server = await _serve(tmp_path, lobby_wait=0.3, lobby_fill="imap")
    game = asyncio.ensure_future(table.run())
    try:
        codes = {c["seat"]: c["code"] for c in table.codes()}
        async with aiohttp.ClientSession() as http, http.ws_connect(server.url) as ws:
            await ws.send_str(json.dumps({"type": "join", "code": codes[2]}))
            async with asyncio.timeout(60):
                async for msg in ws:
                    frame = json.loads(msg.data)
                    if frame["type"] == "lobby" and frame["status"] == "playing":
                        break
    finally:
        game.cancel()
        await _close(store, server)
    assert table.remote[0].filled_by == "imap"
    assert frame["present"] == [2] and frame["waiting"] == []
