"""Reflection calls and reflection-calibrated VPS (SPEC §8, paper F.3).

After each round's RESOLUTION the game loop may ask every persona that has an
``async reflect(obs: ReflectionObservation) -> dict | None`` method how its beliefs about
the *other* seats' calendars moved during the round: one signed integer in ``-3..3`` per
other seat and slot, ``+`` = "more sure the slot was occupied", ``-`` = "more sure it was
free".  The call is measurement only — an LLM persona makes it outside its game thread —
and the loop records the answer as a ``reflection`` event (see :func:`reflection_event_data`).
A persona without the method, or one returning ``None``, is skipped.

:func:`reflection_vps` turns those events into the paper's slot-equivalent VPS:

* a ``±3`` move counts as one slot (``|Δ| / 3`` per slot);
* *raw* counts every move; *calibrated* counts only moves toward the truth — ``Δ > 0`` on
  a slot that was occupied (an errand or a meeting) at the start of the round, ``Δ < 0``
  on a slot that was free; a move the wrong way counts 0;
* per game-target: the calibrated total over observers and rounds, minus the fixed
  five-slot communication floor (never below 0) = ``excess_calibrated``.

The truth for round ``r`` is the calendars at the start of round ``r`` as the one fold
(``engine.fold``) rebuilds them from the task and the batches — never the calendars a
``resolution`` event recorded, which are what the fold checks, not what it trusts (issue 35
item 6).  The scoring stage passes them in (``truth``); without it the events are folded
here.  This is stored beside the free-text estimator
(:mod:`engine.freetext`) and never replaces it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .observe import Delivered, MeetingView, SeatView

__all__ = [
    "REFLECTION_FLOOR",
    "ReflectionObservation",
    "clean_deltas",
    "reflection_event_data",
    "reflection_vps",
]

#: Slot-equivalents subtracted from each game-target total (paper F.3).
REFLECTION_FLOOR = 5.0
MAX_DELTA = 3


@dataclass(frozen=True, slots=True)
class ReflectionObservation:
    """What a seat is asked after a round: its own view plus the round it just played.

    ``view`` is the seat's calendar after RESOLUTION; ``round_messages`` everything
    delivered to it during the round; ``targets`` the other seats to report on.  Nothing
    here is beyond the seat's own observation (SPEC §5).
    """

    view: SeatView
    round: int
    meeting: MeetingView
    round_messages: tuple[Delivered, ...]
    targets: tuple[int, ...]
    is_participant: bool
    phase: str = "RESOLUTION"
    #: the seat's own view as the round started (before anyone moved anything): the moment
    #: the privacy measure (SPEC §8) takes a slot's truth; None when not known
    start_view: SeatView | None = None

    @property
    def num_slots(self) -> int:
        return self.view.num_slots


def clean_deltas(raw: Any, *, seat: int, num_agents: int, num_slots: int) -> tuple[dict[str, list[int]], list[str]]:
    """Validate a reflection answer: ``{target: [num_slots ints in -3..3]}``.

    Keys may be ints or numeric strings; the seat itself and unknown seats are dropped;
    values are rounded and clamped, short lists padded with 0, long lists cut.  Returns
    the cleaned mapping (string keys, JSON-ready) and a list of plain-word problems.
    """
    problems: list[str] = []
    out: dict[str, list[int]] = {}
    if raw is None:
        return out, problems
    if not isinstance(raw, Mapping):
        return out, [f"deltas must be an object keyed by agent id, got {type(raw).__name__}"]
    for key, values in raw.items():
        try:
            target = int(str(key).strip().lower().removeprefix("agent").strip())
        except ValueError:
            problems.append(f"unknown target {key!r}")
            continue
        if target == seat or not 0 <= target < num_agents:
            problems.append(f"target {target} is not another agent")
            continue
        if not isinstance(values, (list, tuple)):
            problems.append(f"deltas for agent {target} must be a list")
            continue
        row: list[int] = []
        for v in values[:num_slots]:
            try:
                x = int(round(float(v)))
            except (TypeError, ValueError):
                problems.append(f"agent {target}: {v!r} is not a number")
                x = 0
            if abs(x) > MAX_DELTA:
                problems.append(f"agent {target}: {x} clamped to ±{MAX_DELTA}")
                x = max(-MAX_DELTA, min(MAX_DELTA, x))
            row.append(x)
        if len(values) != num_slots:
            problems.append(f"agent {target}: {len(values)} values for {num_slots} slots")
        row += [0] * (num_slots - len(row))
        out[str(target)] = row
    return dict(sorted(out.items(), key=lambda kv: int(kv[0]))), problems


def reflection_event_data(answer: Mapping[str, Any] | None, *, seat: int, num_agents: int, num_slots: int,
                          model: str | None) -> dict[str, Any]:
    """The ``data`` of a ``reflection`` event (besides round/turn/phase/agent_id)."""
    answer = dict(answer or {})
    deltas, problems = clean_deltas(answer.get("deltas"), seat=seat, num_agents=num_agents, num_slots=num_slots)
    return {
        "model": model,
        "deltas": deltas,
        "problems": problems,
        "text": answer.get("text"),
        "usage": answer.get("usage"),
        "latency_ms": answer.get("latency_ms"),
        "raw_api_response": answer.get("raw"),
        "prompt_sent": answer.get("prompt"),
        "error": answer.get("error"),
        "error_detail": answer.get("error_detail"),
    }


def _occupied(calendars: Sequence[Sequence[Any]]) -> list[list[bool]]:
    return [[it is not None for it in cal] for cal in calendars]


def reflection_vps(task, events: Sequence[Mapping[str, Any]], *, floor: float = REFLECTION_FLOOR,
                   truth: Mapping[int, Any] | None = None) -> dict[str, Any]:
    """Reflection-calibrated VPS of one game (paper F.3); see the module docstring.

    Returns ``{"reflections", "failed", "raw_total", "calibrated_total",
    "excess_calibrated_total", "excess_calibrated_mean", "participant_pairs_calibrated",
    "floor", "per_target": [{target, raw, calibrated, excess_calibrated}], "pair_rounds":
    [{round, observer, target, raw, calibrated, observer_is_participant,
    target_is_participant}]}``.  With no reflection events every total is 0 and
    ``reflections`` is 0 — callers show "not measured" then.  ``truth``: round -> the
    calendars as it started, from the fold (``Fold.round_starts``); folded here when None.
    """
    n, s_count = task.num_agents, task.num_slots
    # the calendars each round started from, by round; made occupied-grids only if a reflection needs them
    if truth is None:
        from .fold import fold_events

        truth = fold_events(task, [e for e in events if isinstance(e, dict)]).round_starts
    grids: dict[int, list[list[bool]]] = {}
    participants = {r: set(m.participants) for r, m in enumerate(task.meetings)}
    raw_t = [0.0] * n
    cal_t = [0.0] * n
    pair_rounds: list[dict[str, Any]] = []
    reflections = failed = 0
    part_pairs = 0.0
    for ev in events:
        typ = ev.get("type")
        d = ev.get("data") or {}
        if typ != "reflection":
            continue
        reflections += 1
        if d.get("error"):
            failed += 1
        r = int(d["round"])
        observer = d.get("agent_id")
        if r not in truth or observer is None:
            continue
        occ = grids.get(r)
        if occ is None:
            occ = grids[r] = _occupied(truth[r])
        for key, row in (d.get("deltas") or {}).items():
            target = int(key)
            if target == observer or not 0 <= target < n:
                continue
            raw = cal = 0.0
            for k, delta in enumerate(row[:s_count]):
                if not delta:
                    continue
                move = abs(delta) / MAX_DELTA
                raw += move
                if (delta > 0) == occ[target][k]:
                    cal += move
            raw_t[target] += raw
            cal_t[target] += cal
            o_p, t_p = observer in participants.get(r, ()), target in participants.get(r, ())
            if o_p and t_p:
                part_pairs += cal
            if raw:
                pair_rounds.append({"round": r, "observer": observer, "target": target, "raw": round(raw, 6),
                                    "calibrated": round(cal, 6), "observer_is_participant": o_p,
                                    "target_is_participant": t_p})
    per_target = [{"target": i, "raw": round(raw_t[i], 6), "calibrated": round(cal_t[i], 6),
                   "excess_calibrated": round(max(0.0, cal_t[i] - floor), 6)} for i in range(n)]
    excess = [p["excess_calibrated"] for p in per_target]
    return {
        "reflections": reflections,
        "failed": failed,
        "raw_total": round(sum(raw_t), 6),
        "calibrated_total": round(sum(cal_t), 6),
        "excess_calibrated_total": round(sum(excess), 6),
        "excess_calibrated_mean": round(sum(excess) / n, 6) if n else 0.0,
        "participant_pairs_calibrated": round(part_pairs, 6),
        "floor": floor,
        "per_target": per_target,
        "pair_rounds": pair_rounds,
    }
