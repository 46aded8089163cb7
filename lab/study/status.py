"""``study status``: where every participant is (step, games, time per step, stalls), partner
calls that went unanswered, and the counterbalancing rows of the current cycle that nobody holds.

A participant in a game of an LLM condition is flagged "PARTNER ENDPOINT DOWN?" when the latest
partner call of that game went unanswered, or when the condition's endpoint does not answer
now (:func:`probe_endpoint`: a killed endpoint is seen at once, while the seat's own call may
still be retrying for minutes and has recorded nothing yet).  :func:`format_status` sizes its
columns to what they hold and to the terminal's width."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

__all__ = ["study_status", "format_status", "probe_endpoint", "STALL_MINUTES"]

from saves.study import STALL_MINUTES  # noqa: E402  (one definition)


def _age_minutes(ts: str | None, now: datetime) -> float | None:
    if not ts:
        return None
    try:
        return (now - datetime.fromisoformat(ts)).total_seconds() / 60
    except ValueError:
        return None


def probe_endpoint(base_url: str, timeout: float = 3.0) -> str | None:
    """Whether an OpenAI-compatible endpoint answers now: None when ``GET BASE/models`` gets any
    HTTP answer below 500 within ``timeout`` seconds (no key is sent: a 401 is an answer), else
    one line why not (refused, timed out, HTTP 503 ...)."""
    import urllib.error
    import urllib.request
    from urllib.parse import urlsplit

    host = urlsplit(base_url).hostname or ""
    handlers = [urllib.request.ProxyHandler({})] if host in ("127.0.0.1", "localhost", "::1") else []
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(base_url.rstrip("/") + "/models", timeout=timeout):
            return None
    except urllib.error.HTTPError as exc:
        return None if exc.code < 500 else f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return f"no answer ({getattr(reason, 'strerror', None) or reason})"


def _endpoint_of(study, p, step_name: str) -> str | None:
    """The LLM endpoint of the condition of the game ``step_name`` of participant row ``p`` (None
    for a condition without LLM seats)."""
    import os

    try:
        cond = study.condition(p["assignment"][int(step_name.split(":")[1])]["condition"])
    except (KeyError, IndexError, ValueError, LookupError):
        return None
    if cond is None or not cond.uses_llm:
        return None
    return cond.llm.base_url or os.environ.get("OPENAI_BASE_URL") or None


async def study_status(study, store, *, now: datetime | None = None, stall_minutes: float = STALL_MINUTES,
                       probe: bool = True) -> dict[str, Any]:
    """Every participant's row (see the module docstring); ``probe``: ask the LLM endpoints of the
    games in play whether they answer."""
    import asyncio

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
        state = p["state"] if p["state"] != "active" else (
            "stalled" if idle is not None and idle >= stall_minutes else "active")
        cur_round = None
        # partner calls never answered: finished games from their step data, the current one from its events
        failures = sum(int((s["data"] or {}).get("partner_failures") or 0) for s in games if s["completed_at"])
        partner_down = False
        if current is not None and current["game_id"] and state in ("active", "stalled"):
            seat = _seat_of(p, current["name"])
            last_partner = None
            failing: set[int] = set()  # a failed call still ends with the seat's turn_end / decide_end
            for e in await store.load_events(current["game_id"]):
                a = (e.get("data") or {}).get("agent_id")
                if a is None or a == seat:
                    continue
                if e["type"] == "seat_timeout":
                    failures += 1
                    last_partner = "failed"
                    failing.add(a)
                elif e["type"] in ("turn_end", "decide_end"):
                    if a in failing:
                        failing.discard(a)
                    else:
                        last_partner = "answered"
            partner_down = last_partner == "failed"  # the latest partner call went unanswered
        endpoint = None
        if current is not None and current["name"].startswith("game:") and state in ("active", "stalled"):
            endpoint = _endpoint_of(study, p, current["name"])
        if current is not None and current["game_id"]:
            top = await store.last_round(current["game_id"])
            cur_round = None if top is None else top + 1  # counted from 1, as on the participant's screen
        out.append({
            "participant": p["participant"], "simulated": bool(p["simulated"]), "slot": p["slot"], "state": state,
            "step": current["name"] if current else None, "step_index": current["step"] if current else len(ps),
            "steps": len(ps), "games_done": sum(1 for s in games if s["completed_at"]), "games": len(games),
            "round": cur_round, "idle_minutes": None if idle is None else round(idle, 1),
            # time on the current step, summed over the runs that showed it (the runner writes it
            # down every 30 s and on a quit); before the first note, the time since it was shown
            "step_minutes": None if current is None else round(current["seconds"] / 60, 1)
            if current["seconds"] is not None else None if _age_minutes(current["started_at"], now) is None
            else round(_age_minutes(current["started_at"], now), 1),
            "seconds_per_step": {s["name"]: round(s["seconds"], 1) for s in done if s["seconds"] is not None},
            "completion_code": p["completion_code"], "partner_failures": failures,
            "partner_down": partner_down, "endpoint": endpoint, "endpoint_down": None})
    if probe:
        urls = sorted({r["endpoint"] for r in out if r["endpoint"]})
        answers = dict(zip(urls, await asyncio.gather(*(asyncio.to_thread(probe_endpoint, u) for u in urls))))
        for r in out:
            why = answers.get(r["endpoint"]) if r["endpoint"] else None
            if why:
                r["endpoint_down"] = why
                r["partner_down"] = True
    return {"study": study.name, "participants": out,
            "counts": {k: sum(1 for r in out if r["state"] == k)
                       for k in ("active", "stalled", "completed", "declined", "screened_out", "timed_out")},
            "cycle": await _cycle(study, db, now, stall_minutes)}


def _seat_of(p, step_name: str) -> int | None:
    try:
        return int(p["assignment"][int(step_name.split(":")[1])]["seat"])
    except (KeyError, IndexError, ValueError):
        return None


async def _cycle(study, db, now, stall_minutes) -> dict[str, Any]:
    """The cycle the next arrival goes into and its rows nobody holds (each with its plan)."""
    from .assign import assignment, cycle_length
    from .model import pool_tasks

    n = cycle_length(study)
    tasks = None
    held = await db.held_slots(False, stall_minutes=stall_minutes, now=now)
    slot = await db.next_slot(False, stall_minutes=stall_minutes, now=now)
    k = slot // n
    rows = []
    for s in range(k * n, (k + 1) * n):
        if s in held:
            continue
        tasks = tasks if tasks is not None else pool_tasks(study)
        plan = [g for g in assignment(study, s, tasks) if not g.practice]
        rows.append({"slot": s, "row": s - k * n + 1,
                     "plan": " → ".join(f"{g.condition}@seat{g.seat}" for g in plan)})
    return {"number": k + 1, "size": n, "next_slot": slot, "unfilled": rows}


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


def format_status(st: dict[str, Any], width: int | None = None) -> str:
    """The status as text.  Each column is as wide as its widest cell; when the table is wider
    than ``width`` (default: the terminal's), the step and participant columns are cut
    (ending in "…") so every row stays on one line and the columns stay aligned.  A partner
    problem goes on its own line under the participant's row."""
    import shutil

    width = width or shutil.get_terminal_size((100, 24)).columns
    c = st["counts"]
    left = "".join(f", {c[k]} {k.replace('_', ' ')}" for k in ("declined", "screened_out", "timed_out")
                   if c.get(k))
    lines = [f"Study {st['study']}: {len(st['participants'])} participants — {c['active']} active, "
             f"{c['stalled']} stalled (idle ≥ {STALL_MINUTES:.0f} min: dropouts?), {c['completed']} completed{left}"]
    head = ["participant", "state", "step", "on step", "games", "round", "idle min", "code"]
    rows, notes = [], []
    for r in st["participants"]:
        step = f"{r['step'] or 'done'} ({min(r['step_index'] + 1, r['steps'])}/{r['steps']})"
        rows.append([r["participant"] + (" (sim)" if r["simulated"] else ""), r["state"], step,
                     "" if r["step_minutes"] is None else f"{r['step_minutes']}m", f"{r['games_done']}/{r['games']}",
                     "" if r["round"] is None else str(r["round"]),
                     "" if r["idle_minutes"] is None else str(r["idle_minutes"]), r["completion_code"] or ""])
        note = []
        if r.get("partner_failures"):
            note.append(f"{r['partner_failures']} partner call(s) unanswered")
        if r.get("endpoint_down"):
            note.append(f"the LLM endpoint {r['endpoint']} gives {r['endpoint_down']}")
        if r.get("partner_down"):
            note.append("PARTNER ENDPOINT DOWN? (check the condition's base_url)")
        notes.append(" — ".join(note))
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    gap = 2
    over = sum(widths) + gap * (len(widths) - 1) - width
    for col, least in ((2, 12), (0, 8)):  # the step, then the participant column give way first
        if over > 0:
            cut = min(over, max(0, widths[col] - least))
            widths[col] -= cut
            over -= cut

    def line(cells: list[str]) -> str:
        return (" " * gap).join(_fit(x, w).ljust(w) for x, w in zip(cells, widths)).rstrip()

    lines.append(line(head))
    for cells, note in zip(rows, notes):
        lines.append(line(cells))
        if note:
            lines.append("  ↳ " + note)
    cyc = st.get("cycle")
    if cyc:
        if cyc["unfilled"]:
            lines.append(f"Cycle {cyc['number']} ({cyc['size']} rows): {len(cyc['unfilled'])} unfilled — the next "
                         "arrival takes the first:")
            for u in cyc["unfilled"]:
                lines.append(f"  row {u['row']} (slot {u['slot']}): {u['plan']}")
        else:
            lines.append(f"Cycle {cyc['number']} ({cyc['size']} rows): every row filled")
    return "\n".join(lines)
