"""Benchmark: bytes per stored game, events as rows (before lean traces) vs one lean blob.

Run:  .venv/bin/python benchmarks/trace_bytes.py [--tasks canonical:0-19] [--agents imap,dsm-private]
                                                  [--llm-tasks canonical:0-1]

1. Plays the scripted suites with ``calbench run --deterministic`` into a fresh database
   (finished games are stored the new way: one lean, compressed blob per game).
2. Plays an LLM suite (every seat ``llm:mock``) against the loopback mock endpoint
   (``calbench mock-llm`` on a free port), so the trace holds real prompts.
3. For every game, stores the same trace twice in two fresh databases: once the way
   migration 2 stored it (one row per event: what a stopped game still keeps, so the
   store's own code writes it) and once the new way (completed: one blob), then VACUUMs
   both and divides the file sizes, less the size of an empty database (the schema,
   ~110 KB, which a handful of games would otherwise be charged for), by the number of
   games.  Also prints the events' own bytes (JSON rows vs blob) and checks every trace
   loads back equal.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _calbench(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "calbench_cli.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if proc.returncode != 0:
        raise SystemExit(f"calbench {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _traces(db: str) -> list[dict]:
    from saves.store import Store

    async with await Store.open(db) as store:
        return [await store.load_trace(g["game_id"]) for g in await store.list_games()]


async def _store_all(db: str, traces: list[dict], status: str) -> None:
    from saves.store import Store

    async with await Store.open(db) as store:
        for t in traces:
            await store.import_trace({**t, "saved": {**t["saved"], "status": status}})
    # the written traces read back equal (except the status we chose)
    async with await Store.open(db) as store:
        for t in traces:
            back = await store.load_trace(t["game_id"])
            if back["events"] != t["events"]:
                raise SystemExit(f"game {t['game_id']}: events differ after storing as {status}")


def _size(db: str) -> int:
    import sqlite3

    con = sqlite3.connect(db)
    con.execute("VACUUM")
    con.close()
    return os.path.getsize(db)


def _event_bytes(db: str) -> tuple[int, int]:
    import sqlite3

    con = sqlite3.connect(db)
    rows = con.execute("SELECT COALESCE(SUM(LENGTH(data) + LENGTH(type) + LENGTH(timestamp) + 24), 0) "
                       "FROM events").fetchone()[0]
    blobs = con.execute("SELECT COALESCE(SUM(LENGTH(data)), 0) FROM event_blobs").fetchone()[0]
    con.close()
    return rows, blobs


def measure(label: str, traces: list[dict], tmp: str) -> None:
    n = len(traces)
    before, after = os.path.join(tmp, f"{label}-rows.db"), os.path.join(tmp, f"{label}-blob.db")
    empty = os.path.join(tmp, f"{label}-empty.db")
    asyncio.run(_store_all(before, traces, "stopped"))
    asyncio.run(_store_all(after, traces, "completed"))
    asyncio.run(_store_all(empty, [], "completed"))
    ev_rows, _ = _event_bytes(before)
    _, ev_blob = _event_bytes(after)
    schema = _size(empty)
    sb, sa = _size(before) - schema, _size(after) - schema
    print(f"{label:<28} {n:>5} {sb / n:>12,.0f} {sa / n:>12,.0f} {sb / sa:>6.1f}x "
          f"{ev_rows / n:>12,.0f} {ev_blob / n:>10,.0f} {ev_rows / max(ev_blob, 1):>6.1f}x")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default="canonical:0-19", help="scripted suite (default canonical:0-19)")
    ap.add_argument("--agents", default="imap,dsm-private", help="comma list of protocols, one suite each")
    ap.add_argument("--llm-tasks", default="canonical:0-1", help="LLM suite on the mock (default canonical:0-1)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="calbench-bytes-") as tmp:
        print(f"{'games':<28} {'n':>5} {'db B/game':>12} {'db B/game':>12} {'':>7} "
              f"{'events B':>12} {'events B':>10}")
        print(f"{'':<28} {'':>5} {'rows':>12} {'lean blob':>12} {'ratio':>7} {'rows':>12} {'blob':>10} {'ratio':>6}")
        for agents in [a.strip() for a in args.agents.split(",") if a.strip()]:
            db = os.path.join(tmp, f"{agents}.db")
            _calbench("run", "--tasks", args.tasks, "--agents", agents, "--deterministic", "--db", db, "--json")
            measure(f"scripted {agents}", asyncio.run(_traces(db)), tmp)
        port = _free_port()
        server = subprocess.Popen([sys.executable, "-m", "calbench_cli.cli", "mock-llm", "--port", str(port)],
                                  cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
            db = os.path.join(tmp, "llm.db")
            _calbench("run", "--tasks", args.llm_tasks, "--agents", "llm:mock", "--deterministic", "--db", db,
                      "--base-url", f"http://127.0.0.1:{port}/v1", "--json")
            measure("LLM (mock, with prompts)", asyncio.run(_traces(db)), tmp)
        finally:
            server.terminate()
            server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
