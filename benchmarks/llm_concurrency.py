"""Benchmark: LLM games run concurrently against the loopback mock at a fixed latency.

Run:  .venv/bin/python benchmarks/llm_concurrency.py [--games 12] [--latency 0.05] [--quick]

A suite of all-LLM games (5 agents, 16 slots, 5 meetings of 3 participants — the
canonical shape) is played with ``asyncio.gather`` and one shared request semaphore of
size K (``LLMSettings.concurrency``), for several K.  Each game's *critical path* is read
from its trace: the CHEAP_TALK turns and VOLUNTARY calls are sequential, the DECISION
calls of a round run side by side (the longest seat's chain counts), and so do the
reflection calls.  Printed per K:

* wall time of the suite, against Σ critical paths (≈ the games one after another with
  unlimited concurrency inside each) and max critical path (the floor for any K);
* Σcrit/wall = Σ critical paths / wall time, and the speed-up against the first K tried.
  Critical paths are measured request times, so on a busy machine they grow with K (the
  client, the mock and the engine share one CPU); the K=1 row is the uncontended one;
* requests and requests per second;
* the highest number of requests in flight (semaphore and server views);
* prefix reuse: the share of each request's prompt that repeats the previous request of
  the same seat (weighted by prompt size) — what a provider's prompt cache can serve;
  "(all)" counts each seat's first request (nothing to reuse) too.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.game import GameConfig, run_game  # noqa: E402
from engine.generate import generate_scenario  # noqa: E402
from personas.llm.factory import LLMSettings, make_llm_persona  # noqa: E402
from calbench_devtools.mock_endpoint import MockLLMServer  # noqa: E402


def critical_path_s(trace: dict) -> float:
    """Seconds of request time on the longest sequential chain of one game."""
    seq = 0.0
    decide: dict[tuple[int, int], float] = defaultdict(float)
    reflect: dict[int, float] = defaultdict(float)
    for e in trace["events"]:
        d = e["data"]
        ms = d.get("latency_ms") or 0.0
        if e["type"] == "turn_end" or (e["type"] == "decide_end" and d["phase"] == "VOLUNTARY"):
            seq += ms
        elif e["type"] == "decide_end" and d["phase"] == "DECISION":
            decide[(d["round"], d["agent_id"])] += ms
        elif e["type"] == "reflection":
            reflect[d["round"]] = max(reflect[d["round"]], ms)
    per_round: dict[int, float] = defaultdict(float)
    for (r, _), ms in decide.items():
        per_round[r] = max(per_round[r], ms)
    return (seq + sum(per_round.values()) + sum(reflect.values())) / 1000.0


async def run_suite(tasks, k: int, latency: float, reflection: bool) -> dict:
    async with MockLLMServer(policy="cooperative", latency=latency) as server:
        settings = LLMSettings(base_url=server.base_url, concurrency=k, reflection=reflection)
        t0 = time.perf_counter()
        results = await asyncio.gather(*[
            run_game(t, [make_llm_persona("llm:mock", settings) for _ in range(t.num_agents)],
                     GameConfig(deterministic=True))
            for t in tasks])
        wall = time.perf_counter() - t0
        await settings.pool.aclose()
        st = server.stats()
    crit = [critical_path_s(r.trace) for r in results]
    return {
        "k": k, "wall": wall, "sum_crit": sum(crit), "max_crit": max(crit), "requests": st["requests"],
        "rps": st["requests"] / wall, "inflight_pool": settings.pool.max_in_flight,
        "inflight_server": server.max_in_flight, "reuse_w": st["prefix_reuse_weighted"],
        "reuse_mean": st["prefix_reuse_mean"], "reuse_all": st["prefix_reuse_all"],
        "coord": sum(r.metrics["coordination_rate"] for r in results) / len(results),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--games", type=int, default=12)
    ap.add_argument("--latency", type=float, default=0.05, help="mock seconds per request (default 0.05)")
    ap.add_argument("--ks", default="1,2,4,8,16,32", help="concurrency limits to try")
    ap.add_argument("--reflection", action="store_true", help="also make reflection calls after each round")
    ap.add_argument("--quick", action="store_true", help="4 games, K in 1,4,16")
    args = ap.parse_args(argv)
    if args.quick:
        args.games, args.ks = 4, "1,4,16"
    ks = [int(x) for x in args.ks.split(",")]
    tasks = [generate_scenario(100 + i) for i in range(args.games)]
    print(f"{args.games} games (5 agents, 16 slots, 5 meetings x 3 participants), mock latency "
          f"{args.latency * 1000:.0f} ms, reflection {'on' if args.reflection else 'off'}")
    print(f"{'K':>3} {'wall s':>7} {'Σcrit s':>8} {'maxcrit s':>9} {'Σcrit/wall':>8} {'vs K=1':>7} {'requests':>8} "
          f"{'req/s':>7} {'in flight':>9} {'reuse':>6} {'(all)':>6} {'coord':>6}")
    base_wall = None
    for k in ks:
        r = asyncio.run(run_suite(tasks, k, args.latency, args.reflection))
        base_wall = base_wall or r["wall"]
        print(f"{r['k']:>3} {r['wall']:>7.2f} {r['sum_crit']:>8.2f} {r['max_crit']:>9.2f} "
              f"{r['sum_crit'] / r['wall']:>7.2f}x {base_wall / r['wall']:>6.2f}x {r['requests']:>8} {r['rps']:>7.1f} "
              f"{r['inflight_pool']:>4}/{r['inflight_server']:<4} {r['reuse_w']:>6.1%} {r['reuse_all']:>6.1%} "
              f"{r['coord']:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
