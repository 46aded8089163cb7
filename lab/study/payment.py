"""What a participant earns (``[payment]``): a show-up fee for completing the study plus a
bonus from their own games, capped.

    bonus = max(0, per_meeting × meetings scheduled − per_cost × cost incurred), at most ``cap``
    total = show_up (completed participants only) + bonus

Counted over the participant's assigned games (the practice game is left out), from the
participant's own seat: ``meetings_scheduled`` and ``cost_shown`` of that seat's result
(the cost in the units the participant saw on screen).  Amounts are rounded to cents.
"""

from __future__ import annotations

from typing import Any

__all__ = ["payment_of", "payments"]


def _amounts(pay, *, completed: bool, meetings: int, cost: float) -> dict[str, Any]:
    bonus = max(0.0, pay.per_meeting * meetings - pay.per_cost * cost)
    if pay.cap is not None:
        bonus = min(bonus, pay.cap)
    show_up = pay.show_up if completed else 0.0
    return {"currency": pay.currency, "show_up": round(show_up, 2), "meetings": meetings, "cost": round(cost, 3),
            "bonus": round(bonus, 2), "total": round(show_up + bonus, 2)}


async def payments(study, store) -> list[dict[str, Any]]:
    """One row per participant of the study (simulated ones included, marked), or [] without ``[payment]``."""
    from saves.study import StudyStore

    pay = study.payment
    if pay is None:
        return []
    db = StudyStore(store, study.name)
    parts = await db.participants()
    steps = await db.all_steps()
    out = []
    for p in parts:
        plan = p["assignment"]
        meetings, cost = 0, 0.0
        for s in steps:
            if s["participant"] != p["participant"] or not s["name"].startswith("game:") or not s["game_id"]:
                continue
            g = plan[int(s["name"].split(":")[1])]
            if g["practice"]:
                continue
            row = await store.seat_result(s["game_id"], g["seat"])
            if row is not None:
                meetings += int(row["meetings_scheduled"] or 0)
                cost += float(row["cost_shown"] or 0)
        out.append({"participant": p["participant"], "simulated": p["simulated"], "pool_id": p.get("pool_id"),
                    "state": p["state"], "completion_code": p["completion_code"],
                    "pool_code": study.pool.ending(p["state"], p["completion_code"], p.get("pool_id"))[0],
                    **_amounts(pay, completed=p["status"] == "completed", meetings=meetings, cost=cost)})
    return out


async def payment_of(study, store, participant: str, *, completed: bool = True) -> dict[str, Any] | None:
    """The participant's payment now (``completed``: as if the study were complete), or None
    when the study file has no ``[payment]``."""
    rows = [r for r in await payments(study, store) if r["participant"] == participant]
    if not rows or study.payment is None:
        return None
    r = rows[0]
    return {**r, **_amounts(study.payment, completed=completed, meetings=r["meetings"], cost=r["cost"])}
