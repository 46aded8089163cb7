"""Scoring: the named, versioned stage that turns a finished game into its metrics (issue 23).

A game is played first (``engine.game.play_game``: the loop scores nothing), then scored
here, then closed (``engine.game.end_game`` emits ``game_end`` with the metrics).  A
scorer reads only what the game left behind — the task, the events that count, the
final state the rules reached — so a stored game can be scored again with today's code
(``calbench rescore``) and a trace's recorded metrics can be checked by scoring it again
and comparing (``engine.verify``).

Each scorer is registered by name with a version (:data:`SCORERS`).  **Bump a scorer's
version whenever its output for the same events changes** (an estimator fix, a new
figure): the trace records ``scoring: {name: version}`` for the scorers that ran, and
``calbench rescore`` prints the versions a game was scored with beside today's.

======================  =============================================================
``outcome``             coordination, costs against the scheduled-only oracle, excess,
                        fairness, adjusted cost, message counts, ``per_seat``, and the
                        trace's ``final_state`` (``engine.metrics.outcome_metrics``)
``vps``                 the estimator's VPS (SPEC §8): typed, free text, gossip, per
                        target, per round's participant pairs, weighted, calibrated,
                        and each seat's ``vps`` (``engine.privacy.vps_metrics``)
``leaks``               label leaks in untyped messages (SPEC §9, ``semantic_leaks``)
``reflection``          the seats' own reflections (paper F.3, ``reflection_vps``;
                        only when a seat reflected)
``judge``               the optional LLM judge's readings, scored like reflections
                        (paper I.2, ``judge_vps``; only when ``trace["judge"]`` holds
                        records — asking the judge's model is not scoring, see
                        ``personas/llm/judge.py``)
======================  =============================================================

The metrics object keeps the key order the engine always wrote (outcome keys, then the
VPS family, ``semantic_leaks``, ``reflection_vps``, ``per_target_vps``, ``judge_vps``),
so scripted games stay byte-identical.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .model import Task
from .state import GameState

__all__ = ["SCORERS", "Scorer", "Scores", "ScoreInput", "score", "score_played", "judge_metrics", "versions"]


@dataclass
class ScoreInput:
    """What the scorers read: a finished game.

    ``events``: the events that count (no ``game_end``, no set-aside attempt);
    ``round_calendars``: every round's calendars at its start when the engine that just
    played the game kept them (else the VPS scorer folds the events); ``judge``: the
    trace's ``judge`` record when an LLM judge read the game.  ``shared`` passes what one
    scorer learnt to the next (the count of untyped messages, the outcome's final state)."""

    task: Task
    state: GameState
    events: list[dict[str, Any]]
    communication_protocol: str
    round_calendars: dict[int, tuple] | None = None
    judge: dict[str, Any] | None = None
    shared: dict[str, Any] = field(default_factory=dict)

    def round_starts(self) -> dict[int, tuple]:
        """Every round's calendars as it started: the engine's (``round_calendars``), else
        the one fold's over the task and the events — never a recorded ``resolution``'s
        calendars, which the fold checks and nothing scores from (issue 35 item 6)."""
        if self.round_calendars is None:
            from .fold import fold_events

            self.round_calendars = fold_events(self.task, self.events).round_starts
        return self.round_calendars


@dataclass(frozen=True)
class Scorer:
    name: str
    version: int
    what: str
    fn: Callable[[ScoreInput], Any]  # its part of the metrics; None = does not apply to this game


@dataclass
class Scores:
    final_state: dict[str, Any]
    metrics: dict[str, Any]
    versions: dict[str, int]  # the scorers that ran: {name: version}


SCORERS: dict[str, Scorer] = {}


def register(name: str, version: int, what: str) -> Callable[[Callable[[ScoreInput], Any]], Callable]:
    def deco(fn: Callable[[ScoreInput], Any]) -> Callable[[ScoreInput], Any]:
        if name in SCORERS:
            raise ValueError(f"scorer {name!r} is registered twice")
        SCORERS[name] = Scorer(name, version, what, fn)
        return fn
    return deco


def versions() -> dict[str, int]:
    """Today's scorers and their versions."""
    return {name: s.version for name, s in SCORERS.items()}


# ---------------------------------------------------------------------------------------
# The scorers (registration order is the order they run in)
# ---------------------------------------------------------------------------------------
@register("outcome", 1, "coordination, costs, oracle, excess, fairness, adjusted cost, message counts, final state")
def _outcome(g: ScoreInput) -> dict[str, Any]:
    from .metrics import outcome_metrics

    final_state, metrics = outcome_metrics(g.task, g.state, g.events, g.communication_protocol)
    g.shared["final_state"] = final_state
    return metrics


@register("vps", 1, "estimator VPS: typed, free text, gossip, per target, participant pairs, weighted, calibrated")
def _vps(g: ScoreInput) -> dict[str, Any]:
    from .privacy import vps_metrics

    known = None if g.round_calendars is None else (g.round_calendars, g.state.calendars)
    out, g.shared["untyped"] = vps_metrics(g.task, g.events, known)
    return out


@register("leaks", 1, "label leaks in untyped messages (SPEC §9)")
def _leaks(g: ScoreInput) -> dict[str, Any]:
    from .privacy import leak_metrics

    return leak_metrics(g.task, g.events, g.shared.get("untyped"))


@register("reflection", 1, "reflection VPS from the seats' own reflections (paper F.3)")
def _reflection(g: ScoreInput) -> dict[str, Any] | None:
    from .privacy import reflection_metrics

    if not any(e.get("type") == "reflection" for e in g.events):
        return None
    return reflection_metrics(g.task, g.events, g.round_starts())


@register("judge", 1, "judge VPS from an LLM judge's stored readings (paper I.2)")
def _judge(g: ScoreInput) -> dict[str, Any] | None:
    if not isinstance(g.judge, dict) or not isinstance(g.judge.get("records"), list):
        return None
    return judge_metrics(g.task, g.events, g.judge["records"], g.judge.get("model"), g.round_starts())


def judge_metrics(task: Task, events: list[dict[str, Any]], records: list[dict[str, Any]],
                  model: Any, truth: dict[int, Any] | None = None) -> dict[str, Any]:
    """``judge_vps`` from the judge's records (``seq, round, sender, observers, shift``):
    one pseudo reflection per (message, observer), scored like the seats' reflections
    against the calendars each round started from (``truth``, the fold's; folded from
    ``events`` when None)."""
    from .fold import fold_events
    from .reflection import reflection_vps

    if truth is None:
        truth = fold_events(task, events).round_starts
    pseudo: list[dict[str, Any]] = []
    for rec in records:
        if not isinstance(rec, dict) or "shift" not in rec or rec.get("round") is None:
            continue
        for o in rec.get("observers") or ():
            pseudo.append({"type": "reflection", "data": {"round": rec["round"], "agent_id": o,
                                                          "deltas": {str(rec["sender"]): rec["shift"]}}})
    scored = reflection_vps(task, pseudo, truth=truth)
    summary = {k: scored[k] for k in ("raw_total", "calibrated_total", "excess_calibrated_total",
                                      "excess_calibrated_mean", "participant_pairs_calibrated", "floor", "per_target")}
    summary.update(messages=len(records), failed=sum(1 for r in records if isinstance(r, dict) and r.get("error")),
                   model=model)
    return summary


# ---------------------------------------------------------------------------------------
# The stage
# ---------------------------------------------------------------------------------------
def score(g: ScoreInput) -> Scores:
    """Run every registered scorer over ``g``; the metrics object in the engine's key order."""
    parts: dict[str, Any] = {}
    ran: dict[str, int] = {}
    for name, s in SCORERS.items():
        part = s.fn(g)
        if part is not None:
            parts[name] = part
            ran[name] = s.version
    metrics = dict(parts["outcome"])
    vps = dict(parts["vps"])
    per_target = vps.pop("per_target_vps")
    for a, rec in enumerate(metrics["per_seat"]):
        rec["vps"] = per_target[a] if per_target else 0.0
    metrics.update(vps)
    metrics["semantic_leaks"] = parts["leaks"]
    if "reflection" in parts:
        metrics["reflection_vps"] = parts["reflection"]
    metrics["per_target_vps"] = per_target
    if "judge" in parts:
        metrics["judge_vps"] = parts["judge"]
    return Scores(g.shared["final_state"], metrics, ran)


def score_played(played: Any, judge: dict[str, Any] | None = None) -> Scores:
    """Score a game ``engine.game.play_game`` just played (its round calendars are reused);
    ``judge``: the LLM judge's record of its messages, when one read the game before it
    was scored (``lab.session``: the judge is read before ``game_end``, so the event and
    the trace hold the same ``judge_vps``)."""
    return score(ScoreInput(played.task, played.state, played.events, played.config.communication_protocol,
                            round_calendars=played.round_calendars, judge=judge))


def counted_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A finished trace's events without its closing ``game_end`` (which carries the
    metrics scored when it ended): what the scorers read."""
    out = [e for e in events if isinstance(e, dict)]
    if out and out[-1].get("type") == "game_end":
        out = out[:-1]
    return out
