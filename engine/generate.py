"""Scenario generation (SPEC §2, paper A.1): backward from a witness schedule.

:func:`generate_scenario` is a pure function of its arguments: it draws from one
``random.Random(seed)`` and nothing else, so the same arguments give a byte-identical row
on every machine and in every process.  It runs in two parts:

* :func:`_build_structure` — participants, speaker orders, witness slots, errands,
  blocked errands (everything but costs), then :func:`_draw_costs` from the same random
  stream, which is drawn **last**; so a uniform and a varied scenario with the same seed
  and structure arguments share their structure exactly and differ only in costs (the
  canonical suite relies on this for its twins);
* :func:`annotate` — fills ``optimal``, ``greedy``, ``difficulty``, ``difficulty_score``
  and ``calbench.oracle`` from :mod:`engine.oracle` (imported lazily).

Construction, per SPEC §2:

1. participants: balanced lists (each agent in ``floor(M·p/N)`` or ``ceil(M·p/N)``
   meetings, the agents with one more drawn from the seed), meetings in a shuffled order;
   a speaker order per meeting whose first speakers are spread as evenly as the
   participant lists allow (paper G.2), the rest of the order shuffled;
2. a witness slot per meeting, uniformly among the slots not yet used by any of its
   participants (meetings with disjoint participants may share a slot index);
3. per agent ``i`` with ``w_i`` witness slots: ``n_i = min(floor(S·density_i), S - w_i)``
   errands.  ``S - w_i`` is the most the witness allows: every errand on a witness slot
   needs a free *absorbing* slot off the witness slots, so ``n_i + w_i <= S`` (density 1.0
   therefore means "as full as the witness allows", as in the authors' files, whose
   density-1.0 rows hold 13 errands for 3 meetings on 16 slots).  With
   ``force_witness_errand`` the agent's witness slots get errands first; the others are
   drawn uniformly from the remaining slots;
4. ``blocked_i`` errands off the witness slots are marked blocked (immovable);
5. costs: ``cost_values`` (uniform ``[1]``, varied ``[1, 10, 100]`` by default); each
   agent's errands, in slot order, get a shuffled balanced multiset of the values (each
   value ``floor(n_i/K)`` times, the remainder drawn without replacement).

Errand ids are integers, unique in the scenario: agent 0's errands are ``1..n_0`` in slot
order, agent 1's continue, and so on.  Meeting ids are ``1..M`` in round order.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import random
from dataclasses import dataclass
from typing import Any, Sequence

from engine.labelbank import assign_labels
from engine.model import COST_MODES, Errand, Task, TaskError

__all__ = [
    "GENERATOR_VERSION",
    "DEFAULT_VARIED_COSTS",
    "generate_scenario",
    "annotate",
    "errand_counts",
]

#: ``calbench.suite_version`` of a scenario made by :func:`generate_scenario` outside a suite.
GENERATOR_VERSION = "generator-1"
#: Largest agents / slots / meetings a scenario may have (the oracle and the feasible
#: fraction are benchmarked up to N=50, S=96, M=50; beyond a few hundred nothing is usable).
MAX_SIZE = 500
#: the seats of a generated scenario when none are asked for (``calbench-play`` with no task)
DEFAULT_AGENTS = 5
#: Shown cost values of a varied scenario (paper §3).
DEFAULT_VARIED_COSTS: tuple[int, ...] = (1, 10, 100)
_EPS = 1e-9


# ---------------------------------------------------------------------------------
# Argument checking
# ---------------------------------------------------------------------------------
def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _per_agent(name: str, value: Any, n: int, check) -> list:
    """A shared value or one per agent -> a list of ``n`` values, each checked."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise TaskError(f"{name} has {len(value)} entries but num_agents={n}; give one number or one per agent.")
        vals = list(value)
    else:
        vals = [value] * n
    for i, v in enumerate(vals):
        where = f"{name}[{i}]" if isinstance(value, (list, tuple)) else name
        check(where, v)
    return vals


def _check_density(where: str, v: Any) -> None:
    if not _is_number(v) or not 0.0 <= v <= 1.0:
        raise TaskError(f"{where}={v!r} must be a number between 0 and 1.")


def _check_blocked(where: str, v: Any) -> None:
    if not _is_int(v) or v < 0:
        raise TaskError(f"{where}={v!r} must be a whole number of blocked errands, 0 or more.")


def _cost_values(cost_mode: str, cost_values: Sequence[int] | None) -> list[int]:
    if cost_mode not in COST_MODES:
        raise TaskError(f"cost_mode={cost_mode!r} must be 'uniform' or 'varied'.")
    if cost_values is None:
        return [1] if cost_mode == "uniform" else list(DEFAULT_VARIED_COSTS)
    if isinstance(cost_values, (str, bytes)) or not isinstance(cost_values, (list, tuple)):
        raise TaskError(f"cost_values={cost_values!r} must be a list of positive whole numbers.")
    if not cost_values or any(not _is_int(c) or c < 1 for c in cost_values):
        raise TaskError(f"cost_values={list(cost_values)!r} must be a non-empty list of positive whole numbers.")
    vals = sorted(set(cost_values))
    if len(vals) != len(cost_values):
        raise TaskError(f"cost_values={list(cost_values)!r} must not repeat a value.")
    if cost_mode == "uniform" and len(vals) != 1:
        raise TaskError(f"cost_mode='uniform' takes exactly one cost value, got {vals}.")
    if cost_mode == "varied" and len(vals) < 2:
        raise TaskError(f"cost_mode='varied' needs at least two cost values, got {vals}.")
    return vals


def _check_participant_lists(lists: Any, num_agents: int, num_meetings: int) -> list[tuple[int, ...]]:
    if isinstance(lists, (str, bytes)) or not isinstance(lists, (list, tuple)):
        raise TaskError("participant_lists must be a list with one list of agent ids per meeting.")
    if len(lists) != num_meetings:
        raise TaskError(f"participant_lists has {len(lists)} entries but num_meetings={num_meetings}.")
    out = []
    for k, parts in enumerate(lists):
        if isinstance(parts, (str, bytes)) or not isinstance(parts, (list, tuple)) or len(parts) < 2:
            raise TaskError(f"participant_lists[{k}] must list two or more agent ids (a meeting is between "
                            "two or more agents).")
        if any(not _is_int(a) or not 0 <= a < num_agents for a in parts):
            raise TaskError(f"participant_lists[{k}]={list(parts)!r} must hold agent ids in 0..{num_agents - 1}.")
        if len(set(parts)) != len(parts):
            raise TaskError(f"participant_lists[{k}]={list(parts)!r} names an agent twice.")
        out.append(tuple(sorted(parts)))
    return out


def errand_counts(num_slots: int, densities: Sequence[float], witness_counts: Sequence[int]) -> list[int]:
    """Errands per agent: ``min(floor(S·density_i), S - w_i)`` (see the module docstring)."""
    return [
        max(0, min(math.floor(num_slots * d + _EPS), num_slots - w))
        for d, w in zip(densities, witness_counts)
    ]


@dataclass(frozen=True)
class _Args:
    seed: int
    num_agents: int
    num_slots: int
    num_meetings: int
    densities: list[float]
    blocked: list[int]
    cost_mode: str
    cost_values: list[int]
    participants_per_meeting: int
    participant_lists: list[tuple[int, ...]] | None
    force_witness_errand: bool
    # as given, for params
    density_param: Any
    blocked_param: Any


def _validate(
    seed: Any,
    num_agents: Any,
    num_slots: Any,
    num_meetings: Any,
    density: Any,
    blocked: Any,
    cost_mode: Any,
    participants_per_meeting: Any,
    participant_lists: Any,
    force_witness_errand: Any,
    cost_values: Any,
) -> _Args:
    if not _is_int(seed):
        raise TaskError(f"seed={seed!r} must be a whole number.")
    for name, v in (("num_agents", num_agents), ("num_slots", num_slots), ("num_meetings", num_meetings)):
        if not _is_int(v) or v < 1:
            raise TaskError(f"{name}={v!r} must be a whole number, at least 1.")
        if v > MAX_SIZE:
            raise TaskError(f"{name}={v} is more than this generator supports (at most {MAX_SIZE}).")
    if not isinstance(force_witness_errand, bool):
        raise TaskError(f"force_witness_errand={force_witness_errand!r} must be true or false.")
    densities = _per_agent("density", density, num_agents, _check_density)
    blocked_l = _per_agent("blocked", blocked, num_agents, _check_blocked)
    values = _cost_values(cost_mode, cost_values)
    lists = None
    if participant_lists is not None:
        lists = _check_participant_lists(participant_lists, num_agents, num_meetings)
        counts = [sum(1 for parts in lists if a in parts) for a in range(num_agents)]
        p = len(lists[0]) if len({len(x) for x in lists}) == 1 else max(len(x) for x in lists)
    else:
        if not _is_int(participants_per_meeting) or participants_per_meeting < 2:
            raise TaskError(f"participants_per_meeting={participants_per_meeting!r} must be a whole number, at least 2 "
                            "(a meeting is between two or more agents).")
        if participants_per_meeting > num_agents:
            raise TaskError(
                f"participants_per_meeting={participants_per_meeting} exceeds num_agents={num_agents}."
            )
        p = participants_per_meeting
        # upper bound of every agent's meeting count (balanced lists): seed-independent checks
        counts = [math.ceil(num_meetings * p / num_agents)] * num_agents
    for a, w in enumerate(counts):
        if w > num_slots:
            raise TaskError(
                f"agent {a} takes part in {w} meetings but a calendar has only {num_slots} slots; "
                "use more slots or fewer meetings."
            )
    ns = errand_counts(num_slots, densities, counts)
    for a, (n, w, b) in enumerate(zip(ns, counts, blocked_l)):
        off = n - min(n, w)
        if b > off:
            raise TaskError(
                f"blocked={b} for agent {a} is too many: with density {densities[a]} it has {n} errands "
                f"on {num_slots} slots, {min(n, w)} of them on its witness slots, so at most {off} can be blocked."
            )
    return _Args(
        seed, num_agents, num_slots, num_meetings, densities, blocked_l, cost_mode, values, p, lists,
        force_witness_errand, density_param=list(density) if isinstance(density, tuple) else density,
        blocked_param=list(blocked) if isinstance(blocked, tuple) else blocked,
    )


# ---------------------------------------------------------------------------------
# Participants and speaker orders
# ---------------------------------------------------------------------------------
def _balanced_participants(rng: random.Random, n: int, m: int, p: int) -> list[tuple[int, ...]]:
    """``m`` meetings of ``p`` distinct agents, each agent in ``floor`` or ``ceil(m·p/n)``.

    Largest-remaining-quota first (ties random) never gets stuck: an agent whose quota
    equals the meetings left is always among the ``p`` picked (Gale–Ryser).
    """
    total = m * p
    quota = [total // n] * n
    for a in rng.sample(range(n), total % n):
        quota[a] += 1
    lists = []
    for _ in range(m):
        keys = [rng.random() for _ in range(n)]
        pick = sorted(range(n), key=lambda a: (-quota[a], keys[a]))[:p]
        for a in pick:
            quota[a] -= 1
        lists.append(tuple(sorted(pick)))
    rng.shuffle(lists)
    return lists


def _first_speakers(rng: random.Random, lists: Sequence[tuple[int, ...]], n: int) -> list[int]:
    """One first speaker per meeting (a participant), spread as evenly as possible.

    Greedy (fewest first turns so far, ties random), then cost-reducing alternating
    paths until none is left: the result minimises the sum of squared counts, which is
    the most even spread the participant lists allow (optimal semi-matching).
    """
    tiebreak = [rng.random() for _ in range(n)]
    count = [0] * n
    first: list[int] = []
    for parts in lists:
        a = min(parts, key=lambda x: (count[x], tiebreak[x]))
        first.append(a)
        count[a] += 1
    improved = True
    while improved:
        improved = False
        for start in sorted(range(n), key=lambda x: (-count[x], tiebreak[x])):
            parent: dict[int, tuple[int, int]] = {start: (-1, -1)}
            frontier = [start]
            found = -1
            while frontier and found < 0:
                nxt = []
                for x in frontier:
                    for k, parts in enumerate(lists):
                        if first[k] != x:
                            continue
                        for y in parts:
                            if y in parent:
                                continue
                            parent[y] = (x, k)
                            if count[y] <= count[start] - 2:
                                found = y
                                break
                            nxt.append(y)
                        if found >= 0:
                            break
                    if found >= 0:
                        break
                frontier = nxt
            if found >= 0:
                y = found
                while y != start:
                    x, k = parent[y]
                    first[k] = y
                    y = x
                count[start] -= 1
                count[found] += 1
                improved = True
                break
    return first


def _speaker_orders(rng: random.Random, lists: Sequence[tuple[int, ...]], n: int) -> list[tuple[int, ...]]:
    firsts = _first_speakers(rng, lists, n)
    orders = []
    for parts, first in zip(lists, firsts):
        rest = [a for a in parts if a != first]
        rng.shuffle(rest)
        orders.append((first, *rest))
    return orders


# ---------------------------------------------------------------------------------
# Structure and costs
# ---------------------------------------------------------------------------------
@dataclass
class _Structure:
    args: _Args
    participants: list[tuple[int, ...]]
    speaker_orders: list[tuple[int, ...]]
    witness: list[int]  # slot per meeting, in meeting order
    errand_slots: list[list[int]]  # per agent, ascending
    blocked_slots: list[set[int]]  # per agent
    rng: random.Random  # the stream after the structure; costs are drawn from it


#: Search budget of the witness draw (only tight, hand-made instances ever backtrack).
WITNESS_SEARCH_BUDGET = 200_000


def _witness_slots(
    rng: random.Random, lists: Sequence[tuple[int, ...]], n: int, s: int
) -> tuple[list[int], list[set[int]]]:
    """Step (1): a witness slot per meeting, uniform among the slots none of its
    participants uses yet.  Depth-first: in the rare tight instance where a draw leaves a
    later meeting no slot, it backtracks (candidates are tried in a seeded shuffled order).
    """
    used: list[set[int]] = [set() for _ in range(n)]
    out: list[int] = []
    budget = WITNESS_SEARCH_BUDGET

    def place(k: int) -> bool:
        nonlocal budget
        if k == len(lists):
            return True
        parts = lists[k]
        taken = set().union(*(used[a] for a in parts))
        cand = [t for t in range(s) if t not in taken]
        rng.shuffle(cand)
        for t in cand:
            budget -= 1
            if budget < 0:
                return False
            out.append(t)
            for a in parts:
                used[a].add(t)
            if place(k + 1):
                return True
            out.pop()
            for a in parts:
                used[a].discard(t)
        return False

    if not place(0):
        raise TaskError(
            f"no witness schedule fits: the meetings cannot all get a slot free for every participant "
            f"on {s} slots; use more slots or fewer meetings."
        )
    return out, used


def _build_structure(args: _Args) -> _Structure:
    """Steps (1)–(4) of SPEC §2: everything but the costs."""
    rng = random.Random(args.seed)
    n, s, m = args.num_agents, args.num_slots, args.num_meetings
    lists = args.participant_lists or _balanced_participants(rng, n, m, args.participants_per_meeting)
    orders = _speaker_orders(rng, lists, n)

    witness, used = _witness_slots(rng, lists, n, s)

    counts = errand_counts(s, args.densities, [len(u) for u in used])
    errand_slots: list[list[int]] = []
    blocked_slots: list[set[int]] = []
    for a in range(n):
        wit = sorted(used[a])
        others = [t for t in range(s) if t not in used[a]]
        n_a = counts[a]
        if args.force_witness_errand:
            on = rng.sample(wit, min(n_a, len(wit)))
            chosen = on + rng.sample(others, n_a - len(on))
        else:
            chosen = rng.sample(range(s), n_a)
        chosen.sort()
        off = [t for t in chosen if t not in used[a]]
        if args.blocked[a] > len(off):  # guarded by _validate; kept as a safety net
            raise TaskError(f"blocked={args.blocked[a]} for agent {a} exceeds its {len(off)} errands off witness slots.")
        errand_slots.append(chosen)
        blocked_slots.append(set(rng.sample(off, args.blocked[a])))
    return _Structure(args, list(lists), orders, witness, errand_slots, blocked_slots, rng)


def _draw_costs(rng: random.Random, errand_slots: Sequence[Sequence[int]], values: Sequence[int]) -> list[list[int]]:
    """Step (5): per agent, a shuffled balanced multiset of ``values`` over its errands."""
    out = []
    k = len(values)
    for slots in errand_slots:
        n = len(slots)
        bag = list(values) * (n // k) + rng.sample(list(values), n % k)
        rng.shuffle(bag)
        out.append(bag)
    return out


def _params(args: _Args) -> dict[str, Any]:
    if args.participant_lists is not None:
        sizes = [len(x) for x in args.participant_lists]
        subset: Any = sizes[0] if len(set(sizes)) == 1 else sizes
    else:
        subset = args.participants_per_meeting
    params: dict[str, Any] = {
        "total_agents": args.num_agents,
        "subset_size": subset,
        "num_slots": args.num_slots,
        "num_meetings": args.num_meetings,
        "density": copy.deepcopy(args.density_param),
        "blocked": copy.deepcopy(args.blocked_param),
        "cost_values": list(args.cost_values),
        "duration": 1,
    }
    if not args.force_witness_errand:
        params["force_witness_errand"] = False
    return params


def _row(
    st: _Structure,
    costs: Sequence[Sequence[int]],
    cost_mode: str,
    task_id: str,
    suite_version: str,
) -> dict[str, Any]:
    """The task row (without oracle fields) in the key order of SPEC §2."""
    args = st.args
    calendars: list[list[Any]] = []
    shown: list[dict[int, int]] = []
    next_id = 1
    for a in range(args.num_agents):
        cal: list[Any] = [None] * args.num_slots
        cost_at: dict[int, int] = {}
        for t, c in zip(st.errand_slots[a], costs[a]):
            cal[t] = Errand(next_id, c, t in st.blocked_slots[a]).to_json()
            cost_at[t] = c
            next_id += 1
        calendars.append(cal)
        shown.append(cost_at)
    meetings = [
        {"id": k + 1, "participants": list(parts), "speaker_order": list(order), "cost": 1, "duration": 1}
        for k, (parts, order) in enumerate(zip(st.participants, st.speaker_orders))
    ]
    witness_cost = sum(shown[a].get(t, 0) for parts, t in zip(st.participants, st.witness) for a in parts)
    return {
        "task_id": task_id,
        "seed": args.seed,
        "version": 1,
        "params": _params(args),
        "calendars": calendars,
        "meetings": meetings,
        "witness_solution": {
            "assignments": {str(k + 1): t for k, t in enumerate(st.witness)},
            "cost": witness_cost,
        },
        "calbench": {"suite_version": suite_version, "cost_mode": cost_mode},
    }


def _default_task_id(args: _Args, defaults: bool) -> str:
    if defaults:
        return f"seed-{args.seed}"
    sig = json.dumps(
        [_params(args), args.cost_mode, [list(x) for x in args.participant_lists or []]],
        sort_keys=True, separators=(",", ":"),
    )
    return f"seed-{args.seed}-{hashlib.sha256(sig.encode()).hexdigest()[:8]}"


def _labelled(row: dict[str, Any]) -> Task:
    task = Task.from_row(row)
    labels = assign_labels(task, row["seed"])
    row["calbench"]["labels"] = labels.to_json()
    return task.with_labels(labels)


def _structural_task(
    seed: int,
    *,
    num_agents: int = 5,
    num_slots: int = 16,
    num_meetings: int = 5,
    density: Any = 0.8,
    blocked: Any = 4,
    cost_mode: str = "uniform",
    participants_per_meeting: int = 3,
    participant_lists: Any = None,
    force_witness_errand: bool = True,
    cost_values: Any = None,
    task_id: str | None = None,
    suite_version: str = GENERATOR_VERSION,
    labelled: bool = True,
) -> Task:
    """A labelled task with structure and costs but no oracle fields (cheap).

    ``labelled=False`` skips the labels (a suite scoring hundreds of candidates labels
    only the ones it keeps; the structure and costs are the same either way)."""
    args = _validate(seed, num_agents, num_slots, num_meetings, density, blocked, cost_mode,
                     participants_per_meeting, participant_lists, force_witness_errand, cost_values)
    st = _build_structure(args)
    costs = _draw_costs(st.rng, st.errand_slots, args.cost_values)
    if task_id is None:
        defaults = (num_agents, num_slots, num_meetings, density, blocked, cost_mode, participants_per_meeting,
                    participant_lists, force_witness_errand, cost_values) == (5, 16, 5, 0.8, 4, "uniform", 3,
                                                                              None, True, None)
        task_id = _default_task_id(args, defaults)
    elif not isinstance(task_id, str) or not task_id:
        raise TaskError(f"task_id={task_id!r} must be a non-empty string.")
    row = _row(st, costs, cost_mode, task_id, suite_version)
    return _labelled(row) if labelled else Task.from_row(row)


# ---------------------------------------------------------------------------------
# Oracle annotation
# ---------------------------------------------------------------------------------
_ORDER = ("task_id", "seed", "version", "params", "calendars", "meetings", "witness_solution",
          "optimal", "greedy", "difficulty", "difficulty_score", "calbench")
_CB_ORDER = ("suite_version", "cost_mode", "oracle", "labels")


def annotate(task: Task, *, difficulty: str | None = None, fraction: Any = None) -> Task:
    """Fill ``optimal``, ``greedy``, ``difficulty``, ``difficulty_score`` and
    ``calbench.oracle`` from :mod:`engine.oracle`; returns a new task (labels kept).

    ``difficulty`` overrides the fixed cut points (a suite passes its tertile);
    ``fraction`` reuses an already computed ``FeasibleFraction``.
    """
    from engine import oracle  # lazy: generation of the structure needs no solver

    res = oracle.solve(task)
    if not res.feasible:
        raise TaskError(f"task {task.task_id}: the oracle finds no feasible schedule.")
    g_cost, g_assign = oracle.greedy(task)
    ff = fraction if fraction is not None else oracle.feasible_fraction(task)
    row = copy.deepcopy(task.row)
    row["optimal"] = {"assignments": {str(k): v for k, v in sorted(res.assignments.items())}, "cost": res.cost}
    row["greedy"] = {"assignments": {str(k): v for k, v in sorted(g_assign.items())}, "cost": g_cost}
    row["difficulty"] = difficulty if difficulty is not None else oracle.difficulty_from_fraction(ff.value)
    row["difficulty_score"] = ff.value
    cb = row.get("calbench") or {}
    cb["oracle"] = {"agent_costs": list(res.agent_costs), "feasible_fraction": ff.value}
    if task.labels.errands or task.labels.meetings:
        cb["labels"] = task.labels.to_json()
    row["calbench"] = {k: cb[k] for k in _CB_ORDER if k in cb} | {k: v for k, v in cb.items() if k not in _CB_ORDER}
    ordered = {k: row[k] for k in _ORDER if k in row}
    ordered.update({k: v for k, v in row.items() if k not in ordered})
    return Task.from_row(ordered).with_labels(task.labels)


# ---------------------------------------------------------------------------------
# Public entry point
# ---------------------------------------------------------------------------------
def generate_scenario(
    seed: int,
    num_agents: int = DEFAULT_AGENTS,
    num_slots: int = 16,
    num_meetings: int = 5,
    density: float | Sequence[float] = 0.8,
    blocked: int | Sequence[int] = 4,
    cost_mode: str = "uniform",
    participants_per_meeting: int = 3,
    participant_lists: Sequence[Sequence[int]] | None = None,
    force_witness_errand: bool = True,
    cost_values: Sequence[int] | None = None,
    task_id: str | None = None,
) -> Task:
    """A complete, labelled, oracle-annotated scenario (SPEC §2).  Pure and deterministic.

    ``density`` and ``blocked`` are one value or one per agent.  ``cost_values`` defaults
    to ``[1]`` (uniform) or ``[1, 10, 100]`` (varied).  ``participant_lists`` fixes the
    participants per meeting (``participants_per_meeting`` is then ignored).  ``task_id``
    defaults to ``"seed-<seed>"`` for default arguments, else ``"seed-<seed>-<8 hex of
    the arguments>"``.  Invalid arguments raise :class:`engine.model.TaskError` with one
    sentence saying what is wrong.
    """
    task = _structural_task(
        seed,
        num_agents=num_agents,
        num_slots=num_slots,
        num_meetings=num_meetings,
        density=density,
        blocked=blocked,
        cost_mode=cost_mode,
        participants_per_meeting=participants_per_meeting,
        participant_lists=participant_lists,
        force_witness_errand=force_witness_errand,
        cost_values=cost_values,
        task_id=task_id,
    )
    return annotate(task)
