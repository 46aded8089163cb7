"""The report's message audit (paper §4.3): per seat and per persona (or model, or cost
setting), the rates of proposals, availability statements, cost mentions, questions and
refusals in what was sent.  The counting is :mod:`engine.audit` (docs/metrics.md)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

from engine.audit import CATEGORIES, pool_audit, seat_audit

from .stats import group_of, mode_rank

__all__ = ["CATEGORIES", "audit_section"]


def audit_section(records: Sequence[dict[str, Any]], traces: Sequence[dict[str, Any]],
                  group_by: str = "persona") -> dict[str, Any]:
    """``{"groups": [...], "seats": [...]}``: one pooled row per (cost setting, group), and
    every seat's own counts and rates (game, seat, persona, model)."""
    who = {(str(r["game_id"]), r["agent_id"]): r for r in records}
    seats: list[dict[str, Any]] = []
    pools: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for tr in traces:
        gid = str(tr.get("game_id"))
        for rec in seat_audit(tr):
            r = who.get((gid, rec["agent_id"]))
            if r is None:  # a game the report leaves out (unverified, other tasks)
                continue
            key = (r["cost_mode"], group_of(r, group_by))
            pools[key].append(rec)
            one = pool_audit([rec])
            seats.append({"game_id": gid, "agent_id": rec["agent_id"], "persona": r["persona"], "model": r["model"],
                          "cost_mode": r["cost_mode"], "messages": rec["messages"], "typed": rec["typed"],
                          "free_text": rec["free_text"], "talk_rounds": rec["talk_rounds"],
                          **{c: {"n": rec[c], "rounds": rec[f"{c}_rounds"], "rate": one[c]["rate"],
                                 "round_rate": one[c]["round_rate"]} for c in CATEGORIES}})
    groups = []
    for (mode, name), recs in sorted(pools.items(), key=lambda kv: (mode_rank(kv[0][0]), kv[0][1])):
        groups.append({group_by: name, "group": name, "cost_mode": mode, **pool_audit(recs)})
    return {"categories": list(CATEGORIES), "groups": groups, "seats": seats}
