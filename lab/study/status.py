"""``study status``: where every participant is (step, games, time per step, stalls)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

__all__ = ["study_status", "format_status", "STALL_MINUTES"]

STALL_MINUTES = 10.0


def _age_minutes(ts: str | None, now: datetime) -> float | None:
    if not ts:
        return None
    try:
        return (now - datetime.fromisoformat(ts)).total_seconds() / 60
    except ValueError:
        return None


async def study_status(study, store, *, now: datetime | None = None, stall_minutes: float = STALL_MINUTES
                       ) -> dict[str, Any]:
    from saves.study import StudyStore

    now = now or datetime.now(timezone.utc)
    db = StudyStore(store, study.name)
    parts = await db.participants()
    steps = await db.all_steps()
    by: dict[str, list] = {}
    for s in steps:
        by.setdefault(s["participant"], []).append(s)
    out = []
    for p in parts:
        ps = by.get(p["participant"], [])
        done = [s for s in ps if s["completed_at"]]
        current = next((s for s in ps if not s["completed_at"]), None)
        games = [s for s in ps if s["name"].startswith("game:")]
        last = max([s["completed_at"] for s in done if s["completed_at"]] + [s["started_at"] for s in ps
                                                                             if s["started_at"]] or [None],
                   key=lambda x: x or "")
        idle = _age_minutes(last, now)
        state = "completed" if p["status"] == "completed" else (
            "stalled" if idle is not None and idle >= stall_minutes else "active")
        cur_round = None
        if current is not None and current["game_id"]:
            async with store._db.execute("SELECT MAX(round) FROM events WHERE game_id = ?",
                                         (current["game_id"],)) as cur:
                cur_round = (await cur.fetchone())[0]
            if cur_round is None:  # a finished game's events are one compressed blob, not rows
                rounds = [e["data"].get("round") for e in await store.load_events(current["game_id"])]
                cur_round = max((r for r in rounds if isinstance(r, int)), default=None)
        out.append({
            "participant": p["participant"], "simulated": bool(p["simulated"]), "slot": p["slot"], "state": state,
            "step": current["name"] if current else None, "step_index": current["step"] if current else len(ps),
            "steps": len(ps), "games_done": sum(1 for s in games if s["completed_at"]), "games": len(games),
            "round": cur_round, "idle_minutes": None if idle is None else round(idle, 1),
            "step_minutes": None if current is None or _age_minutes(current["started_at"], now) is None
            else round(_age_minutes(current["started_at"], now), 1),
            "seconds_per_step": {s["name"]: round(s["seconds"], 1) for s in done if s["seconds"] is not None},
            "completion_code": p["completion_code"]})
    return {"study": study.name, "participants": out,
            "counts": {k: sum(1 for r in out if r["state"] == k) for k in ("active", "stalled", "completed")}}


def format_status(st: dict[str, Any]) -> str:
    c = st["counts"]
    lines = [f"Study {st['study']}: {len(st['participants'])} participants — {c['active']} active, "
             f"{c['stalled']} stalled (idle ≥ {STALL_MINUTES:.0f} min: dropouts?), {c['completed']} completed"]
    lines.append(f"{'participant':<14}{'state':<11}{'step':<26}{'on step':<9}{'games':<7}{'round':<7}"
                 f"{'idle min':<10}code")
    for r in st["participants"]:
        who = r["participant"] + (" (sim)" if r["simulated"] else "")
        step = f"{r['step'] or 'done'} ({min(r['step_index'] + 1, r['steps'])}/{r['steps']})"
        games = f"{r['games_done']}/{r['games']}"
        rnd = "" if r["round"] is None else str(r["round"])
        idle = "" if r["idle_minutes"] is None else str(r["idle_minutes"])
        on = "" if r["step_minutes"] is None else f"{r['step_minutes']}m"
        lines.append(f"{who:<14}{r['state']:<11}{step:<26}{on:<9}{games:<7}{rnd:<7}{idle:<10}"
                     f"{r['completion_code'] or ''}")
    return "\n".join(lines)
