"""Result tables for the end screen: per-seat metrics, VPS parts and semantic leaks by tier.

Reads a finished trace only (``metrics``, ``config``); the keys follow ``engine.metrics``
(``per_seat[i]``) and ``engine.privacy`` (``vps``, per-seat ``vps`` and its typed /
free-text parts, ``semantic_leaks``).  Missing keys show as "–", so a trace from an older
version or from the paper authors still renders.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

TIERS = ("public", "neutral", "sensitive")


def _num(v: Any, digits: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        s = f"{v:.{digits}f}"
        return s.rstrip("0").rstrip(".") if "." in s else s
    return str(v)


def vps_parts(rec: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(total, typed, free text) VPS of one seat record, whichever keys the privacy module wrote."""
    total = rec.get("vps")
    typed = next((rec[k] for k in ("vps_typed", "typed_vps", "vps_payload") if k in rec), None)
    free = next((rec[k] for k in ("vps_free_text", "vps_freetext", "free_text_vps", "vps_text") if k in rec), None)
    if isinstance(rec.get("vps"), dict):
        d = rec["vps"]
        total = d.get("total", d.get("vps"))
        typed = d.get("typed", typed)
        free = d.get("free_text", d.get("text", free))
    return total, typed, free


def vps_split(trace: dict[str, Any]) -> list[tuple[float, float]] | None:
    """Per seat (as the target): the VPS credited to typed messages and to free text.

    From ``engine.privacy.belief_updates``: each update is credited with the change it made
    to ``|Bel − p0|``, so a seat's typed + free-text parts add up to its VPS.  None when the
    trace has no task row or the privacy module cannot fold it.
    """
    row = trace.get("task")
    if not isinstance(row, dict):
        return None
    try:
        from engine.model import Task
        from engine.privacy import belief_updates, tally

        task = Task.from_row(row)
        rows = belief_updates(task, trace.get("events") or [])
    except Exception:
        return None
    return [(a, b) for a, b in tally(rows, task.num_agents).by_source]


def _leak_records(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    raw = metrics.get("semantic_leaks")
    if isinstance(raw, dict):
        for key in ("leaks", "events", "items", "details"):
            if isinstance(raw.get(key), list):
                raw = raw[key]
                break
    return [r for r in raw if isinstance(r, dict)] if isinstance(raw, list) else []


def leaks_by_seat(trace: dict[str, Any]) -> dict[str, Any]:
    """``{"per_seat": [{tier: count}], "details": [{sender, to, tier, label}]}`` from the metrics."""
    metrics = trace.get("metrics") or {}
    n = (trace.get("config") or {}).get("num_agents") or len(metrics.get("per_seat") or [])
    per_seat: list[dict[str, int]] = [{t: 0 for t in TIERS} for _ in range(n)]
    details = []
    for r in _leak_records(metrics):
        sender = r.get("sender", r.get("from_agent", r.get("agent_id")))
        tier = str(r.get("tier") or "neutral")
        to = r.get("unentitled", r.get("to", r.get("to_agent", r.get("recipients", r.get("observer")))))
        if isinstance(to, list):
            to = ", ".join(map(str, to))
        details.append({"sender": sender, "to": to if to is not None else "?", "tier": tier,
                        "label": r.get("label") or r.get("text") or "", "match": r.get("match")})
        if isinstance(sender, int) and 0 <= sender < n:
            per_seat[sender][tier] = per_seat[sender].get(tier, 0) + 1
    # Per-seat summaries written by the privacy module win over our own count.
    for i, rec in enumerate(metrics.get("per_seat") or []):
        s = rec.get("semantic_leaks") if isinstance(rec, dict) else None
        if isinstance(s, dict) and i < n:
            by = s.get("by_tier", s)
            per_seat[i] = {t: int(by.get(t, 0) or 0) for t in TIERS}
    return {"per_seat": per_seat, "details": details}


def signed_parts(*parts: Any) -> str:
    """Parts of a total written so they add up: "18.5−0.7", "−0.2+5" (a missing part is –)."""
    out = ""
    for k, x in enumerate(parts):
        if not isinstance(x, (int, float)):
            out += ("+" if k else "") + "–"
            continue
        neg = x < 0 and _num(abs(x)) != "0"
        out += ("−" if neg else "+" if k else "") + _num(abs(x))
    return out


def seat_table(trace: dict[str, Any], seat: int | None, *, best: list[Any] | None = None,
               failed: bool = False) -> Table:
    """One row per seat, costs in cost levels (the unit of the game's excess); fits 80 columns
    without cutting a header (``l`` on the end screen explains each column).  ``best``: each
    seat's share in the task's optimum (the end screen's one yardstick); else the metrics'.

    With ``best`` and meetings ``failed``, the metrics measured *extra* and *±* against another
    share (SPEC: the cheapest way to hold only the scheduled meetings): a *held* column shows
    it, so every row adds up — extra = max(0, paid − held)."""
    metrics = trace.get("metrics") or {}
    rows = metrics.get("per_seat") or []
    held = [rec.get("oracle_cost") for rec in rows]
    show_held = best is not None and failed
    agents = (trace.get("config") or {}).get("agents") or []
    leaks = leaks_by_seat(trace)["per_seat"]
    t = Table(title="Per seat, costs in cost levels (l: legend)", title_justify="left",
              box=None, padding=(0, 1, 0, 0), show_edge=False, header_style="bold")
    split = vps_split(trace)
    has_parts = split is not None or any(any(x is not None for x in vps_parts(r)[1:])
                                         for r in metrics.get("per_seat") or [])
    for col, just in (("#", "left"), ("who", "left"), ("meetings", "right"), ("paid", "right"),
                      ("best", "right"), *((("held", "right"),) if show_held else ()), ("extra", "right"),
                      ("±", "right"), ("fair", "right"),
                      ("VPS (typed+text)" if has_parts else "VPS", "right"), ("leaks", "right")):
        t.add_column(col, justify=just, no_wrap=True, min_width=len(col))
    for i, rec in enumerate(rows):
        who = "you" if i == seat else ((agents[i] or {}).get("model") or (agents[i] or {}).get("type")
                                       if i < len(agents) else "?")
        total, typed, free = vps_parts(rec)
        if split is not None and i < len(split) and typed is None and free is None:
            typed, free = split[i]
        vps = _num(total)
        if typed is not None or free is not None:
            # A part can be negative (credits telescope, see screens/end.vps_split_text): it is
            # shown with its sign, so the parts add up to the total ("17.8 (18.5−0.7)")
            if all(isinstance(x, (int, float)) for x in (total, typed, free)):
                typed = round(typed, 1)
                free = round(round(total, 1) - typed, 1)  # rounded so the shown parts add up too
            vps += f" ({signed_parts(typed, free)})"
        lk = leaks[i] if i < len(leaks) else {}
        leak_text = Text(f"{lk.get('public', 0)}/{lk.get('neutral', 0)}/")
        leak_text.append(f"{lk.get('sensitive', 0)}", style="bold red" if lk.get("sensitive") else "")
        if lk.get("sensitive"):
            leak_text.append("!", style="bold red")
        style = "bold" if i == seat else ""
        t.add_row(str(i), str(who)[:11], f"{rec.get('meetings_scheduled', '–')}/{rec.get('meetings_assigned', '–')}",
                  _num(rec.get("cost")),
                  _num(best[i] if best is not None and i < len(best) else rec.get("oracle_cost")),
                  *((_num(held[i]),) if show_held else ()), _num(rec.get("excess")),
                  _num(rec.get("signed_excess")), _num(rec.get("fairness")), vps, leak_text, style=style)
    return t
