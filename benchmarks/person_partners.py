"""Measure: do scripted partners answer a person, and do a person's meetings get scheduled?

Run:  .venv/bin/python benchmarks/person_partners.py [--tasks canonical:2,canonical:6,canonical:7,canonical:14]
                                                      [--seeds 0] [--seat 2] [--json]

Plays the real engine headless, one game per (protocol, task, seed): the four scripted
protocols (imap, sdmap, dsm-welfare, dsm-private) on every seat but one, and in that seat
(``--seat``, default 2) the person-like policy of ``personas/person_like.py`` — the one
``study check --dry-run`` uses — which sees the seat's projected events and acts through the
same quick actions a person's keys send (``p``, ``a``, ``d``, ``c``) or typed offers.

Per protocol it prints two figures (issue 29):

* **answered** — of the seat's proposals (one per partner it went to), how many that partner
  answered with a DM to the seat later in the same round;
* **scheduled** — of the seat's meetings, how many were held in one common slot by all their
  participants at the end of the game.

The default tasks: canonical:2 (seat 2 leads M1 and M2) and three where seat 2 leads one
meeting of its three (canonical:6, 7 and 14).

``--study`` measures a simulated study instead (see :func:`study_runs`): person-like
participants' coordination in the scripted condition beside protocol-playing ones'.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.events import MESSAGE_EVENTS  # noqa: E402
from engine.game import GameConfig, run_game  # noqa: E402
from engine.model import MeetingCopy  # noqa: E402
from lab.gamespec import resolve_task  # noqa: E402
from personas.person_like import PersonLikePersona  # noqa: E402
from personas.registry import make_personas  # noqa: E402

PROTOCOLS = ("imap", "sdmap", "dsm-welfare", "dsm-private")
DEFAULT_TASKS = "canonical:2,canonical:6,canonical:7,canonical:14"


def _scheduled(task, calendars, meeting) -> bool:
    slots = set()
    for p in meeting.participants:
        where = [s for s, it in enumerate(calendars[p]) if isinstance(it, MeetingCopy) and it.meeting_id == meeting.id]
        if len(where) != 1:
            return False
        slots.add(where[0])
    return len(slots) == 1


async def play_one(protocol: str, ref: str, seat: int, seed: int) -> dict:
    task = resolve_task(ref)
    seats = make_personas(protocol, task.num_agents)
    person = PersonLikePersona(seat, seed=seed)
    seats[seat] = person
    res = await run_game(task, seats, GameConfig(deterministic=True), person.sink)
    events = res.trace["events"]
    msgs = [e for e in events if e["type"] in MESSAGE_EVENTS]
    asked = answered = 0
    for entry in person.log:
        if entry["action"] != "propose":
            continue
        for to in entry["to"]:
            sent = [e for e in msgs if e["data"].get("round") == entry["round"] and e["data"].get("turn") == entry["turn"]
                    and e["data"].get("from_agent") == seat and e["data"].get("to_agent") == to]
            if not sent:
                continue
            asked += 1
            after = sent[-1]["seq"]
            if any(e["seq"] > after and e["data"].get("round") == entry["round"] and e["data"].get("from_agent") == to
                   and e["data"].get("to_agent") == seat and e["data"].get("channel") == "dm" for e in msgs):
                answered += 1
    mine = [m for m in task.meetings if seat in m.participants]
    sched = sum(_scheduled(task, res.state.calendars, m) for m in mine)
    return {"protocol": protocol, "task": ref, "seed": seed, "proposals": asked, "answered": answered,
            "meetings": len(mine), "scheduled": sched,
            "leads": [m.id for m in mine if min(m.participants) == seat]}


async def measure(tasks: list[str], seeds: list[int], seat: int) -> list[dict]:
    return [await play_one(p, t, seat, s) for p in PROTOCOLS for t in tasks for s in seeds]


def table(rows: list[dict], first: str) -> str:
    out = ["| partners | task(s) | proposals answered by a DM in the same round | seat's meetings scheduled |",
           "|---|---|---|---|"]
    for p in PROTOCOLS:
        for label, sel in ((first, [r for r in rows if r["protocol"] == p and r["task"] == first]),
                           ("other tasks", [r for r in rows if r["protocol"] == p and r["task"] != first])):
            if not sel:
                continue
            a, n = sum(r["answered"] for r in sel), sum(r["proposals"] for r in sel)
            s, m = sum(r["scheduled"] for r in sel), sum(r["meetings"] for r in sel)
            pct = f" ({100 * a / n:.0f} %)" if n else ""
            out.append(f"| {p} | {label} | {a} of {n}{pct} | {s} of {m} |")
    return "\n".join(out)


async def study_runs(seeds: list[int], protocols: tuple[str, ...]) -> list[dict]:
    """``--study``: the example study (``calbench study init``) with the scripted condition's
    partners set to each protocol and the LLM partner replaced by IMAP, dry-run once per study
    seed with person-like simulated participants and once with participants playing the partners'
    own protocol (what simulated participants did before issue 29: IMAP in the example); per run the
    participants' (kind "human") coordination and success in the scripted condition, as
    ``calbench report --study --include-simulated`` computes them."""
    import tempfile

    from lab.study.check import dry_run
    from lab.study.example import EXAMPLE
    from lab.study.model import parse_study
    from lab.study.report import study_table
    from saves.store import Store

    out = []
    with tempfile.TemporaryDirectory(prefix="person-partners-") as tmp:
        for proto in protocols:
            for policy in ("person-like", proto):
                for seed in seeds:
                    text = (EXAMPLE.replace('partners = ["llm:mock-model", "imap", "imap", "imap"]', 'partners = "imap"')
                            .replace('partners = "imap"\nseat = 0', f'partners = "{proto}"\nseat = 0', 1)
                            .replace('simulated_protocol = "person-like"', f'simulated_protocol = "{policy}"')
                            .replace("seed = 7 ", f"seed = {seed} "))
                    study = parse_study(text)
                    async with await Store.open(Path(tmp) / f"{proto}-{policy}-{seed}.db") as store:
                        r = await dry_run(study, store)
                        t = await study_table(study, store, include_simulated=True, reps=10)
                    row = next(x for x in t["rows"] if x["condition"] == "scripted" and x["kind"] == "human")
                    out.append({"partners": proto, "participants": "protocol" if policy == proto else policy,
                                "seed": seed, "ok": r["ok"],
                                "games": row["n"], "coordination": row["coordination"]["mean"],
                                "success": row["success"]["mean"]})
    return out


def study_table_text(rows: list[dict]) -> str:
    out = ["| scripted condition's partners | person-like participants: Coord. / Success | "
           "protocol-playing participants (the partners' protocol): Coord. / Success | difference (points, Coord.) |",
           "|---|---|---|---|"]
    for proto in dict.fromkeys(r["partners"] for r in rows):
        cells = {}
        for policy in ("person-like", "protocol"):
            sel = [r for r in rows if r["partners"] == proto and r["participants"] == policy]
            n = sum(r["games"] for r in sel)
            cells[policy] = (sum(r["coordination"] * r["games"] for r in sel) / n,
                             sum(r["success"] * r["games"] for r in sel) / n, n)
        (pc, ps, pn), (ic, is_, inn) = cells["person-like"], cells["protocol"]
        out.append(f"| {proto} | {100 * pc:.1f} % / {100 * ps:.1f} % ({pn} games) | "
                   f"{100 * ic:.1f} % / {100 * is_:.1f} % ({inn} games) | {100 * (pc - ic):+.1f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default=DEFAULT_TASKS, help="comma list of task references (the first is reported "
                                                           f"on its own; default {DEFAULT_TASKS})")
    ap.add_argument("--seeds", default="0", help="comma list of the person-like policy's seeds (default 0)")
    ap.add_argument("--seat", type=int, default=2, help="the person-like seat (default 2)")
    ap.add_argument("--json", action="store_true", help="one JSON row per game instead of the table")
    ap.add_argument("--study", action="store_true",
                    help="instead: dry-run the example study with person-like and with IMAP-playing simulated "
                         "participants (one run per --seeds value and scripted-condition protocol) and compare "
                         "their coordination in the scripted condition")
    a = ap.parse_args(argv)
    tasks = [t.strip() for t in a.tasks.split(",") if t.strip()]
    seeds = [int(s) for s in a.seeds.split(",") if s.strip()]
    if a.study:
        rows = asyncio.run(study_runs(seeds, PROTOCOLS))
        if a.json:
            for r in rows:
                print(json.dumps(r))
        else:
            print(study_table_text(rows))
        return 0 if all(r["ok"] for r in rows) else 1
    rows = asyncio.run(measure(tasks, seeds, a.seat))
    if a.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print(table(rows, tasks[0]))
        for r in rows:
            print(f"  {r['protocol']:12} {r['task']:14} seed {r['seed']}: answered {r['answered']}/{r['proposals']}, "
                  f"scheduled {r['scheduled']}/{r['meetings']} (leads M{', M'.join(map(str, r['leads'])) or '-'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
