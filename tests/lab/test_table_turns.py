"""A served table cannot be stalled (issue 34, item 4): a connected participant who never
answers gets the seat's timeout rule after the table's per-turn limit, and the host's
console hears of joins, the start, departures and turns that ran out."""

from __future__ import annotations

import asyncio
import json

import aiohttp

from engine.game import GameConfig
from engine.taskref import hydrate_labels, resolve_tasks
from lab.remote_bot import RemoteBot
from lab.server import TableServer
from lab.table import Table
from saves.store import Store

AGENTS = ["human", "imap", "human", "imap", "imap"]


async def _silent(url: str, code: str, frames: list[dict], joined: asyncio.Event) -> None:
    """A participant who joins and reads everything, and never answers anything."""
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url) as ws:
            await ws.send_str(json.dumps({"type": "join", "code": code}))
            async for msg in ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    break
                frame = json.loads(msg.data)
                frames.append(frame)
                if frame["type"] == "welcome":
                    joined.set()
                if frame["type"] in ("game_over", "stopped"):
                    break


async def test_a_participant_who_never_answers_cannot_stall_the_table(tmp_path):
    task = hydrate_labels(resolve_tasks("canonical:3")[0])
    store = await Store.open(tmp_path / "t.db")
    lines: list[str] = []
    table = Table(task, list(AGENTS), GameConfig(deterministic=True, max_turns_per_round=3), game_id="turns-1",
                  store=store, turn_seconds=0.3, on_event=lines.append)
    server = TableServer([table], port=0)
    await server.start()
    try:
        codes = {c["seat"]: c["code"] for c in table.codes()}
        frames: list[dict] = []
        joined = asyncio.Event()
        silent = asyncio.ensure_future(_silent(server.url, codes[0], frames, joined))
        await asyncio.wait_for(joined.wait(), 60)
        bot = RemoteBot(server.url, codes[2])
        other = asyncio.ensure_future(bot.run())
        outcome = await asyncio.wait_for(table.run(), 300)
        await asyncio.wait_for(asyncio.gather(other, silent), 60)
    finally:
        await server.stop()
        await store.close()
    assert outcome.status == "completed"
    timeouts = [e for e in outcome.trace["events"] if e["type"] == "seat_timeout" and e["data"]["agent_id"] == 0]
    assert timeouts and all("turn limit of 0.3 s" in (e["data"].get("detail") or "") for e in timeouts)
    assert not [e for e in outcome.trace["events"] if e["type"] == "seat_timeout" and e["data"]["agent_id"] == 2]
    requests = [f for f in frames if f["type"] == "request" and f["kind"] != "register"]
    assert requests and all(f["deadline_s"] == 0.3 for f in requests)
    assert "seat 0 joined" in lines and "seat 2 joined" in lines
    assert any(line.startswith("game turns-1 started") for line in lines)
    assert any(line.startswith("seat 0: no answer within 0.3 s") for line in lines)
