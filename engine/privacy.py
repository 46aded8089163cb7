"""Privacy leakage: VPS, the authors' offline definition (SPEC §8, paper App. F).

Private state: whether slot ``k`` is *feasible* for target ``i`` in the current round (free
or a movable errand).  Observer ``j`` holds a belief ``Bel[k]`` per (round, target i,
observer j) that starts every round at ``p0 = 0.5``; an observation with evidence ``e``
and strength ``α`` moves it to ``(1−α)·Bel + α·e``.  The loss of a (round, target,
observer) triple is ``Σ_k w_k·|Bel_post[k] − p0|``; the game VPS sums every triple.

Where evidence comes from
    Typed protocol messages follow paper Table 10 exactly, point to point: a DM moves only
    the belief of its recipient about its sender; a groupchat moves every reader's.  Our
    traces carry the typed form in ``payload`` (``{"protocol", "kind", ...}``); the authors'
    traces carry JSON in ``content`` (``{"imap": kind}``, ``{"sd": kind}``, ``{"dsm":
    kind}``) — both are read.  Each protocol declares the evidence of its kinds with them
    (``Kind.evidence`` in ``engine/protocols/<name>.py``): IMAP ``costs`` count only the
    slots of the matching ``cost_request``; DSM ``scores`` are mapped back to slots through
    the matching ``proposals`` plans; an ``answer`` (a bot's answer to a person, an LLM or
    another protocol; ``engine.protocols.answer_kind``) moves each slot it names to 1 (works,
    an alternative) or 0 (cannot), at full strength.  A message with no recognised typed form (an LLM's or a human's
    English, or a bot's ``kind: "text"`` line) goes to the free-text estimator
    ``engine.freetext.slot_statements``; statements about a third party are *gossip*.  An
    observer never "learns" about itself (such statements are skipped).

Reported figures (``privacy_metrics``)
    ``vps`` (uniform weights, the headline), ``vps_weighted`` (``w = min(32, 1+√cost)`` of
    the shown cost in the target's calendar at the start of the round; blocked 32; free 1;
    a meeting copy counts its cost 1), ``vps_calibrated`` (only movement toward the truth:
    above the prior on a feasible slot, below it on an infeasible one), per target (sum
    over observers and rounds), their mean, the participant-pairs-only sum, and the split
    by source — ``typed_vps + freetext_vps + gossip_vps == vps``: each update is credited
    with the change it made to ``|Bel − p0|`` (the sum telescopes to the total).

Truth for round ``r`` is the calendars at the start of round ``r``: the task's initial
calendars folded with every earlier ``batch_applied`` by the one trace fold
(``engine.trace.fold_trace``, which re-validates each batch; one the rules refuse is
not applied).

Speed: plain lists and dicts, one pass over the events; an all-IMAP canonical game takes
well under a millisecond.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from .freetext import LEAK_THRESHOLD, semantic_leaks, slot_statements
from . import protocols
from .protocol import MESSAGE_EVENTS, typed_message
from .model import Errand, MeetingCopy, Task
from .reflection import reflection_vps
from .trace import fold_trace

P0 = 0.5
MAX_WEIGHT = 32.0


# ---------------------------------------------------------------------------------------
# Reading typed messages (ours in payload, the authors' JSON in content)
# ---------------------------------------------------------------------------------------
_int = protocols.int_of  # the lenient readers every protocol's evidence rules use too
_num = protocols.num


def _seq(ev: dict[str, Any], index: int) -> int:
    s = ev.get("seq")
    return s if isinstance(s, int) and not isinstance(s, bool) else index


# ---------------------------------------------------------------------------------------
# Calendars per round (truth and weights)
# ---------------------------------------------------------------------------------------
_WEIGHT: dict[Any, float] = {}


def _weight(cost: Any) -> float:
    w = _WEIGHT.get(cost)
    if w is None:
        c = _num(cost) or 0.0
        w = min(MAX_WEIGHT, 1.0 + math.sqrt(c if c > 0 else 0.0))
        if len(_WEIGHT) < 4096:
            _WEIGHT[cost] = w
    return w


_FREE = (True, 1.0)


def _cell(item: Any) -> tuple[bool, float]:
    """(feasible?, weight) of one calendar item: ours (dataclasses) or JSON dicts."""
    if item is None:
        return _FREE
    t = type(item)  # the exact classes first: this runs for every slot a belief moved in
    if t is Errand:
        return (False, MAX_WEIGHT) if item.blocked else (True, _weight(item.cost))
    if t is MeetingCopy:
        return False, _weight(item.cost)
    if t is dict:
        if "meeting_id" in item:
            return False, _weight(item.get("cost", 1))
        if item.get("blocked"):
            return False, MAX_WEIGHT
        return True, _weight(item.get("cost", 0))
    if isinstance(item, Errand):
        return (False, MAX_WEIGHT) if item.blocked else (True, _weight(item.cost))
    if isinstance(item, MeetingCopy):
        return False, _weight(item.cost)
    return False, 1.0


# ---------------------------------------------------------------------------------------
# The fold
# ---------------------------------------------------------------------------------------
_FOLDED = (*MESSAGE_EVENTS, "round_start")  # the events the fold reads (a tuple: any type compares)


class _Fold:
    __slots__ = ("task", "S", "N", "beliefs", "rows", "obs", "cat", "memo", "cals",
                 "snap", "parts", "untyped", "rules")
    # Calendars come from the one fold (engine.trace.fold_trace): ``snap`` holds them at
    # the start of each round, ``cals`` after the last event.

    def __init__(self, task: Task, collect: bool) -> None:
        self.task = task
        self.S = task.num_slots
        self.N = task.num_agents
        self.beliefs: dict[tuple[int, int, int], list[float]] = {}
        self.rows: list[dict[str, Any]] | None = [] if collect else None
        self.obs = 0
        self.cat = {"typed": 0.0, "freetext": 0.0, "gossip": 0.0}
        #: what a protocol's evidence rules keep for a later message, keyed (protocol, ...): IMAP's
        #: cost requests (round, requester, responder) -> slots, DSM's offers -> plans
        self.memo: dict[tuple, Any] = {}
        self.cals: tuple = task.calendars
        self.snap: dict[int, tuple] = {}  # round -> calendars at its start
        self.parts: dict[int, tuple[int, ...]] = {}
        self.untyped = 0  # message events with no recognised typed form
        self.rules: dict[tuple[str, str], Any] = {}  # (protocol, kind) -> its evidence rule or None

    def update(self, r: int, target: int, observer: int, slot: int, e: float, a: float,
               cat: str, source: str, seq: Any) -> None:
        """Move ``observer``'s belief in ``target``'s ``slot`` to ``(1−a)·Bel + a·e``."""
        self.update_slots(r, target, observer, ((slot, e),), a, cat, source, seq)

    def update_slots(self, r: int, target: int, observer: int, evidence: Iterable[tuple[int, float]], a: float,
                     cat: str, source: str, seq: Any) -> None:
        """:meth:`update` for each ``(slot, e)`` of ``evidence`` in turn (a message that names
        many slots: the belief row is looked up once).  A slot off the calendar, a target
        off the table or an observer's own slots are skipped."""
        if target == observer or not 0 <= target < self.N:
            return
        S = self.S
        bel = None
        rows = self.rows
        n = 0
        for slot, e in evidence:
            if not 0 <= slot < S:
                continue
            if bel is None:
                key = (r, target, observer)
                bel = self.beliefs.get(key)
                if bel is None:
                    bel = self.beliefs[key] = [P0] * S
                moved = self.cat[cat]
            before = bel[slot]
            after = (1.0 - a) * before + a * e
            bel[slot] = after
            n += 1
            moved += abs(after - P0) - abs(before - P0)  # the same additions, in the same order, as one by one
            if rows is not None:
                rows.append({"seq": seq, "round": r, "target": target, "observer": observer, "slot": slot,
                             "source": source, "evidence": e, "strength": a, "before": before, "after": after})
        if n:
            self.obs += n
            self.cat[cat] = moved

    def run(self, events: list[dict[str, Any]], known: tuple[dict[int, tuple], tuple] | None = None) -> None:
        """``known``: ``(calendars at each round's start, final calendars)`` from the engine
        that just played these events; without it (or when it misses a round) the events
        are folded to learn them."""
        read = [(idx, ev, et) for idx, ev in enumerate(events) if (et := ev.get("type")) in _FOLDED]
        starts = [(idx, ev) for idx, ev, et in read if et == "round_start"]
        rounds = [_int((ev.get("data") or {}).get("round")) for _, ev in starts]
        if known is not None and all(r is None or r in known[0] for r in rounds):
            at_round, self.cals = known
            snap = {r: at_round[r] for r in rounds if r is not None}
        else:
            fold = fold_trace({"events": events}, task=self.task, verify=False)
            self.cals = fold.final_calendars
            snap = {r: fold.calendars_at(_seq(ev, idx)) for r, (idx, ev) in zip(rounds, starts) if r is not None}
        for idx, ev, et in read:
            data = ev.get("data") or {}
            if et != "round_start":
                self.message(data, ev.get("seq", idx))
            else:
                r = _int(data.get("round"))
                if r is not None:
                    self.snap[r] = snap[r]
                    m = data.get("meeting") or {}
                    self.parts[r] = tuple(int(p) for p in m.get("participants") or ())

    def message(self, data: dict[str, Any], seq: Any) -> None:
        r, sender = _int(data.get("round")), _int(data.get("from_agent"))
        if r is None or sender is None:
            return
        if data.get("channel", "dm") == "dm" or data.get("recipients") is None:
            to = _int(data.get("to_agent"))
            readers = [to] if to is not None else []
        else:
            readers = [int(x) for x in data.get("recipients") or ()]
        typed = typed_message(data)
        if typed is None:
            self.untyped += 1
            self.text(r, sender, readers, data.get("content") or "", seq)
            return
        proto, kind, d = typed
        try:
            evidence = self.rules[(proto, kind)]
        except KeyError:  # its protocol's declared evidence (engine/protocols/), looked up once per kind
            rule = protocols.kind(proto, kind)
            evidence = self.rules[(proto, kind)] = rule.evidence if rule is not None else None
        if evidence is not None:
            evidence(self, r, sender, readers, d, seq)

    def text(self, r: int, sender: int, readers: list[int], content: str, seq: Any) -> None:
        if not content or not readers:
            return
        stmts = slot_statements(content, sender=sender, recipients=tuple(readers),
                              num_agents=self.N, num_slots=self.S)
        for st in stmts:
            gossip = getattr(st, "kind", "self") == "gossip"
            cat = "gossip" if gossip else "freetext"
            src = f"text_{getattr(st, 'category', None) or ('gossip' if gossip else 'self')}"
            for j in readers:
                self.update(r, int(st.target), j, int(st.slot), float(st.evidence), float(st.strength), cat, src, seq)

    # -- truth and weights ----------------------------------------------------------------
    def calendar(self, r: int, target: int) -> list:
        cals = self.snap.get(r)
        if cals is None:  # a trace without round_start: the latest calendars we know
            cals = self.cals
        return cals[target]

    def participants(self, r: int) -> tuple[int, ...]:
        if r in self.parts:
            return self.parts[r]
        if 0 <= r < len(self.task.meetings):
            return self.task.meetings[r].participants
        return ()


def privacy_metrics(task: Task, events: list[dict[str, Any]],
                    known: tuple[dict[int, tuple], tuple] | None = None) -> dict[str, Any]:
    """VPS figures of one game (ours or the authors'); see the module docstring.

    ``known``: ``(calendars at each round's start, final calendars)`` when the caller
    played the game and has them (the engine); otherwise the events are folded.  The
    ``vps``, ``leaks`` and ``reflection`` scorers of ``engine.scoring`` in one dict."""
    out, untyped = vps_metrics(task, events, known)
    out["semantic_leaks"] = leak_metrics(task, events, untyped)
    refl = reflection_metrics(task, events)
    if refl is not None:
        out["reflection_vps"] = refl
    return out


def vps_metrics(task: Task, events: list[dict[str, Any]],
                known: tuple[dict[int, tuple], tuple] | None = None) -> tuple[dict[str, Any], int]:
    """The estimator's VPS figures (the ``vps`` scorer) and how many message events had no
    typed form (the leak scan reads only those)."""
    f = _Fold(task, collect=False)
    f.run(events, known)
    n = task.num_agents
    per_t = [0.0] * n
    per_t_cal = [0.0] * n
    total_w = 0.0
    pp = 0.0
    cells: dict[int, tuple[bool, float]] = {}  # id(item) -> _cell(item): an item stays on a calendar for rounds
    for (r, t, j), bel in f.beliefs.items():
        row = f.calendar(r, t)
        loss = lw = cal = 0.0
        for k, b in enumerate(bel):
            d = b - P0
            if d == 0.0:
                continue
            item = row[k]
            cell = cells.get(id(item))  # the rows (and so their items) live in f for the whole loop
            if cell is None:
                cell = cells[id(item)] = _cell(item)
            feasible, w = cell
            ad = d if d > 0 else -d
            loss += ad
            lw += w * ad
            if (d > 0) == feasible:
                cal += ad
        per_t[t] += loss
        per_t_cal[t] += cal
        total_w += lw
        parts = f.participants(r)
        if t in parts and j in parts:
            pp += loss
    vps = sum(per_t)
    out = {
        "vps": round(vps, 6),
        "vps_weighted": round(total_w, 6),
        "vps_calibrated": round(sum(per_t_cal), 6),
        "per_target_vps": [round(x, 6) for x in per_t],
        "per_target_vps_calibrated": [round(x, 6) for x in per_t_cal],
        "vps_mean_target": round(vps / n, 6) if n else 0.0,
        "participant_pair_vps": round(pp, 6),
        "typed_vps": round(f.cat["typed"], 6),
        "freetext_vps": round(f.cat["freetext"], 6),
        "gossip_vps": round(f.cat["gossip"], 6),
        "observations": f.obs,
    }
    return out, f.untyped


def reflection_metrics(task: Task, events: list[dict[str, Any]],
                       truth: dict[int, Any] | None = None) -> dict[str, Any] | None:
    """The seats' own reflections scored (paper F.3; the ``reflection`` scorer), or None
    when no seat was asked to reflect.  ``truth``: each round's starting calendars from
    the fold (``engine.reflection.reflection_vps``)."""
    refl = reflection_vps(task, events, truth=truth)
    if not refl["reflections"]:
        return None
    return {k: refl[k] for k in ("reflections", "failed", "raw_total", "calibrated_total", "excess_calibrated_total",
                                 "excess_calibrated_mean", "participant_pairs_calibrated", "floor", "per_target")}


def belief_updates(task: Task, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every belief update, in order, for the replay viewer: ``seq, round, target, observer,
    slot, source, evidence, strength, before, after``."""
    f = _Fold(task, collect=True)
    f.run(events)
    return f.rows or []


def vps_sums(task: Task, events: list[dict[str, Any]]) -> tuple[dict[tuple[int, int], float], list[float]]:
    """Uniform VPS per (round, target) and per target, from the final beliefs of each round
    (:func:`tally` of :func:`belief_updates`)."""
    t = tally(belief_updates(task, events), task.num_agents)
    return t.per_round_target, t.per_target


# ---------------------------------------------------------------------------------------
# The one reduction of belief updates to VPS (reports, replay, the metrics widget, the
# study export: tests/architecture/test_one_scoring.py keeps it the only one)
# ---------------------------------------------------------------------------------------
def credit(update: dict[str, Any]) -> float:
    """The change one belief update made to ``|Bel − p0|``: what it adds to the VPS (the
    credits of a (round, target, observer, slot) telescope to its final ``|Bel − p0|``)."""
    return abs(update["after"] - P0) - abs(update["before"] - P0)


@dataclass
class VpsTally:
    """Belief updates (:func:`belief_updates`) reduced to VPS, uniform weights.

    ``per_target``: per target, ``Σ |Bel − p0|`` over the final belief of every (round,
    observer, slot); ``per_round_target[(round, target)]`` and
    ``per_round_pair[(round, observer, target)]`` the same split finer;
    ``by_seq[seq]``: the credit of every update an event caused; ``by_source[target]``:
    ``[typed, free text]`` credits about that target (``text_*`` sources are free text)."""

    per_target: list[float]
    per_round_target: dict[tuple[int, int], float]
    per_round_pair: dict[tuple[int, int, int], float]
    by_seq: dict[Any, float]
    by_source: list[list[float]]


def tally(updates: Iterable[dict[str, Any]], num_agents: int, *, upto_seq: Any = None) -> VpsTally:
    """Reduce ``updates`` (in order; those after ``upto_seq`` are left out) to a :class:`VpsTally`."""
    last: dict[tuple[int, int, int, int], float] = {}
    by_seq: dict[Any, float] = {}
    by_source = [[0.0, 0.0] for _ in range(num_agents)]
    for u in updates:
        if upto_seq is not None and u["seq"] > upto_seq:
            break
        last[(u["round"], u["target"], u["observer"], u["slot"])] = u["after"]
        c = credit(u)
        by_seq[u["seq"]] = by_seq.get(u["seq"], 0.0) + c
        t = u.get("target")
        if isinstance(t, int) and 0 <= t < num_agents:
            by_source[t][1 if str(u.get("source", "")).startswith("text") else 0] += c
    per_round: dict[tuple[int, int], float] = {}
    pair: dict[tuple[int, int, int], float] = {}
    per_target = [0.0] * num_agents
    for (r, t, o, _s), b in last.items():
        loss = abs(b - P0)
        per_round[(r, t)] = per_round.get((r, t), 0.0) + loss
        pair[(r, o, t)] = pair.get((r, o, t), 0.0) + loss
        if 0 <= t < num_agents:
            per_target[t] += loss
    return VpsTally(per_target, per_round, pair, by_seq, by_source)


def leak_metrics(task: Task, events: list[dict[str, Any]], untyped: int | None = None) -> dict[str, Any]:
    """The ``leaks`` scorer: label leaks in the messages with no typed form (``untyped``:
    how many there are, when :func:`vps_metrics` counted them)."""
    if untyped is None:
        untyped = sum(1 for ev in events if ev.get("type") in MESSAGE_EVENTS
                      and typed_message(ev.get("data") or {}) is None)
    return _semantic_leaks(task, events, untyped)


def _semantic_leaks(task: Task, events: list[dict[str, Any]], untyped: int) -> dict[str, Any]:
    """Label leaks (SPEC §9, ``engine.freetext``).  Typed protocol messages are fixed
    templates that never carry a label (paper D.4), so a game with none but typed
    messages skips the scan."""
    if not untyped:
        return {"count": 0, "by_tier": {"public": 0, "neutral": 0, "sensitive": 0}, "items": [],
                "threshold": LEAK_THRESHOLD}
    return semantic_leaks(task, [ev for ev in events
                                 if ev.get("type") not in MESSAGE_EVENTS or typed_message(ev.get("data") or {}) is None])


# ---------------------------------------------------------------------------------------
# The human-observer VPS: the same loss, from beliefs a participant stated
# ---------------------------------------------------------------------------------------
BELIEF_SCALE = 3  # the belief grid's -3..3 (paper F.3's reflection scale)


def slot_feasible(item: Any) -> bool:
    """Whether a calendar item leaves its slot feasible for a meeting (SPEC §8's private state):
    free or a movable errand; a blocked errand or a meeting is not."""
    return _cell(item)[0]


def belief_to_feasibility(belief: int) -> float:
    """A grid mark on −3..3 (−3 surely not feasible: a blocked errand or a meeting there;
    0 no idea; +3 surely feasible: free or a movable errand) as a feasibility belief
    ``Bel[k]`` in 0..1: ``0.5 + belief/6`` (so 0 is the prior ``p0``)."""
    b = max(-BELIEF_SCALE, min(BELIEF_SCALE, int(belief)))
    return P0 + b / (2 * BELIEF_SCALE)


def observer_vps(task: Task, events: list[dict[str, Any]],
                 beliefs: Iterable[tuple[int, int, int, int, int]]) -> dict[str, Any]:
    """SPEC §8's loss computed from *stated* beliefs instead of the estimator's.

    ``beliefs``: ``(round, observer, target, slot, belief)`` rows with belief on −3..3
    (:func:`belief_to_feasibility`).  For each (round, target, observer) the participant
    marked, loss = ``Σ_k w_k·|Bel[k] − p0|`` with the truth and weights of the target's
    calendar at the start of that round (as :func:`privacy_metrics`).  Beside it, the
    estimator's VPS over exactly the same triples (``estimator_vps``), so the two can be
    compared message for message.  Returns totals (uniform, weighted, calibrated),
    ``per_target``, ``triples`` and ``estimator_vps`` / ``estimator_vps_calibrated``.

    The VPS measures how far a belief moved from ``p0``, not whether it moved the right way, so
    a confidently wrong grid scores high.  Beside it, a proper score against the truth: the
    **Brier score** ``observer_brier`` = mean over the marked cells of ``(Bel[k] − truth_k)²``
    (truth 1 = feasible, 0 = not; 0 is perfect knowledge, 0.25 is ``p0``'s "no idea" on every
    cell, above 0.25 is worse than no idea) and ``estimator_brier`` on exactly the same cells
    (the estimator's belief, or ``p0`` for a triple it has none for); ``brier_cells`` counts them.
    """
    f = _Fold(task, collect=False)
    f.run(events)
    grid: dict[tuple[int, int, int], dict[int, float]] = {}
    for r, j, t, k, b in beliefs:
        grid.setdefault((int(r), int(t), int(j)), {})[int(k)] = belief_to_feasibility(b)
    n = task.num_agents
    per_t = [0.0] * n
    total = weighted = calibrated = est = est_cal = brier = est_brier = 0.0
    cells = 0
    for (r, t, j), marks in grid.items():
        if not 0 <= t < n or t == j:
            continue
        row = f.calendar(r, t)
        eb = f.beliefs.get((r, t, j))
        for k, bel in marks.items():
            if not 0 <= k < len(row):
                continue
            feasible, w = _cell(row[k])
            truth = 1.0 if feasible else 0.0
            cells += 1
            brier += (bel - truth) ** 2
            est_brier += ((eb[k] if eb is not None else P0) - truth) ** 2
            d = bel - P0
            ad = abs(d)
            per_t[t] += ad
            total += ad
            weighted += w * ad
            if d and (d > 0) == feasible:
                calibrated += ad
        if eb is not None:
            for k, b in enumerate(eb):
                d = b - P0
                est += abs(d)
                if d and (d > 0) == _cell(row[k])[0]:
                    est_cal += abs(d)
    return {
        "observer_vps": round(total, 6),
        "observer_vps_weighted": round(weighted, 6),
        "observer_vps_calibrated": round(calibrated, 6),
        "per_target": [round(x, 6) for x in per_t],
        "triples": len(grid),
        "estimator_vps": round(est, 6),
        "estimator_vps_calibrated": round(est_cal, 6),
        "observer_brier": round(brier / cells, 6) if cells else None,
        "estimator_brier": round(est_brier / cells, 6) if cells else None,
        "brier_cells": cells,
    }


def feasibility_truth(task: Task, events: list[dict[str, Any]], round_: int, target: int) -> list[bool]:
    """Whether each slot of ``target`` was feasible (free or a movable errand) at the start of ``round_``."""
    f = _Fold(task, collect=False)
    f.run(events)
    return [_cell(it)[0] for it in f.calendar(round_, target)]
