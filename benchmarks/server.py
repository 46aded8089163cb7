"""Table server under load: 20 remote participants (4 tables of 5 human seats) on the loopback.

    python benchmarks/server.py [--tables 4] [--think 0.0] [--task canonical:3]

The server runs in a child process (``lab.server.TableServer`` with every table on one
port); each seat is a ``lab.remote_bot.RemoteBot`` — an IMAP persona answering over a real
websocket, as a participant's client would.  Printed:

* latency from a client's action (its ``reply`` frame leaving) to every recipient's
  update (the ``dm_sent`` / groupchat event frame arriving), p50 and p95, in ms;
* the server's CPU seconds per table and per game-minute, from its own ``getrusage``.

Both clocks are this process's ``perf_counter`` (send and receive happen here).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


async def _serve(n_tables: int, task_ref: str) -> None:
    """Child: serve ``n_tables`` all-human tables, print the codes, then the CPU used."""
    from engine.game import GameConfig
    from engine.taskref import hydrate_labels, resolve_tasks
    from lab.server import TableServer
    from lab.table import Table

    task = hydrate_labels(resolve_tasks(task_ref)[0])
    tables = [Table(task, ["human"] * task.num_agents, GameConfig(), game_id=f"bench-{i}")
              for i in range(n_tables)]
    server = TableServer(tables, port=0)
    await server.start()
    print(json.dumps({"url": server.url, "codes": [[c["code"] for c in t.codes()] for t in tables]}), flush=True)
    t0 = time.perf_counter()
    outcomes = await asyncio.gather(*(t.run() for t in tables))
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"cpu_s": ru.ru_utime + ru.ru_stime, "wall_s": wall,
                      "statuses": [o.status for o in outcomes]}), flush=True)
    await asyncio.sleep(0.5)
    await server.stop()


def _latencies(bots) -> list[float]:
    """For each message a bot sent, the delay until each recipient's client received it."""
    arrivals: dict[str, list[float]] = {}
    for b in bots:
        for t, f in b.arrivals:
            ev = f.get("event") if f.get("type") == "event" else None
            if ev and ev["type"].endswith("_sent") and ev.get("from_agent") != b.seat and not f.get("replay"):
                arrivals.setdefault(f"{ev['from_agent']}|{ev['content']}", []).append(t)
    out = []
    for b in bots:
        for t_sent, frame in b.sent:
            for action in frame["actions"]:
                if "content" in action:
                    for t in arrivals.get(f"{b.seat}|{action['content']}", []):
                        if t >= t_sent:
                            out.append((t - t_sent) * 1000)
    return out


async def _clients(url: str, codes: list[list[str]], think: float) -> list:
    from lab.remote_bot import RemoteBot

    bots = [RemoteBot(url, c, think=think) for table in codes for c in table]
    await asyncio.gather(*(b.run() for b in bots))
    return bots


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--think", type=float, default=0.0, help="seconds each client waits before answering")
    ap.add_argument("--task", default="canonical:3")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        asyncio.run(_serve(args.tables, args.task))
        return
    child = subprocess.Popen([sys.executable, __file__, "--serve", "--tables", str(args.tables), "--task", args.task],
                             stdout=subprocess.PIPE, text=True, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    info = json.loads(child.stdout.readline())
    t0 = time.perf_counter()
    bots = asyncio.run(_clients(info["url"], info["codes"], args.think))
    wall = time.perf_counter() - t0
    usage = json.loads(child.stdout.readline())
    child.wait(timeout=30)
    lat = sorted(_latencies(bots))
    n = len(lat)
    p50 = statistics.median(lat) if lat else float("nan")
    p95 = lat[min(n - 1, int(0.95 * n))] if lat else float("nan")
    clients = sum(len(c) for c in info["codes"])
    print(f"{args.tables} tables, {clients} remote clients, statuses {usage['statuses']}")
    print(f"action -> recipient update latency: p50 {p50:.1f} ms, p95 {p95:.1f} ms over {n} deliveries")
    print(f"server CPU: {usage['cpu_s']:.2f} s for {usage['wall_s']:.1f} s of play = "
          f"{usage['cpu_s'] / args.tables:.2f} s per table "
          f"({usage['cpu_s'] / args.tables / max(usage['wall_s'], 1e-9) * 60:.1f} CPU-s per table-minute); "
          f"clients' wall {wall:.1f} s")


if __name__ == "__main__":
    main()
