"""The full-information oracle, the greedy baseline and the feasible fraction (SPEC §3).

Everything here is a pure function of a :class:`engine.model.Task` (and optionally a
set of calendars).  OR-Tools is imported lazily inside the CP-SAT solver, so
``import engine.oracle`` stays cheap; the engine never imports Textual, openai or
aiosqlite.

The scheduling model
--------------------
A *unit* is something that must occupy one slot on each of its holders' calendars:

* an **incoming meeting** ``k`` (one of the meetings being solved): one option per slot
  ``t`` at which every participant's item is nothing, a movable errand, or a copy of a
  prior meeting (usable only if that prior meeting moves away);
* a **prior meeting** ``p`` (a :class:`MeetingCopy` found on the calendars, of a meeting
  not being solved): the option *stay* (every copy keeps its slot, cost 0) or one option
  per common new slot ``t`` (every copy not already at ``t`` moves there, costing the
  copy's ``cost`` per calendar; errands at ``t`` are displaced as usual).

An option covers a set of cells ``(agent, slot)``; a cell holds at most one unit (an
agent never holds two meetings in one slot, while meetings with disjoint participants
may share a slot index).  Copies of the meetings being solved (mid-game calendars) are
ignored: the meeting is placed afresh.  A movable errand in a covered cell is displaced and costs its
shown value.

**The errand-capacity constraint is a per-agent count.**  Every displaced errand must
land on a slot of its agent that is free in the final calendar.  Because a displaced
errand may land on *any* such slot, the constraint holds iff everything fits on the
calendar:  with ``m_a`` units on agent ``a``'s calendar (incoming meetings it attends
plus prior meetings it holds), ``B_a`` blocked and ``E_a`` movable errands,
``m_a + B_a + E_a <= S``, i.e. ``m_a <= #(slots initially free or holding a meeting
copy)``.  That count does not depend on the schedule, so it is checked once, before the
solver runs: if it fails, no feasible schedule exists.  The authors' relaxation (any
movable errand can always be displaced) drops it; ``capacity_binds`` reports when the
relaxation then finds a schedule (or a cheaper one) that ours rejects.  The brute-force
enumerator in the tests places every displaced errand explicitly and confirms the
equivalence.

Objective (SPEC §3): minimise the total shown cost; among optimal schedules minimise the
largest agent cost; then take the lexicographically smallest assignment — incoming
meetings in task order, then prior meetings by id, each keyed by its option index
(*stay* first, then slots ascending).

Two exact solvers implement it, and return the same schedule (the objective above has
a unique optimum):

* :func:`_solve_cpsat` — the reference: CP-SAT with ``num_workers=1`` and a fixed
  ``random_seed``.  The stages (total, then max) are one weighted objective; the
  lexicographic stage is folded in too when the mixed-radix weights fit in 2^50, and is
  otherwise solved afterwards in chunks (fix, minimise the next chunk of option
  indices, fix, ...).  A greedy schedule (or the branch and bound's incumbent) is given
  as a solution hint.
* :func:`_solve_bnb` — a pure-Python branch and bound with forward checking, the fast
  path of ``solve(method="auto")``: about a millisecond for the canonical 5-agent task
  against ~8 ms for CP-SAT.  It gives up after a work budget (``BNB_WORK_LIMIT``) and
  CP-SAT takes over.  The tests check both against a brute-force enumerator.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.model import Calendar, Errand, MeetingCopy, Task

__all__ = [
    "OracleTimeout",
    "split_realised",
    "set_time_limit",
    "FeasibleFraction",
    "OracleResult",
    "difficulty_from_fraction",
    "difficulty_tertiles",
    "feasible_fraction",
    "greedy",
    "solve",
]

class OracleTimeout(RuntimeError):
    """The solver did not prove an optimum within the time limit (see :func:`set_time_limit`)."""


#: Seconds CP-SAT may spend on one ``solve`` (None: no limit).  Commands that solve
#: scenarios of the user's size set it (``calbench scenario --time-limit``); a solve that
#: hits it raises :class:`OracleTimeout` instead of running for minutes.
TIME_LIMIT: float | None = None


def set_time_limit(seconds: float | None) -> float | None:
    """Set :data:`TIME_LIMIT`; returns the previous value."""
    global TIME_LIMIT
    old, TIME_LIMIT = TIME_LIMIT, seconds
    return old


#: CP-SAT seed; with one worker the search is deterministic.
CPSAT_SEED = 20260
#: Work budget (search nodes x units) of the pure-Python branch and bound before CP-SAT
#: takes over.  The canonical 5-meeting tasks need at most ~2,000 nodes.
BNB_WORK_LIMIT = 400_000
#: Instances with more units than this go straight to CP-SAT.
BNB_MAX_UNITS = 200
#: Largest weight CP-SAT objectives may use (well inside its 2^62 overflow checks).
LEX_WEIGHT_LIMIT = 2**50
#: Fold the lexicographic stage into the single CP-SAT objective when the weights fit
#: (faster on small instances than a separate stage; same schedule either way).
FOLD_LEX = True


# ---------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class OracleResult:
    """One optimal schedule.  Costs are in shown units unless named ``*_levels``."""

    cost: int
    cost_levels: int
    assignments: dict[int, int]
    agent_costs: tuple[int, ...]
    agent_costs_levels: tuple[int, ...]
    feasible: bool
    capacity_binds: bool
    #: prior meetings the optimal schedule moves: meeting id -> new common slot
    prior_moves: dict[int, int] = field(default_factory=dict)
    #: optimum of the authors' relaxation (no errand capacity); ``None`` if infeasible
    relaxed_cost: int | None = None
    #: which exact solver produced the schedule: "bnb", "cpsat" or "trivial"
    solver: str = "cpsat"


@dataclass(frozen=True)
class FeasibleFraction:
    """``d = F / (S!/(S-M)!)``; ``count`` is ``F`` when counted exactly."""

    value: float
    exact: bool
    low: float
    high: float
    count: int | None
    #: "dp" (exact), "uniform" (Wilson interval) or "sis" (sequential importance sampling)
    method: str = "dp"
    samples: int = 0


# ---------------------------------------------------------------------------------
# Instance preparation
# ---------------------------------------------------------------------------------
@dataclass(slots=True)
class _Option:
    index: int  # 0-based; for a prior meeting option 0 is "stay"
    slot: int  # the slot of the unit after this option (-1: a prior meeting stays)
    cells: tuple[tuple[int, int], ...]
    cost: int  # shown
    agent_cost: tuple[tuple[int, int, int], ...]  # (agent, shown cost, level cost)


@dataclass(slots=True)
class _Unit:
    kind: str  # "meeting" | "prior"
    id: int
    holders: tuple[int, ...]
    options: list[_Option]


@dataclass(slots=True)
class _Instance:
    num_agents: int
    num_slots: int
    units: list[_Unit]  # incoming meetings in task order, then prior meetings by id
    capacity_ok: bool


def _prepare(task: Task, meeting_ids: Iterable[int] | None, calendars: Sequence[Calendar] | None) -> _Instance:
    cals = task.calendars if calendars is None else tuple(tuple(c) for c in calendars)
    n, s_count = len(cals), len(cals[0]) if cals else task.num_slots
    if meeting_ids is None:
        meetings = list(task.meetings)
    else:
        wanted = {int(i) for i in meeting_ids}
        meetings = [m for m in task.meetings if m.id in wanted]
        missing = wanted - {m.id for m in meetings}
        if missing:
            raise KeyError(f"unknown meeting id(s) {sorted(missing)}")
    solving = {m.id for m in meetings}
    level = task.level

    # Copies of the meetings being solved are ignored (the meeting is placed afresh);
    # copies of any other meeting are prior meetings that may stay or move together.
    prior_pos: dict[int, dict[int, tuple[int, int]]] = {}  # id -> agent -> (slot, cost)
    for a, cal in enumerate(cals):
        for s, it in enumerate(cal):
            if isinstance(it, MeetingCopy) and it.meeting_id not in solving:
                held = prior_pos.setdefault(it.meeting_id, {})
                if a in held:  # two copies of one meeting on one calendar: keep the first
                    continue
                held[a] = (s, it.cost)

    def cell_cost(a: int, s: int) -> tuple[bool, int]:
        it = cals[a][s]
        if it is None:
            return True, 0
        if isinstance(it, Errand):
            return (not it.blocked), (it.cost if not it.blocked else 0)
        if isinstance(it, MeetingCopy):
            return True, 0  # a solved meeting's own copy (free) or a prior copy (must move)
        return False, 0

    # per-cell usability and errand cost, computed once
    usable = [[False] * s_count for _ in range(n)]
    ecost = [[0] * s_count for _ in range(n)]
    for a in range(n):
        for s in range(s_count):
            usable[a][s], ecost[a][s] = cell_cost(a, s)

    units: list[_Unit] = []
    for m in meetings:
        parts = tuple(m.participants)
        opts: list[_Option] = []
        for t in range(s_count):
            if all(usable[a][t] for a in parts):
                ac = tuple((a, ecost[a][t], level(ecost[a][t])) for a in parts if ecost[a][t])
                opts.append(_Option(len(opts), t, tuple((a, t) for a in parts), sum(c for _, c, _ in ac), ac))
        units.append(_Unit("meeting", m.id, parts, opts))

    for pid in sorted(prior_pos):
        held = prior_pos[pid]
        holders = tuple(sorted(held))
        stay = _Option(0, -1, tuple((a, held[a][0]) for a in holders), 0, ())
        opts = [stay]
        for t in range(s_count):
            if all(held[a][0] == t for a in holders):
                continue  # identical to staying
            if not all(usable[a][t] for a in holders):
                continue
            ac = []
            for a in holders:
                c = 0
                lv = 0
                if held[a][0] != t:
                    c += held[a][1]
                    lv += level(held[a][1])
                    if ecost[a][t]:
                        c += ecost[a][t]
                        lv += level(ecost[a][t])
                if c:
                    ac.append((a, c, lv))
            opts.append(_Option(len(opts), t, tuple((a, t) for a in holders), sum(c for _, c, _ in ac), tuple(ac)))
        units.append(_Unit("prior", pid, holders, opts))

    # Errand capacity (see module docstring): units on a calendar <= slots not holding errands.
    load = [0] * n
    for u in units:
        for a in u.holders:
            load[a] += 1
    room = [sum(1 for it in cal if not isinstance(it, Errand)) for cal in cals]
    capacity_ok = all(load[a] <= room[a] for a in range(n))
    return _Instance(n, s_count, units, capacity_ok)


# ---------------------------------------------------------------------------------
# Exact solvers.  Both return (chosen option per unit) or None when infeasible.
# ---------------------------------------------------------------------------------
def _agent_vector(inst: _Instance, choice: Sequence[_Option], levels: bool = False) -> list[int]:
    v = [0] * inst.num_agents
    for o in choice:
        for a, c, lv in o.agent_cost:
            v[a] += lv if levels else c
    return v


def _solve_bnb(inst: _Instance, node_limit: int = 10**15) -> tuple[bool, list[_Option] | None, list[_Option] | None]:
    """Pure-Python depth-first branch and bound with forward checking.

    Phase A finds the optimal pair (total cost, largest agent cost), exploring each
    unit's options cheapest first; phase B walks the options in index order and stops
    at the first schedule reaching that pair, which is therefore the lexicographically
    smallest optimal one.  The lower bound on the cost still to come is the sum, over
    the remaining units, of their cheapest option not in conflict with the cells taken
    so far (a unit with none left prunes the node).

    Returns ``(finished, choice, incumbent)``: ``finished`` is False when ``node_limit``
    nodes did not suffice (``incumbent`` is then the best schedule seen, or None);
    ``choice`` is None when no feasible schedule exists.
    """
    units = inst.units
    u_count = len(units)
    if any(not u.options for u in units):
        return True, None, None
    options = [u.options for u in units]
    costs = [[o.cost for o in opts] for opts in options]
    by_cost = [sorted(range(len(opts)), key=lambda p, c=c: (c[p], p)) for opts, c in zip(options, costs)]
    by_index = [list(range(len(opts))) for opts in options]
    # cover[cell] = options (unit, position) that use the cell; blocked[u][p] = taken cells
    cover: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for i, opts in enumerate(options):
        for p, o in enumerate(opts):
            for c in o.cells:
                cover.setdefault(c, []).append((i, p))
    opt_cover = [[[cover[c] for c in o.cells] for o in opts] for opts in options]
    agent_cost = [[o.agent_cost for o in opts] for opts in options]
    blocked = [[0] * len(opts) for opts in options]
    agent = [0] * inst.num_agents
    choice = [0] * u_count
    nodes = 0
    best_total, best_max = math.inf, math.inf
    best_choice: list[int] | None = None

    class _Budget(Exception):
        pass

    def rest_bound(i: int) -> int:
        """Cheapest unblocked option of every unit from i on; -1 on a wipe-out."""
        lb = 0
        for j in range(i, u_count):
            bj = blocked[j]
            cj = costs[j]
            for p in by_cost[j]:
                if not bj[p]:
                    lb += cj[p]
                    break
            else:
                return -1
        return lb

    def place(i: int, p: int, sign: int) -> None:
        for lst in opt_cover[i][p]:
            for j, q in lst:
                blocked[j][q] += sign
        for a, c, _ in agent_cost[i][p]:
            agent[a] += sign * c

    def dfs(i: int, total: int, cur_max: int, phase_b: bool) -> bool:
        nonlocal nodes, best_total, best_max, best_choice
        nodes += 1
        if nodes > node_limit:
            raise _Budget
        if i == u_count:
            if phase_b:
                best_choice = list(choice)
                return True
            if total < best_total or (total == best_total and cur_max < best_max):
                best_total, best_max, best_choice = total, cur_max, list(choice)
            return False
        rest = rest_bound(i + 1)
        if rest < 0:
            return False
        bi = blocked[i]
        ci = costs[i]
        for p in (by_index[i] if phase_b else by_cost[i]):
            if bi[p]:
                continue
            lb = total + ci[p] + rest
            if lb > best_total:
                if phase_b:
                    continue
                break  # options are sorted by cost: the rest are no better
            new_max = cur_max
            for a, c, _ in agent_cost[i][p]:
                v = agent[a] + c
                if v > new_max:  # noqa: PLR1730 (hot loop: faster than max())
                    new_max = v
            if phase_b:
                if new_max > best_max:
                    continue
            elif lb == best_total and new_max >= best_max:
                continue
            place(i, p, 1)
            choice[i] = p
            done = dfs(i + 1, total + ci[p], new_max, phase_b)
            place(i, p, -1)
            if done:
                return True
        return False

    def incumbent() -> list[_Option] | None:
        return None if best_choice is None else [options[i][p] for i, p in enumerate(best_choice)]

    try:
        dfs(0, 0, 0, False)
        if best_choice is None:
            return True, None, None
        dfs(0, 0, 0, True)  # finds a schedule: phase A's optimum is one
    except _Budget:
        return False, None, incumbent()
    return True, incumbent(), None


def _greedy_hint(inst: _Instance) -> list[_Option | None]:
    """Each unit in turn takes its cheapest option clear of the cells already taken."""
    taken: set[tuple[int, int]] = set()
    out: list[_Option | None] = []
    for u in inst.units:
        pick = None
        for o in sorted(u.options, key=lambda o: (o.cost, o.index)):
            if not any(c in taken for c in o.cells):
                pick = o
                break
        if pick is not None:
            taken.update(pick.cells)
        out.append(pick)
    return out


def _cover_model(units: Sequence[_Unit]):
    """A CP-SAT model with one Boolean per option of each unit: exactly one option per
    unit, at most one option per cell.  ``(model, the Booleans unit by unit)``."""
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    xs: list[list] = []
    cell_vars: dict[tuple[int, int], list] = {}
    for u in units:
        row = []
        for o in u.options:
            v = model.new_bool_var("")
            row.append(v)
            for c in o.cells:
                cell_vars.setdefault(c, []).append(v)
        model.add_exactly_one(row)
        xs.append(row)
    for vs in cell_vars.values():
        if len(vs) > 1:
            model.add_at_most_one(vs)
    return model, xs


def _solve_cpsat(inst: _Instance, lexicographic: bool = True, fairness: bool = True,
                 hint: Sequence[_Option | None] | None = None) -> list[_Option] | None:
    """The reference solver (CP-SAT).  With ``fairness``/``lexicographic`` False only the
    total cost is optimised.  ``hint`` (default: a greedy schedule) seeds the search; it
    changes the time to the optimum, never the schedule returned."""
    units = inst.units
    if any(not u.options for u in units):
        return None
    if not units:
        return []
    from ortools.sat.python import cp_model

    model, xs = _cover_model(units)
    for u, row, h in zip(units, xs, hint if hint is not None else _greedy_hint(inst)):
        if h is not None:
            for o, v in zip(u.options, row):
                model.add_hint(v, o.index == h.index)

    flat_vars = [v for row in xs for v in row]
    flat_cost = [o.cost for u in units for o in u.options]
    total = cp_model.LinearExpr.weighted_sum(flat_vars, flat_cost)
    max_total = sum(max(o.cost for o in u.options) for u in units)

    agent_terms: dict[int, tuple[list, list]] = {}
    for u, row in zip(units, xs):
        for o, v in zip(u.options, row):
            for a, c, _ in o.agent_cost:
                vs, cs = agent_terms.setdefault(a, ([], []))
                vs.append(v)
                cs.append(c)
    # the slot of an incoming meeting / option index of a prior meeting, for the lex order
    base = max(2, max(len(u.options) for u in units))  # option index < base
    codes = [cp_model.LinearExpr.weighted_sum(row, [o.index for o in u.options]) for u, row in zip(units, xs)]

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = CPSAT_SEED

    limit = TIME_LIMIT
    deadline = None if limit is None else time.monotonic() + limit

    def run() -> bool:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise OracleTimeout(f"the oracle did not finish within {limit:g} s")
            solver.parameters.max_time_in_seconds = left
            status = _solve_watched(solver, model)  # a Ctrl-C raises KeyboardInterrupt here
        else:
            status = solver.solve(model)
        if status == cp_model.OPTIMAL:
            return True
        if status == cp_model.INFEASIBLE:
            return False
        if status in (cp_model.FEASIBLE, cp_model.UNKNOWN):
            if deadline is not None:
                # Ctrl-C was seen by _solve_watched, so this stop is CP-SAT's own: the time
                # limit (CP-SAT may stop a little before the wall clock says so, e.g. when
                # it judges that the time left cannot finish a stage).
                raise OracleTimeout(f"the oracle did not finish within {limit:g} s")
            # CP-SAT stops early, with a feasible or no solution, when it catches Ctrl-C
            raise KeyboardInterrupt
        raise RuntimeError(f"CP-SAT ended with status {solver.status_name(status)}")

    max_expr = None
    if fairness and agent_terms:
        max_expr = model.new_int_var(0, max_total, "max_agent")
        for vs, cs in agent_terms.values():
            model.add(max_expr >= cp_model.LinearExpr.weighted_sum(vs, cs))

    # Stage 1 (total cost, then the largest agent cost) as one weighted objective:
    # ``max_expr <= max_total`` so the weights keep the order of the two stages.
    obj = total * (max_total + 1) + max_expr if max_expr is not None else total
    lex_fits = base ** len(units) * (max_total + 1) ** 2 < LEX_WEIGHT_LIMIT
    if lexicographic and lex_fits and FOLD_LEX:
        # small instances: the lexicographic stage folded in too, a single solve
        weights = [base ** (len(units) - 1 - i) for i in range(len(units))]
        model.minimize(obj * base ** len(units) + cp_model.LinearExpr.weighted_sum(codes, weights))
        if not run():
            return None
    else:
        model.minimize(obj)
        if not run():
            return None
        if lexicographic:
            # fix stage 1, then minimise the option indices in order, in chunks whose
            # mixed-radix code fits the weight limit
            model.add(obj == round(solver.objective_value))
            chunk = max(1, int(math.log(LEX_WEIGHT_LIMIT) / math.log(base)))
            for start in range(0, len(units), chunk):
                part = list(range(start, min(len(units), start + chunk)))
                if all(len(units[i].options) == 1 for i in part):
                    continue
                weights = [base ** (len(part) - 1 - j) for j in range(len(part))]
                model.minimize(cp_model.LinearExpr.weighted_sum([codes[i] for i in part], weights))
                run()
                for i in part:
                    idx = sum(o.index for o, v in zip(units[i].options, xs[i]) if solver.boolean_value(v))
                    model.add(codes[i] == idx)
    out = []
    for u, row in zip(units, xs):
        chosen = [o for o, v in zip(u.options, row) if solver.boolean_value(v)]
        assert len(chosen) == 1
        out.append(chosen[0])
    return out


def _solve_watched(solver: Any, model: Any) -> Any:
    """``solver.solve(model)`` in a helper thread while this thread waits for it.

    Used when a time limit is set: CP-SAT's own Ctrl-C handler is turned off, so a Ctrl-C
    reaches Python here as KeyboardInterrupt; the search is stopped and the interrupt
    raised.  Whatever CP-SAT returns, then, is never a Ctrl-C in disguise: a FEASIBLE or
    UNKNOWN answer is a time-out (issue 24 item 13: it was guessed from the clock, and a
    stage that CP-SAT ended early was reported as "interrupted", exit 130).
    """
    import threading

    solver.parameters.catch_sigint_signal = False
    out: dict[str, Any] = {}
    done = threading.Event()  # not Thread.join: a join that Ctrl-C interrupts can mark the thread stopped

    def target() -> None:
        try:
            out["status"] = solver.solve(model)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            out["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="cp-sat", daemon=True).start()
    try:
        while not done.wait(0.25):
            pass
    except KeyboardInterrupt:
        solver.stop_search()
        while not done.is_set():  # a second Ctrl-C must not leave CP-SAT running as Python exits
            try:
                done.wait(0.25)
            except KeyboardInterrupt:
                solver.stop_search()
        raise
    if "error" in out:
        raise out["error"]
    return out["status"]


def _optimal(inst: _Instance, method: str) -> tuple[list[_Option] | None, str]:
    if method == "cpsat":
        return _solve_cpsat(inst), "cpsat"
    if method == "bnb":
        _, choice, _ = _solve_bnb(inst)
        return choice, "bnb"
    if method != "auto":
        raise ValueError(f"unknown method {method!r}")
    hint = None
    if len(inst.units) <= BNB_MAX_UNITS:
        finished, choice, hint = _solve_bnb(inst, max(2_000, BNB_WORK_LIMIT // len(inst.units)))
        if finished:
            return choice, "bnb"
    return _solve_cpsat(inst, hint=hint), "cpsat"


# ---------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------
def solve(
    task: Task,
    meeting_ids: Iterable[int] | None = None,
    calendars: Sequence[Calendar] | None = None,
    *,
    method: str = "auto",
) -> OracleResult:
    """Full-information optimum over ``meeting_ids`` (default: all meetings) on
    ``calendars`` (default: the task's initial calendars).

    The scheduled-only oracle is ``solve(task, meeting_ids=<those the game scheduled>)``.
    ``method`` is ``"auto"`` (branch and bound for small instances, else CP-SAT),
    ``"cpsat"`` (the reference) or ``"bnb"``.
    """
    inst = _prepare(task, meeting_ids, calendars)
    n = inst.num_agents
    zero = tuple([0] * n)
    if not inst.units:
        return OracleResult(0, 0, {}, zero, zero, True, False, {}, 0, "trivial")

    relaxed_choice: list[_Option] | None
    if inst.capacity_ok:
        choice, used = _optimal(inst, method)
        relaxed_choice = choice
    else:
        choice, used = None, "trivial"
        relaxed_choice, used = _optimal(inst, method)
    relaxed_cost = None if relaxed_choice is None else sum(o.cost for o in relaxed_choice)
    if choice is None:
        return OracleResult(0, 0, {}, zero, zero, False, relaxed_choice is not None, {}, relaxed_cost, used)

    agent_costs = tuple(_agent_vector(inst, choice))
    agent_levels = tuple(_agent_vector(inst, choice, levels=True))
    assignments = {u.id: o.slot for u, o in zip(inst.units, choice) if u.kind == "meeting"}
    prior_moves = {u.id: o.slot for u, o in zip(inst.units, choice) if u.kind == "prior" and o.index != 0}
    return OracleResult(
        cost=sum(agent_costs),
        cost_levels=sum(agent_levels),
        assignments=assignments,
        agent_costs=agent_costs,
        agent_costs_levels=agent_levels,
        feasible=True,
        capacity_binds=False,
        prior_moves=prior_moves,
        relaxed_cost=relaxed_cost,
        solver=used,
    )


def greedy(task: Task) -> tuple[int, dict[int, int]]:
    """SPEC §3 greedy baseline on the initial calendars.

    Meetings in task order; each takes the slot of least total insertion cost given the
    calendars left by earlier ones (ties → lowest slot).  A participant's insertion cost
    at a slot is 0 if free, the errand's cost if it holds a movable errand and the agent
    has a free slot to move it to, otherwise the slot is infeasible (blocked errands and
    meetings never move).  A displaced errand goes to the agent's lowest free slot.  A
    meeting with no feasible slot is skipped.  Returns ``(total shown cost, assignments)``.
    """
    cals = [list(c) for c in task.calendars]
    free_count = [sum(1 for it in cal if it is None) for cal in cals]
    total = 0
    assignments: dict[int, int] = {}
    for m in task.meetings:
        best_slot, best_cost = -1, math.inf
        for t in range(task.num_slots):
            c = 0
            for a in m.participants:
                it = cals[a][t]
                if it is None:
                    continue
                if isinstance(it, Errand) and not it.blocked and free_count[a] > 0:
                    c += it.cost
                    continue
                c = math.inf
                break
            if c < best_cost:
                best_slot, best_cost = t, c
        if best_slot < 0:
            continue
        t = best_slot
        for a in m.participants:
            it = cals[a][t]
            if isinstance(it, Errand):
                cals[a][cals[a].index(None)] = it  # the displaced errand takes the lowest free slot
            free_count[a] -= 1  # either way, one free slot fewer
            cals[a][t] = MeetingCopy(m.id, m.cost)
        total += int(best_cost)
        assignments[m.id] = t
    return total, assignments


def _allowed_slots(task: Task, calendars: Sequence[Calendar] | None = None) -> list[list[int]]:
    """Per meeting, the slots clearable on the (initial) calendars: every participant's
    item there is nothing, or a movable errand while that agent has a free slot."""
    cals = task.calendars if calendars is None else calendars
    has_free = [any(it is None for it in cal) for cal in cals]
    out = []
    for m in task.meetings:
        slots = []
        for t in range(task.num_slots):
            ok = True
            for a in m.participants:
                it = cals[a][t]
                if it is None:
                    continue
                if isinstance(it, Errand) and not it.blocked and has_free[a]:
                    continue
                ok = False
                break
            if ok:
                slots.append(t)
        out.append(slots)
    return out


def _count_matchings(allowed: list[list[int]], num_slots: int) -> int:
    """Number of injective meeting→slot maps using allowed pairs (DP over meeting subsets)."""
    m = len(allowed)
    full = (1 << m) - 1
    per_slot = [0] * num_slots
    for k, slots in enumerate(allowed):
        for t in slots:
            per_slot[t] |= 1 << k
    dp = [0] * (1 << m)
    dp[0] = 1
    bits = [1 << k for k in range(m)]
    for t in range(num_slots):
        avail = per_slot[t]
        if not avail:
            continue
        avail_bits = [b for b in bits if avail & b]
        # in place, masks descending: dp[mask ^ b] (smaller) is still the old value
        for mask in range(full, 0, -1):
            inter = mask & avail
            if not inter:
                continue
            acc = dp[mask]
            for b in avail_bits:
                if inter & b:
                    acc += dp[mask ^ b]
            dp[mask] = acc
    return dp[full]


def _falling(n: int, k: int) -> int:
    return math.perm(n, k) if 0 <= k <= n else 0


def _wilson(hits: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = hits / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def feasible_fraction(task: Task, *, exact_limit: int = 10**7, samples: int = 200_000, seed: int = 0) -> FeasibleFraction:
    """SPEC §3 feasible fraction ``d = F / (S!/(S-M)!)`` on the initial calendars.

    Exact (DP over subsets of meetings) when ``2^M · (#allowed pairs)`` is at most
    ``exact_limit``; otherwise estimated from ``samples`` uniformly random injective
    assignments (seeded ``random.Random``) with a 95% Wilson interval.  When the hits
    would be too few for a tight interval (fewer than 100 in the first tenth of the
    samples), the estimate switches to sequential importance sampling — unbiased, and
    precise for tiny fractions — with a normal 95% interval.
    """
    allowed = _allowed_slots(task)
    m, s_count = len(allowed), task.num_slots
    total = _falling(s_count, m)
    if m == 0:
        return FeasibleFraction(1.0, True, 1.0, 1.0, 1)
    if total == 0 or any(not a for a in allowed):
        return FeasibleFraction(0.0, True, 0.0, 0.0, 0)
    pairs = sum(len(a) for a in allowed)
    if (1 << m) * pairs <= exact_limit:
        f = _count_matchings(allowed, s_count)
        d = f / total
        return FeasibleFraction(d, True, d, d, f, "dp", 0)

    rng = random.Random(seed)
    order = sorted(range(m), key=lambda k: len(allowed[k]))  # most constrained first
    # Uniform sampling first; if a tenth of the budget shows the hits will be too few
    # for a tight interval (under ~1,000 in all), switch to sequential importance sampling.
    pilot = max(1, samples // 10)
    hits = _uniform_hits(allowed, order, s_count, pilot, rng)
    n_done = pilot
    if hits >= 100:
        hits += _uniform_hits(allowed, order, s_count, samples - pilot, rng)
        n_done = samples
        if hits >= 50:
            lo, hi = _wilson(hits, n_done)
            return FeasibleFraction(hits / n_done, False, lo, hi, None, "uniform", n_done)
    n_sis = max(1000, min(samples, exact_limit // max(1, m * s_count)))
    return _sis_estimate(allowed, order, s_count, n_sis, rng)


def _uniform_hits(allowed: list[list[int]], order: list[int], num_slots: int, n: int, rng: random.Random) -> int:
    """How many of ``n`` uniformly random injective assignments use only allowed pairs."""
    allowed_sets = [frozenset(a) for a in allowed]
    m = len(allowed)
    slots = range(num_slots)
    sample = rng.sample
    hits = 0
    for _ in range(n):
        pick = sample(slots, m)
        for k in order:
            if pick[k] not in allowed_sets[k]:
                break
        else:
            hits += 1
    return hits


def _sis_estimate(allowed: list[list[int]], order: list[int], num_slots: int, n: int,
                  rng: random.Random) -> FeasibleFraction:
    """Sequential importance sampling (Knuth's estimator): assign meetings in ``order``,
    each uniformly among its allowed unused slots; the product of the choice counts is
    an unbiased estimate of ``F``.  Returns the mean ratio with a normal 95% interval."""
    m = len(allowed)
    log_total = math.lgamma(num_slots + 1) - math.lgamma(num_slots - m + 1)
    ratios = []
    for _ in range(n):
        used: set[int] = set()
        log_w = 0.0
        for k in order:
            cand = [t for t in allowed[k] if t not in used]
            if not cand:
                log_w = -math.inf
                break
            log_w += math.log(len(cand))
            used.add(cand[rng.randrange(len(cand))])
        ratios.append(0.0 if log_w == -math.inf else math.exp(log_w - log_total))
    mean = sum(ratios) / n
    var = sum((r - mean) ** 2 for r in ratios) / max(1, n - 1)
    half = 1.959964 * math.sqrt(var / n)
    return FeasibleFraction(mean, False, max(0.0, mean - half), min(1.0, mean + half), None, "sis", n)


def difficulty_from_fraction(d: float) -> str:
    """Fixed cut points for a single scenario (SPEC §3)."""
    if d >= 0.05:
        return "easy"
    if d >= 0.005:
        return "medium"
    return "hard"


def difficulty_tertiles(fractions: list[float]) -> list[str]:
    """Tertiles of ``d`` within a suite cell: highest third easy, lowest third hard.

    Ranks by ``d`` descending, ties broken by index (stable); rank ``r`` of ``n`` gets
    tier ``floor(3r/n)``, so a remainder goes to the easier tiers first.
    """
    n = len(fractions)
    order = sorted(range(n), key=lambda i: (-fractions[i], i))
    out = [""] * n
    names = ("easy", "medium", "hard")
    for r, i in enumerate(order):
        out[i] = names[(3 * r) // n]
    return out


# ---------------------------------------------------------------------------------
# Serialising results (for caches outside the engine: lab/oracle_cache.py)
# ---------------------------------------------------------------------------------
#: Bump when a change to the solvers could change any field of an :class:`OracleResult`;
#: caches keyed with it then miss instead of serving an old answer.
ORACLE_VERSION = 1


def result_to_json(r: OracleResult) -> dict[str, Any]:
    """An :class:`OracleResult` as plain JSON (``result_from_json`` gives back an equal one)."""
    return {"cost": r.cost, "cost_levels": r.cost_levels,
            "assignments": [[k, v] for k, v in r.assignments.items()],
            "agent_costs": list(r.agent_costs), "agent_costs_levels": list(r.agent_costs_levels),
            "feasible": r.feasible, "capacity_binds": r.capacity_binds,
            "prior_moves": [[k, v] for k, v in r.prior_moves.items()],
            "relaxed_cost": r.relaxed_cost, "solver": r.solver}


def result_from_json(d: dict[str, Any]) -> OracleResult:
    return OracleResult(d["cost"], d["cost_levels"], {k: v for k, v in d["assignments"]},
                        tuple(d["agent_costs"]), tuple(d["agent_costs_levels"]), d["feasible"],
                        d["capacity_binds"], {k: v for k, v in d["prior_moves"]}, d["relaxed_cost"], d["solver"])


def split_realised(task: Task, split: Sequence[int], *, total: int | None = None, at_most: bool = False) -> bool:
    """Whether some feasible schedule of all the task's meetings gives every agent exactly
    the shown cost ``split[a]`` (``at_most``: no more than it) and, with ``total``, costs
    ``total`` in all.

    The per-agent split of the optimum is not unique: several optimal schedules may share
    the cost differently, and a harness may record any of them.  ``split_realised(task,
    split, total=solve(task).cost)`` says whether ``split`` is *an* optimal split.  A
    CP-SAT feasibility question on the oracle's own model (one option per meeting, no two
    meetings in one cell, each agent's cost fixed).
    """
    inst = _prepare(task, None, None)
    if len(split) != inst.num_agents or any(not isinstance(c, int) or isinstance(c, bool) or c < 0 for c in split):
        return False
    if total is not None and not at_most and sum(split) != total:
        return False
    if any(not u.options for u in inst.units):
        return False
    if not inst.units:
        return all(c == 0 for c in split)
    from ortools.sat.python import cp_model

    model, xs = _cover_model(inst.units)
    terms: list[tuple[list, list]] = [([], []) for _ in range(inst.num_agents)]
    for u, row in zip(inst.units, xs):
        for o, v in zip(u.options, row):
            for a, c, _lv in o.agent_cost:
                terms[a][0].append(v)
                terms[a][1].append(c)
    for a, (vs, cs) in enumerate(terms):
        if vs:
            expr = cp_model.LinearExpr.weighted_sum(vs, cs)
            model.add(expr <= split[a] if at_most else expr == split[a])
        elif split[a] != 0 and not at_most:
            return False
    if total is not None:
        model.add(cp_model.LinearExpr.weighted_sum(
            [v for vs, _cs in terms for v in vs], [c for _vs, cs in terms for c in cs]) == total)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = CPSAT_SEED
    if TIME_LIMIT is not None:
        solver.parameters.max_time_in_seconds = TIME_LIMIT
    status = solver.solve(model)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return True
    if status == cp_model.INFEASIBLE:
        return False
    raise OracleTimeout("the oracle could not decide whether the recorded split is realised")
