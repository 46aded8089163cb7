"""Table 2, computed once: the suite summary of ``calbench run`` and the report's protocol table.

A Table 2 row (paper Table 2) pools whole games: ``coordination`` is the mean share of a
game's meetings scheduled (0–1; shown as %), ``excess`` and ``fairness`` are means over
seats (levels), ``messages_per_meeting`` is pooled (Σ messages / Σ scheduled
participant-meetings) and ``vps`` is the mean game VPS.  :func:`table2_row` computes it
from one :class:`GameTotals` per game; :func:`summarise` (a suite, grouped by the table's
spec label and cost setting, with failure counts) and ``lab.report.tables.table2`` (saved
games where every seat has one persona) both call it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from engine.model import Task

__all__ = ["GameTotals", "GameSummary", "table2_row", "summarise", "failure_counts", "mode_rank"]


@dataclass(frozen=True)
class GameTotals:
    """One game's part of a Table 2 row; ``None`` where the game does not say (an imported trace)."""

    coordination: float | None
    vps: float | None
    excess_sum: float  # over the seats whose excess is known
    excess_n: int
    fairness_sum: float
    fairness_n: int
    messages: int | None  # None: no seat's message count is known
    scheduled_participant_meetings: int  # of the seats whose message count is known


def table2_row(games: Sequence[GameTotals]) -> dict[str, Any]:
    """The pooled Table 2 metrics of ``games`` (see the module docstring)."""
    n_exc = sum(g.excess_n for g in games)
    n_fair = sum(g.fairness_n for g in games)
    known = [g for g in games if g.messages is not None]
    msgs = sum(g.messages for g in known)
    spm = sum(g.scheduled_participant_meetings for g in known)
    return {
        "games": len(games),
        "coordination": _mean([g.coordination for g in games]),
        "excess": (sum(g.excess_sum for g in games) / n_exc) if n_exc else None,
        "messages_per_meeting": ((msgs / spm) if spm else float(msgs)) if known else None,
        "fairness": (sum(g.fairness_sum for g in games) / n_fair) if n_fair else None,
        "vps": _mean([g.vps for g in games]),
    }


@dataclass
class GameSummary:
    """One game as the suite table sees it (``--json`` prints :meth:`to_json`)."""

    game_id: str
    task_id: str
    cost_mode: str
    agents: str
    status: str  # completed | failed | stopped | skipped
    coordination: float | None = None
    meetings_scheduled: int | None = None
    meetings_total: int | None = None
    excess_cost: float | None = None
    messages_per_meeting: float | None = None
    fairness: float | None = None
    vps: float | None = None
    error: str | None = None
    # For pooled summaries (not printed per game).
    seats: int = 0
    excess_sum: float = 0.0
    fairness_sum: float = 0.0
    messages: int = 0
    scheduled_participant_meetings: int = 0
    seconds: float = 0.0
    # Failures by whose fault (see :func:`failure_counts`); None: not known (a game read back
    # for --resume from the per-seat results, which keep no events).
    infra_failures: int | None = 0
    agent_failures: int | None = 0
    config_failures: int | None = 0  # context overflows (engine.usage.failure_counts)
    tokens: dict[str, int] | None = None  # LLM tokens of the game, judge included (engine.usage.token_usage)

    JSON_KEYS = ("game_id", "task_id", "cost_mode", "agents", "status", "coordination",
                 "meetings_scheduled", "meetings_total", "excess_cost", "messages_per_meeting",
                 "fairness", "vps", "infra_failures", "config_failures", "agent_failures", "tokens")

    def to_json(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.JSON_KEYS}
        if self.error:
            d["error"] = self.error
        return d

    def totals(self) -> "GameTotals":
        """This game's part of a Table 2 row."""
        return GameTotals(coordination=self.coordination, vps=self.vps, excess_sum=self.excess_sum,
                          excess_n=self.seats, fairness_sum=self.fairness_sum, fairness_n=self.seats,
                          messages=self.messages, scheduled_participant_meetings=self.scheduled_participant_meetings)

    @classmethod
    def from_trace(cls, trace: dict[str, Any], *, agents: str, status: str = "completed",
                   game_id: str | None = None) -> "GameSummary":
        m = trace.get("metrics") or {}
        cfg = trace.get("config") or {}
        task_row = trace.get("task") or {}
        per_seat = m.get("per_seat") or []
        cost_mode = m.get("cost_mode") or (task_row.get("calbench") or {}).get("cost_mode") or "?"
        from engine.usage import failure_counts as failure_classes, token_usage

        events = trace.get("events") or []
        fails = failure_classes(events)
        infra, agent, config = fails["infra"], fails["agent"], fails["configuration"]
        tok = token_usage(events, (trace.get("judge") or {}).get("records") or [])
        return cls(
            game_id=game_id or trace.get("game_id"),
            task_id=str(cfg.get("task_id", task_row.get("task_id"))),
            cost_mode=cost_mode,
            agents=agents,
            status=status,
            coordination=m.get("coordination_rate"),
            meetings_scheduled=m.get("meetings_scheduled"),
            meetings_total=m.get("meetings_total"),
            excess_cost=m.get("excess"),
            messages_per_meeting=m.get("messages_per_meeting"),
            fairness=m.get("fairness"),
            vps=m.get("vps"),
            seats=len(per_seat),
            excess_sum=sum(s.get("excess", 0) for s in per_seat),
            fairness_sum=sum(s.get("fairness", 0) for s in per_seat),
            messages=int(m.get("total_cheap_talk_messages", 0)),
            scheduled_participant_meetings=sum(s.get("meetings_scheduled", 0) for s in per_seat),
            infra_failures=infra, agent_failures=agent, config_failures=config,
            tokens=tok["total"] if tok["total"]["calls"] else None,
        )

    @classmethod
    def from_seat_rows(cls, rows: list[dict[str, Any]], task: Task) -> "GameSummary":
        """From ``store.game_results`` rows (one per seat) of one saved game."""
        g = rows[0]
        seats = [r.get("seat") or {} for r in rows]
        n = len(seats)
        sent = sum(s.get("messages_sent") or 0 for s in seats)
        spm = sum(s.get("meetings_scheduled") or 0 for s in seats)
        excess = sum(s.get("excess") or 0 for s in seats)
        fairness = sum(s.get("fairness") or 0 for s in seats)
        total = len(task.meetings)
        coord = g.get("coordination")
        fails = g.get("failures") if isinstance(g.get("failures"), dict) else {}
        return cls(
            game_id=g["game_id"], task_id=str(g["task_id"]), cost_mode=g.get("cost_mode") or task.cost_mode,
            agents=g.get("agents") or "", status=g.get("status") or "completed", coordination=coord,
            meetings_scheduled=round(coord * total) if coord is not None else None, meetings_total=total,
            excess_cost=excess / n if n else None, messages_per_meeting=sent / spm if spm else float(sent),
            fairness=fairness / n if n else None, vps=sum(s.get("vps") or 0 for s in seats),
            seats=n, excess_sum=excess, fairness_sum=fairness, messages=sent, scheduled_participant_meetings=spm,
            # games.failures (migration 10); None for a game saved before it (no events are read here)
            infra_failures=fails.get("infra"), agent_failures=fails.get("agent"),
            config_failures=fails.get("configuration"),
        )


def failure_counts(events: Iterable[dict[str, Any]]) -> tuple[int, int]:
    """``(infrastructure failures, agent failures)`` of a game, counted from its events.

    * infrastructure: ``seat_timeout`` events — a seat that could not answer at all: the
      engine records them for ``Reply.error`` ``"seat_timeout"`` and ``"infra_error"`` (an
      LLM endpoint unreachable, rate limited or failing past its retries, a missing key
      met during a call) and for a persona call that timed out.  Context overflows
      (``context_overflow`` events) are configuration failures, counted apart
      (``engine.usage.failure_counts``);
    * agent: ``parse_error`` events — the agent answered but got it wrong: unreadable
      output (``parse_error``), a persona exception (``seat_error``), a message that could
      not be delivered (``undeliverable``) and actions sent in the wrong phase
      (``ignored_actions``).  All are the agent's mistakes, so all count.
    """
    from engine.usage import failure_counts as failure_classes

    fails = failure_classes(events)
    return fails["infra"], fails["agent"]


def summarise(games: Iterable[GameSummary]) -> list[dict[str, Any]]:
    """Table 2 rows, one per (persona spec, cost mode), over completed games.

    ``coordination`` is the mean share of meetings scheduled (0–1; the table shows %),
    ``excess`` and ``fairness`` are means over seats (levels), ``messages_per_meeting``
    is pooled (Σ messages / Σ scheduled participant-meetings) and ``vps`` is the mean
    game VPS.  ``failed`` counts games that could not be played.  ``infra_failures``,
    ``config_failures`` (context overflows) and ``agent_failures`` sum the games' counts (played and failed games,
    and those read back for ``--resume``: ``games.failures``; one saved before migration 10 adds nothing), and
    ``games_with_infra_failures``
    counts the games with at least one infrastructure failure.
    """
    groups: dict[tuple[str, str], list[GameSummary]] = {}
    failed: dict[tuple[str, str], int] = {}
    fails: dict[tuple[str, str], list[int]] = {}
    for g in games:
        k = (g.agents, g.cost_mode)
        f = fails.setdefault(k, [0, 0, 0, 0])
        f[0] += g.infra_failures or 0
        f[1] += g.agent_failures or 0
        f[2] += 1 if g.infra_failures else 0
        f[3] += g.config_failures or 0
        if g.status == "completed":
            groups.setdefault(k, [])
            groups[k].append(g)
        elif g.status == "failed":
            failed[k] = failed.get(k, 0) + 1
            groups.setdefault(k, [])
    out = []
    for (persona, mode), gs in sorted(groups.items(), key=lambda kv: (mode_rank(kv[0][1]), kv[0][0])):
        f = fails.get((persona, mode), [0, 0, 0, 0])
        t2 = table2_row([g.totals() for g in gs])
        out.append({
            "persona": persona,
            "cost_mode": mode,
            "games": t2.pop("games"),
            "failed": failed.get((persona, mode), 0),
            **t2,
            "infra_failures": f[0],
            "config_failures": f[3],
            "agent_failures": f[1],
            "games_with_infra_failures": f[2],
        })
    return out


def mode_rank(mode: str | None) -> tuple[int, str]:
    """uniform, varied, then any other cost setting by name (the order every table uses)."""
    return ({"uniform": 0, "varied": 1}.get(mode or "", 2), mode or "")


def _mean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None
