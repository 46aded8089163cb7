"""The oracle, greedy baseline and feasible fraction (SPEC §3) against first principles.

The brute-force enumerator below does not share code with ``engine.oracle``: it tries
every slot for every meeting (and stay/every slot for every prior meeting), builds the
final calendars, and places each displaced errand explicitly on a free slot.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from engine import oracle
from engine.model import Errand, MeetingCopy, Task

REPO = Path(__file__).resolve().parents[2]
AUTHORS = REPO.parent / "shared" / "compat" / "authors_uniform_full.jsonl"


# ---------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------
def E(eid: int, cost: int = 1, blocked: bool = False) -> dict:
    d = {"errand_id": eid, "cost": cost}
    if blocked:
        d["blocked"] = True
    return d


def C(mid: int, cost: int = 1) -> dict:
    return {"meeting_id": mid, "cost": cost}


def make_task(calendars: list[list], meetings: list[list[int]], cost_values=(1, 10, 100), first_id: int = 1) -> Task:
    return Task.from_row({
        "task_id": "t",
        "params": {"cost_values": list(cost_values)},
        "calendars": calendars,
        "meetings": [{"id": first_id + k, "participants": p} for k, p in enumerate(meetings)],
    })


def random_task(rng: random.Random, *, priors: bool = True, expensive: bool = False) -> Task:
    """N=2..3, S=4..6, M=1..3; free/movable/blocked items, varied costs, prior copies.

    ``expensive`` draws errand costs from {10, 100} so that moving a prior meeting
    (1 per calendar) is often the better choice."""
    n, s, m = rng.randint(2, 3), rng.randint(4, 6), rng.randint(1, 3)
    cost_values = (1, 10, 100) if expensive else rng.choice([(1,), (1, 10, 100), (1, 2, 3)])
    errand_costs = (10, 100) if expensive else cost_values
    eid = 0
    cals: list[list] = []
    free = rng.choice([0.25, 0.4, 0.55])
    for _ in range(n):
        cal = []
        for _ in range(s):
            r = rng.random()
            if r < free:
                cal.append(None)
            else:
                eid += 1
                cal.append(E(eid, rng.choice(errand_costs), blocked=r > 0.9))
        cals.append(cal)
    if priors:
        for j in range(rng.choice([0, 1, 1, 2])):
            holders = rng.sample(range(n), 2)
            if rng.random() < 0.8:
                slots = [rng.randrange(s)] * 2  # a consistent prior meeting
            else:
                slots = [rng.randrange(s), rng.randrange(s)]  # a "ghost" (copies apart)
            for a, t in zip(holders, slots):
                cals[a][t] = C(100 + j)
    meetings = [sorted(rng.sample(range(n), rng.randint(1, min(3, n)))) for _ in range(m)]
    return make_task(cals, meetings, cost_values)


def brute_force(task: Task, meeting_ids=None, calendars=None, *, capacity: bool = True):
    """Best (total, max agent cost, lex key) schedule by exhaustive enumeration.

    Returns None if infeasible, else a dict with cost, agent costs (shown and levels),
    assignments and prior moves.  ``capacity=False`` is the authors' relaxation: every
    movable errand can always be displaced.
    """
    cals = task.calendars if calendars is None else calendars
    n, s_count = len(cals), len(cals[0])
    meetings = [m for m in task.meetings if meeting_ids is None or m.id in set(meeting_ids)]
    solving = {m.id for m in meetings}
    priors: dict[int, dict[int, MeetingCopy | tuple]] = {}
    for a in range(n):
        for t in range(s_count):
            it = cals[a][t]
            if isinstance(it, MeetingCopy) and it.meeting_id not in solving:
                priors.setdefault(it.meeting_id, {})[a] = (t, it.cost)
    prior_ids = sorted(priors)
    choices = [range(s_count)] * len(meetings)
    for pid in prior_ids:
        held = priors[pid]
        moves = [t for t in range(s_count) if not all(held[a][0] == t for a in held)]
        choices.append([-1] + moves)  # -1: stay
    best = None
    for combo in itertools.product(*choices):
        final: list[list] = [[None] * s_count for _ in range(n)]  # meeting ids
        ok = True
        placements = []
        for m, t in zip(meetings, combo):
            placements += [(a, t, m.id) for a in m.participants]
        move_cost = [0] * n
        move_lvl = [0] * n
        for pid, t in zip(prior_ids, combo[len(meetings):]):
            for a, (orig, cost) in priors[pid].items():
                if t == -1 or t == orig:
                    placements.append((a, orig, pid))
                else:
                    placements.append((a, t, pid))
                    move_cost[a] += cost
                    move_lvl[a] += task.level(cost)
        for a, t, mid in placements:
            if final[a][t] is not None:
                ok = False
                break
            final[a][t] = ("meeting", mid)
        if not ok:
            continue
        agent = list(move_cost)
        lvl = list(move_lvl)
        for a in range(n):
            displaced = []
            for t in range(s_count):
                it = cals[a][t]
                if isinstance(it, Errand):
                    if final[a][t] is None:
                        final[a][t] = ("errand", it.errand_id)
                    elif it.blocked:
                        ok = False
                    else:
                        displaced.append(it)
                        agent[a] += it.cost
                        lvl[a] += task.level(it.cost)
            if not ok:
                break
            if capacity:
                for it in displaced:  # each displaced errand takes a slot free at the end
                    free = [t for t in range(s_count) if final[a][t] is None]
                    if not free:
                        ok = False
                        break
                    final[a][free[0]] = ("errand", it.errand_id)
            if not ok:
                break
        if not ok:
            continue
        key = (sum(agent), max(agent), combo)
        if best is None or key < best[0]:
            best = (key, agent, lvl, combo)
    if best is None:
        return None
    key, agent, lvl, combo = best
    return {
        "cost": key[0],
        "agent_costs": tuple(agent),
        "agent_costs_levels": tuple(lvl),
        "assignments": {m.id: t for m, t in zip(meetings, combo)},
        "prior_moves": {pid: t for pid, t in zip(prior_ids, combo[len(meetings):]) if t != -1},
    }


def check_against_brute(task: Task, meeting_ids=None, calendars=None) -> oracle.OracleResult:
    want = brute_force(task, meeting_ids, calendars)
    relaxed = brute_force(task, meeting_ids, calendars, capacity=False)
    results = {m: oracle.solve(task, meeting_ids, calendars, method=m) for m in ("cpsat", "bnb", "auto")}
    for method, got in results.items():
        ctx = f"{method} on {task.row}"
        if want is None:
            assert not got.feasible, ctx
            assert got.cost == 0 and got.assignments == {}, ctx
        else:
            assert got.feasible, ctx
            assert got.cost == want["cost"], ctx
            assert got.agent_costs == want["agent_costs"], ctx
            assert got.agent_costs_levels == want["agent_costs_levels"], ctx
            assert got.cost_levels == sum(want["agent_costs_levels"]), ctx
            assert got.assignments == want["assignments"], ctx
            assert got.prior_moves == want["prior_moves"], ctx
        binds = relaxed is not None and (want is None or relaxed["cost"] < want["cost"])
        assert got.capacity_binds == binds, ctx
        assert got.relaxed_cost == (None if relaxed is None else relaxed["cost"]), ctx
    return results["auto"]


# ---------------------------------------------------------------------------------
# the optimum
# ---------------------------------------------------------------------------------
def test_oracle_equals_brute_force_on_random_small_tasks():
    rng = random.Random(12345)
    seen = {"feasible": 0, "infeasible": 0, "binds": 0, "prior_moved": 0, "costly": 0}
    for i in range(300):
        res = check_against_brute(random_task(rng, expensive=i % 3 == 0))
        seen["feasible" if res.feasible else "infeasible"] += 1
        seen["binds"] += res.capacity_binds
        seen["prior_moved"] += bool(res.prior_moves)
        seen["costly"] += res.cost > 0
    # the random cases exercise every branch
    assert all(v >= 5 for v in seen.values()), seen


def test_scheduled_only_and_mid_game_calendars_match_brute_force():
    rng = random.Random(777)
    for _ in range(80):
        task = random_task(rng, priors=False)
        ids = [m.id for m in task.meetings]
        subset = rng.sample(ids, rng.randint(0, len(ids)))
        check_against_brute(task, meeting_ids=subset)
        # mid game: the first meeting already sits on the calendars as a prior copy
        first = task.meetings[0]
        cals = [list(c) for c in task.calendars]
        free_common = [t for t in range(task.num_slots)
                       if all(cals[a][t] is None for a in first.participants)]
        if free_common and len(ids) > 1:
            for a in first.participants:
                cals[a][free_common[0]] = MeetingCopy(first.id, 1)
            rest = ids[1:]
            res = check_against_brute(task, meeting_ids=rest, calendars=[tuple(c) for c in cals])
            assert set(res.assignments) <= set(rest)


def test_min_max_tie_break_then_lowest_slot():
    # slot 0 and slot 1 both cost 2; slot 1 splits it 1+1 (max 1) and must win
    task = make_task(
        [[E(1, 2), E(2, 1), E(3, 1, blocked=True), None],
         [None, E(4, 1), None, E(5, 1, blocked=True)]],
        [[0, 1]], cost_values=(1, 2))
    res = oracle.solve(task)
    assert (res.cost, res.assignments, res.agent_costs) == (2, {1: 1}, (1, 1))
    assert res.agent_costs_levels == (1, 1) and res.cost_levels == 2
    # all free: meetings take the lowest slots, in meeting order
    task = make_task([[None] * 3, [None] * 3], [[0, 1], [0, 1]])
    assert oracle.solve(task).assignments == {1: 0, 2: 1}
    # disjoint participants may share a slot index
    task = make_task([[None, E(1)], [None, E(2)], [None, E(3)]], [[0], [1, 2]])
    assert oracle.solve(task).assignments == {1: 0, 2: 0}


def test_prior_meeting_moves_when_cheaper_than_errands():
    # Meeting 1 (agents 0,1): slots 0,1 cost 100+100; slot 2 holds prior meeting 9 of
    # agents 1,2, which can move to slot 3 (free for 1 and 2) for 1 per calendar.
    task = make_task(
        [[E(1, 100), E(2, 100), None, E(3, 100)],
         [E(4, 100), E(5, 100), C(9), None],
         [None, None, C(9), None]],
        [[0, 1]])
    res = oracle.solve(task)
    assert res.assignments == {1: 2}
    assert res.prior_moves == {9: 3}
    assert res.cost == 2 and res.agent_costs == (0, 1, 1)
    assert res.cost_levels == 2 and res.agent_costs_levels == (0, 1, 1)
    check_against_brute(task)
    # the greedy baseline never moves prior meetings: slot 3 (100 + 0) is its best
    assert oracle.greedy(task) == (100, {1: 3})


def test_capacity_binds_where_the_relaxation_overfills_a_calendar():
    # agent 0 has a single free slot but two meetings: infeasible for us, not for the
    # authors' relaxation
    task = make_task(
        [[E(1, 1), None, E(2, 10), E(3, 1, blocked=True)],
         [None, E(4, 1), E(5, 100), None]],
        [[0, 1], [0, 1], [1]])
    res = oracle.solve(task)
    assert not res.feasible and res.capacity_binds
    assert res.cost == 0 and res.assignments == {} and res.agent_costs == (0, 0)
    assert res.relaxed_cost == 2
    check_against_brute(task)
    # without the second meeting it fits
    ok = oracle.solve(task, meeting_ids=[1, 3])
    assert ok.feasible and not ok.capacity_binds and ok.cost == 1


def test_determinism_of_agent_costs():
    rng = random.Random(99)
    tasks = [random_task(rng) for _ in range(30)]
    first = [oracle.solve(t, method="cpsat") for t in tasks]
    again = [oracle.solve(t, method="cpsat") for t in tasks]
    fast = [oracle.solve(t) for t in tasks]
    for a, b, c in zip(first, again, fast):
        assert a.agent_costs == b.agent_costs == c.agent_costs
        assert a.assignments == b.assignments == c.assignments
        assert sum(a.agent_costs) == a.cost


def test_determinism_across_processes():
    code = (
        f"import json,random,sys;sys.path.insert(0,{str(Path(__file__).parent)!r});"
        "from test_oracle import random_task;from engine import oracle;rng=random.Random(5);"
        "print(json.dumps([list(oracle.solve(random_task(rng),method='cpsat').agent_costs) for _ in range(10)]))"
    )
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            for _ in range(2)}
    assert len(outs) == 1


def test_import_is_cheap():
    code = "import sys, engine.oracle; assert 'ortools' not in sys.modules; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.stdout.strip() == "ok", out.stderr


def test_large_instance_falls_back_to_cpsat_and_agrees():
    # a dense 8-agent task whose branch and bound exceeds a tiny node budget
    rng = random.Random(3)
    cals = [[None if rng.random() < 0.3 else E(a * 100 + t, rng.choice([1, 10, 100]), rng.random() < 0.1)
             for t in range(12)] for a in range(8)]
    meetings = [sorted(rng.sample(range(8), 3)) for _ in range(8)]
    task = make_task(cals, meetings)
    inst = oracle._prepare(task, None, None)
    finished, _, _ = oracle._solve_bnb(inst, node_limit=5)
    assert not finished
    a, b = oracle.solve(task, method="cpsat"), oracle.solve(task, method="bnb")
    assert (a.cost, a.agent_costs, a.assignments) == (b.cost, b.agent_costs, b.assignments)


# ---------------------------------------------------------------------------------
# greedy
# ---------------------------------------------------------------------------------
def test_greedy_hand_made():
    task = make_task(
        [[E(1, 1), None, E(2, 10), E(3, 1, blocked=True)],
         [None, E(4, 1), E(5, 100), None]],
        [[0, 1], [0, 1], [1]])
    # M1: slots 0 and 1 both cost 1 -> slot 0; errand 1 of agent 0 goes to slot 1.
    # M2: agent 0 now has no free slot, so nothing is clearable -> skipped.
    # M3 (agent 1 only): slot 3 is free -> cost 0.
    assert oracle.greedy(task) == (1, {1: 0, 3: 3})


def test_greedy_takes_the_cheapest_slot_given_earlier_meetings():
    task = make_task(
        [[E(1, 10), None, None, E(2, 1)],
         [None, None, E(3, 1), E(4, 1)]],
        [[0, 1], [0, 1], [0, 1]])
    # M1 -> slot 1 (free for both); M2 -> slot 2 (agent 1's errand 3, cost 1, moves to
    # its lowest free slot 0; slot 3 would cost 2); M3: neither agent has a free slot
    # left, so no errand can move -> skipped.
    cost, assign = oracle.greedy(task)
    assert assign == {1: 1, 2: 2} and cost == 1


# ---------------------------------------------------------------------------------
# feasible fraction and difficulty
# ---------------------------------------------------------------------------------
def brute_count(task: Task) -> int:
    cals = task.calendars
    has_free = [any(it is None for it in cal) for cal in cals]

    def clearable(m, t):
        for a in m.participants:
            it = cals[a][t]
            if it is None:
                continue
            if isinstance(it, Errand) and not it.blocked and has_free[a]:
                continue
            return False
        return True

    return sum(
        all(clearable(m, t) for m, t in zip(task.meetings, perm))
        for perm in itertools.permutations(range(task.num_slots), len(task.meetings))
    )


def test_feasible_fraction_dp_equals_brute_force_count():
    rng = random.Random(2024)
    for _ in range(60):
        task = random_task(rng, priors=False)
        ff = oracle.feasible_fraction(task)
        f = brute_count(task)
        assert ff.exact and ff.count == f
        assert ff.value == pytest.approx(f / math.perm(task.num_slots, len(task.meetings)))
        assert ff.low == ff.high == ff.value


def test_feasible_fraction_dp_on_canonical_size_is_exact():
    # (its speed is measured by benchmarks/oracle.py, not asserted here)
    rng = random.Random(8)
    cals = [[None if rng.random() < 0.3 else E(a * 100 + t, 1, rng.random() < 0.2) for t in range(16)] for a in range(5)]
    task = make_task(cals, [sorted(rng.sample(range(5), 3)) for _ in range(5)])
    ff = oracle.feasible_fraction(task)
    allowed = oracle._allowed_slots(task)
    count = sum(len(set(p)) == 5 for p in itertools.product(*allowed))
    assert ff.count == count


@pytest.mark.parametrize("density, m, method", [(0.4, 8, "uniform"), (0.9, 12, "sis")])
def test_sampling_interval_contains_exact_value(density, m, method):
    rng = random.Random(11)
    n, s = 8, 18
    cals = [[None if rng.random() > density else E(a * 100 + t, 1, rng.random() < 0.1) for t in range(s)]
            for a in range(n)]
    for cal in cals:  # keep every agent with a free slot
        cal[rng.randrange(s)] = None
    task = make_task(cals, [sorted(rng.sample(range(n), 3)) for _ in range(m)])
    exact = oracle.feasible_fraction(task)
    assert exact.exact and exact.value > 0
    est = oracle.feasible_fraction(task, exact_limit=0, samples=20_000, seed=1)
    assert not est.exact and est.count is None
    assert est.method == method
    assert est.low <= exact.value <= est.high
    assert est.low <= est.value <= est.high
    assert est.high - est.low < exact.value  # a useful interval, not [0, 1]
    # seeded: the same estimate again
    assert oracle.feasible_fraction(task, exact_limit=0, samples=20_000, seed=1) == est


def test_feasible_fraction_degenerate_cases():
    # a meeting with no clearable slot; an agent with no free slot blocks its errands
    task = make_task([[E(1), E(2)], [None, None]], [[0, 1]])
    assert oracle.feasible_fraction(task).value == 0.0
    task = make_task([[None, None, None]], [[0], [0], [0], [0]])  # M > S
    assert oracle.feasible_fraction(task).value == 0.0
    task = make_task([[None, E(1)]], [[0]])
    ff = oracle.feasible_fraction(task)
    assert ff.count == 2 and ff.value == 1.0


def test_difficulty_cut_points_and_tertiles():
    assert oracle.difficulty_from_fraction(0.05) == "easy"
    assert oracle.difficulty_from_fraction(0.0499) == "medium"
    assert oracle.difficulty_from_fraction(0.005) == "medium"
    assert oracle.difficulty_from_fraction(0.0049) == "hard"
    assert oracle.difficulty_from_fraction(0.0) == "hard"
    fr = [0.3, 0.1, 0.2, 0.05, 0.01, 0.02]
    assert oracle.difficulty_tertiles(fr) == ["easy", "medium", "easy", "medium", "hard", "hard"]
    # ties: stable by index
    assert oracle.difficulty_tertiles([0.1] * 6) == ["easy", "easy", "medium", "medium", "hard", "hard"]
    assert oracle.difficulty_tertiles([]) == []
    # a remainder goes to the easier tiers first
    assert oracle.difficulty_tertiles([0.4, 0.3, 0.2, 0.1]) == ["easy", "easy", "medium", "hard"]
    assert oracle.difficulty_tertiles([0.5, 0.4, 0.3, 0.2, 0.1]) == ["easy", "easy", "medium", "medium", "hard"]
    tiers = oracle.difficulty_tertiles([random.Random(i).random() for i in range(36)])
    assert [tiers.count(t) for t in ("easy", "medium", "hard")] == [12, 12, 12]


# ---------------------------------------------------------------------------------
# the authors' task file
# ---------------------------------------------------------------------------------
def test_authors_rows_agree_or_capacity_binds():
    if not AUTHORS.exists():
        pytest.skip(f"authors' task file not found at {AUTHORS}")
    rows = [json.loads(line) for line in AUTHORS.read_text().splitlines() if line.strip()]
    agree = binds = 0
    disagreements = []
    for row in rows:
        task = Task.from_row(row)
        res = oracle.solve(task)
        theirs = row["optimal"]["cost"]
        if res.feasible and res.cost == theirs:
            agree += 1
        elif res.capacity_binds:
            binds += 1
        else:
            disagreements.append((row["task_id"], res.cost, theirs))
        if res.feasible:  # our schedule is feasible on their calendars
            for m in task.meetings:
                for a in m.participants:
                    it = task.calendars[a][res.assignments[m.id]]
                    assert it is None or (isinstance(it, Errand) and not it.blocked)
    print(f"\nauthors' rows: {len(rows)}, agree {agree}, capacity binds {binds}, disagree {len(disagreements)}")
    assert not disagreements, disagreements
    assert agree + binds == len(rows)
