"""Benchmark: prompt tokens per LLM-seat game, with and without the round digest.

Run:  .venv/bin/python benchmarks/llm_tokens.py [--tasks canonical:0-9] [--limits 4096,8192]

Two tables: every seat an LLM seat, and one LLM seat (seat 1) among IMAP bots — the
table of the issue that asked for the budget.  The LLM seats play on the loopback mock
(cooperative policy, no latency), so the numbers count what the prompts cost, not what a
model does with them.  The prefix-cache share counts LLM seats' requests only.
Modes (``LLMSettings.history``):

* ``full``    — the append-only thread: every earlier round word for word (no window);
* ``digest``  — each finished round replaced by its digest as soon as the next begins;
* ``auto@N``  — full until the thread would not fit a context of N tokens (the mock
                enforces N and advertises it in /v1/models), then the oldest rounds digested;
* ``full@N``  — the append-only thread against the same limit: what happened before;
* ``compact`` — the compact prompt profile (``--prompt compact``; with ``history=auto`` it
                digests each finished round), no window.  ``auto@N`` with N under 4,096
                picks the compact profile by itself.

Printed per mode, summed over the games: prompt tokens per game (the endpoint's
``usage.prompt_tokens``, which the mock estimates as characters/4 + 3 per message),
mean and largest prompt per request, the prefix-cache share — the share of each request's
characters that repeat the same seat's previous request from its first character on,
i.e. what a provider's prefix cache can serve (weighted by size) — context overflows and
meetings scheduled.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.game import GameConfig, run_game  # noqa: E402
from engine.taskref import hydrate_labels, resolve_tasks  # noqa: E402
from engine.usage import failure_counts, token_usage  # noqa: E402
from personas.llm.factory import LLMSettings, make_llm_persona  # noqa: E402
from calbench_devtools.mock_endpoint import MockLLMServer  # noqa: E402
from personas.registry import make_personas  # noqa: E402


class Recorder(MockLLMServer):
    """The mock, keeping per answered request: the seat and the flattened prompt."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.sent: list[tuple[int, str]] = []

    def _answer(self, req, th, fault, prompt_chars, reused):
        status, headers, payload = super()._answer(req, th, fault, prompt_chars, reused)
        if status == 200 and th.reflection is None:
            flat = "".join(f"<{m.get('role')}>{m.get('content')}" for m in req.get("messages") or [])
            self.sent.append((th.seat, flat))
        return status, headers, payload


def prefix_share(sent: list[tuple[int, str]]) -> float:
    last: dict[int, str] = {}
    reused = total = 0
    for seat, flat in sent:
        prev = last.get(seat)
        if prev is not None:
            n = 0
            for a, b in zip(prev, flat):
                if a != b:
                    break
                n += 1
            reused += n
        total += len(flat)
        last[seat] = flat
    return reused / total if total else 0.0


async def run_mode(tasks, history: str, limit: int | None, table: str, prompt: str = "auto") -> dict:
    out = {"prompt": 0, "completion": 0, "requests": 0, "max_prompt": 0, "overflows": 0, "scheduled": 0,
           "meetings": 0, "share_num": 0.0, "share_den": 0, "seconds": 0.0}
    t0 = time.perf_counter()
    for task in tasks:
        async with Recorder(context_limit=limit, advertise_context=limit is not None) as mock:
            settings = LLMSettings(base_url=mock.base_url, history=history, retries=0, prompt=prompt)
            if table == "all":
                seats = [make_llm_persona("llm:bench", settings) for _ in range(task.num_agents)]
            else:  # the table: one LLM seat (seat 1) among IMAP bots
                seats = list(make_personas("imap", task.num_agents))
                seats[1] = make_llm_persona("llm:bench", settings)
            res = await run_game(task, seats, GameConfig(deterministic=True))
            await settings.pool.aclose()
            ev = res.trace["events"]
            tok = token_usage(ev)["game"]
            out["prompt"] += tok["prompt_tokens"]
            out["completion"] += tok["completion_tokens"]
            out["requests"] += tok["calls"]
            out["max_prompt"] = max([out["max_prompt"]] + [e["data"]["usage"]["prompt_tokens"] for e in ev
                                    if e["type"] in ("turn_end", "decide_end") and e["data"].get("usage")])
            out["overflows"] += failure_counts(ev)["configuration"]
            out["scheduled"] += res.metrics["meetings_scheduled"]
            out["meetings"] += res.metrics["meetings_total"]
            chars = sum(len(f) for _, f in mock.sent)
            out["share_num"] += prefix_share(mock.sent) * chars
            out["share_den"] += chars
    out["seconds"] = time.perf_counter() - t0
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="canonical:0-9")
    ap.add_argument("--limits", default="4096,8192", help="context limits for the @N modes (default 4096,8192)")
    args = ap.parse_args()
    tasks = [hydrate_labels(t) for t in resolve_tasks(args.tasks)]
    n = len(tasks)
    limits = [int(x) for x in args.limits.split(",") if x.strip()]
    modes = [("full", "full", None, "full"), ("digest", "digest", None, "full"), ("compact", "auto", None, "compact")]
    modes += [(f"auto@{n}", "auto", n) for n in limits] + [(f"full@{n}", "full", n, "full") for n in limits]
    for table, title in (("all", "every seat an LLM seat"), ("one", "imap,llm,imap,imap,imap (one LLM seat)")):
        print(f"\n{n} games ({args.tasks}), {title}, on the loopback mock")
        await table_rows(tasks, modes, table)


async def table_rows(tasks, modes, table: str) -> None:
    n = len(tasks)
    print(f"{'mode':<11} {'prompt tok/game':>15} {'vs full':>8} {'tok/request':>11} {'max request':>11} "
          f"{'prefix cache':>12} {'overflows':>9} {'scheduled':>9} {'s':>6}")
    base = None
    for name, history, limit, *prompt in modes:
        r = await run_mode(tasks, history, limit, table, *prompt)
        per_game = r["prompt"] / n
        base = base or per_game
        share = r["share_num"] / r["share_den"] if r["share_den"] else 0.0
        print(f"{name:<11} {per_game:>15,.0f} {per_game / base:>7.2f}x {r['prompt'] / max(1, r['requests']):>11,.0f} "
              f"{r['max_prompt']:>11,} {share:>11.1%} {r['overflows']:>9} {r['scheduled']:>4}/{r['meetings']:<4} "
              f"{r['seconds']:>6.1f}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
