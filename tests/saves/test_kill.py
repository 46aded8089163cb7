"""A writer killed with SIGKILL mid-stream leaves a sound database with every committed event.

The writer runs in a subprocess and prints each sequence number once ``emit`` (durable)
or ``flush`` (bulk) has returned, i.e. once it is committed.  The test kills it while it
is writing as fast as it can, reads everything it printed before dying, and opens the
database.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from saves.store import Store

PHASE = 10  # events per phase in the writer; the last one is a resolution

WRITER = textwrap.dedent("""
    import asyncio, sys
    from saves.store import Store

    async def main(path, durable):
        store = await Store.open(path)
        games = ["g0", "g1"]
        for g in games:
            await store.create_game(g, task_row={"task_id": g}, config={}, agents="x", settings_key="k",
                                    started_at="t0")

        async def write(game):
            sink = store.sink(game, durable=durable)
            seq = 0
            while True:
                for i in range(PHASE):
                    kind = "resolution" if i == PHASE - 1 else "turn_end"
                    await sink.emit({"seq": seq, "type": kind, "timestamp": "t",
                                      "data": {"round": seq // PHASE, "turn": i, "phase": "CHEAP_TALK",
                                               "agent_id": 0, "text": "x" * 400}})
                    if durable:
                        print(game, seq, flush=True)
                    seq += 1
                if not durable:
                    await sink.flush()
                    print(game, seq - 1, flush=True)

        await asyncio.gather(*(write(g) for g in games))

    asyncio.run(main(sys.argv[1], sys.argv[2] == "durable"))
""").replace("PHASE", str(PHASE))


def run_and_kill(path, mode, acks_before_kill=400):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), mode], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    acked: dict[str, int] = {}
    seen = 0
    deadline = time.monotonic() + 60
    try:
        while seen < acks_before_kill:
            line = proc.stdout.readline()
            if not line:
                pytest.fail(f"the writer died on its own: {proc.stderr.read()}")
            game, seq = line.split()
            acked[game] = int(seq)
            seen += 1
            assert time.monotonic() < deadline, "the writer is too slow"
        os.kill(proc.pid, signal.SIGKILL)  # while it keeps writing flat out
        for line in proc.stdout:  # what it printed before it died was committed too
            game, seq = line.split()
            acked[game] = int(seq)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    return acked


def stored(path):
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    seqs = {}
    for game in ("g0", "g1"):
        seqs[game] = [r[0] for r in con.execute("SELECT seq FROM events WHERE game_id = ? ORDER BY seq", (game,))]
        for (data,) in con.execute("SELECT data FROM events WHERE game_id = ?", (game,)):
            assert data.endswith("}")  # every stored row is whole
    con.close()
    return seqs


@pytest.mark.parametrize("mode", ["durable", "bulk"])
async def test_kill_mid_stream_keeps_every_committed_event(tmp_path, mode):
    path = tmp_path / "killed.db"
    acked = run_and_kill(path, mode)
    seqs = stored(path)
    for game, last in acked.items():
        got = seqs[game]
        assert got == list(range(len(got))), "the stored events are a prefix, with no holes"
        assert len(got) >= last + 1, f"{game}: event {last} was committed but is missing"
        if mode == "durable":
            # at most the event being written when the kill came is lost
            assert len(got) <= last + 2
        else:
            # commits happen at phase boundaries only, and at most one phase was in flight
            assert len(got) % PHASE == 0
            assert len(got) <= last + 1 + PHASE
    # the store opens the killed database and reads it
    async with await Store.open(path) as store:
        assert await store.integrity_check() == "ok"
        trace = await store.load_trace("g0")
        assert [e["seq"] for e in trace["events"]] == seqs["g0"]
        assert trace["stopped"] is True  # never finished: it is not a completed game
        assert sorted(await store.running_game_ids()) == ["g0", "g1"]
