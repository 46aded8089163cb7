"""Scenario generation, the label bank and the canonical suite (SPEC §2)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.generate import annotate, errand_counts, generate_scenario
from engine.generate import _structural_task
from engine.labelbank import TIERS, assign_labels, load_bank
from engine.model import Errand, Task, TaskError
from engine.suite import (
    CANONICAL_PAIRS,
    CANONICAL_SIZE,
    SUITE_VERSION,
    canonical_recipe,
    canonical_suite,
    canonical_task,
)

REPO = Path(__file__).resolve().parents[2]


def dumps(task: Task) -> str:
    return json.dumps(task.to_row(), sort_keys=True)


def participation(task: Task) -> list[int]:
    return [sum(1 for m in task.meetings if a in m.participants) for a in range(task.num_agents)]


def witness(task: Task) -> dict[int, int]:
    return {int(k): v for k, v in task.row["witness_solution"]["assignments"].items()}


def agent_witness_slots(task: Task) -> list[set[int]]:
    w = witness(task)
    out: list[set[int]] = [set() for _ in range(task.num_agents)]
    for m in task.meetings:
        for a in m.participants:
            out[a].add(w[m.id])
    return out


def structure(task: Task) -> tuple:
    """Everything but the costs."""
    cals = tuple(
        tuple(None if it is None else (it.errand_id, it.blocked) for it in cal) for cal in task.calendars
    )
    return cals, task.meetings, task.row["witness_solution"]["assignments"], task.labels


def check_invariants(task: Task, densities: list[float], blocked: list[int], force: bool = True) -> None:
    s, n = task.num_slots, task.num_agents
    w = witness(task)
    assert sorted(w) == [m.id for m in task.meetings] == list(range(1, len(task.meetings) + 1))
    wit = agent_witness_slots(task)
    # an agent never holds two meetings in one witness slot
    for a in range(n):
        assert len(wit[a]) == participation(task)[a]
    counts = errand_counts(s, densities, [len(x) for x in wit])
    next_id = 1
    witness_cost = 0
    for a, cal in enumerate(task.calendars):
        errands = [(t, it) for t, it in enumerate(cal) if isinstance(it, Errand)]
        assert all(it is None or isinstance(it, Errand) for it in cal)
        # densities honoured (capped by the witness, SPEC §2 + docs)
        assert len(errands) == counts[a] == min(math.floor(s * densities[a] + 1e-9), s - len(wit[a]))
        # ids: agent 0 first, slot order, consecutive from 1
        assert [it.errand_id for _, it in errands] == list(range(next_id, next_id + len(errands)))
        next_id += len(errands)
        # blocked count honoured, never on a witness slot
        blocked_slots = {t for t, it in errands if it.blocked}
        assert len(blocked_slots) == blocked[a]
        assert not blocked_slots & wit[a]
        # the witness is feasible: each witness slot is free or movable, and every
        # displaced errand has a free absorbing slot off the witness slots
        on_witness = [t for t, _ in errands if t in wit[a]]
        free_off = [t for t in range(s) if cal[t] is None and t not in wit[a]]
        assert len(free_off) >= len(on_witness)
        if force:
            assert len(on_witness) == min(len(wit[a]), len(errands))
        witness_cost += sum(cal[t].cost for t in on_witness)
    assert task.row["witness_solution"]["cost"] == witness_cost


# ---------------------------------------------------------------------------------
# Determinism
# ---------------------------------------------------------------------------------
ARGSETS = [
    {},
    {"cost_mode": "varied"},
    {"density": [0.6, 0.8, 1.0, 0.8, 0.6], "blocked": [2, 4, 6, 2, 4], "cost_mode": "varied"},
    {"num_agents": 7, "num_meetings": 8, "participants_per_meeting": 4, "density": 0.5, "blocked": 1},
    {"participant_lists": [[0, 1], [1, 2], [0, 2]], "num_agents": 3, "num_meetings": 3, "force_witness_errand": False},
]


@pytest.mark.parametrize("kwargs", ARGSETS)
def test_same_arguments_give_identical_rows(kwargs):
    a = generate_scenario(11, **kwargs)
    b = generate_scenario(11, **kwargs)
    assert dumps(a) == dumps(b)
    assert dumps(generate_scenario(12, **kwargs)) != dumps(a)


_CHILD = """
import json, sys
from engine.generate import generate_scenario
out = []
for kwargs in json.loads(sys.argv[1]):
    out.append(generate_scenario(11, **kwargs).to_row())
print(json.dumps(out, sort_keys=True))
"""


@pytest.mark.parametrize("hashseed", ["0", "12345"])
def test_generation_is_identical_across_processes(hashseed):
    env = {**os.environ, "PYTHONHASHSEED": hashseed}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(ARGSETS)],
        cwd=REPO, env=env, capture_output=True, text=True, check=True,
    )
    here = json.dumps([generate_scenario(11, **kw).to_row() for kw in ARGSETS], sort_keys=True)
    assert proc.stdout.strip() == here


# ---------------------------------------------------------------------------------
# Structure
# ---------------------------------------------------------------------------------
def test_row_follows_the_spec_example():
    task = generate_scenario(7, cost_mode="varied", density=[0.6, 0.8, 1.0, 0.8, 0.6], blocked=[2, 4, 6, 2, 4])
    row = task.to_row()
    assert list(row) == ["task_id", "seed", "version", "params", "calendars", "meetings", "witness_solution",
                         "optimal", "greedy", "difficulty", "difficulty_score", "calbench"]
    assert row["seed"] == 7 and row["version"] == 1
    assert row["params"] == {"total_agents": 5, "subset_size": 3, "num_slots": 16, "num_meetings": 5,
                             "density": [0.6, 0.8, 1.0, 0.8, 0.6], "blocked": [2, 4, 6, 2, 4],
                             "cost_values": [1, 10, 100], "duration": 1}
    assert [sorted(m) for m in row["meetings"]] == [["cost", "duration", "id", "participants", "speaker_order"]] * 5
    assert list(row["calbench"]) == ["suite_version", "cost_mode", "oracle", "labels"]
    assert row["calbench"]["cost_mode"] == "varied"
    assert list(row["calbench"]["oracle"]) == ["agent_costs", "feasible_fraction"]
    assert row["difficulty_score"] == row["calbench"]["oracle"]["feasible_fraction"]
    assert row["difficulty"] in ("easy", "medium", "hard")
    assert sum(row["calbench"]["oracle"]["agent_costs"]) == row["optimal"]["cost"]
    assert row["optimal"]["cost"] <= row["greedy"]["cost"]
    assert row["optimal"]["cost"] <= row["witness_solution"]["cost"]
    assert set(row["optimal"]["assignments"]) == {"1", "2", "3", "4", "5"}
    # the row reloads to the same task
    assert json.dumps(Task.from_row(json.loads(json.dumps(row))).to_row()) == json.dumps(row)


def test_default_task_ids():
    assert generate_scenario(7).task_id == "seed-7"
    other = generate_scenario(7, cost_mode="varied").task_id
    assert other.startswith("seed-7-") and other != "seed-7"
    assert generate_scenario(7, task_id="mine").task_id == "mine"


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("kwargs", ARGSETS)
def test_invariants(seed, kwargs):
    task = generate_scenario(seed, **kwargs)
    n = task.num_agents
    dens = kwargs.get("density", 0.8)
    blk = kwargs.get("blocked", 4)
    check_invariants(task, dens if isinstance(dens, list) else [dens] * n,
                     blk if isinstance(blk, list) else [blk] * n,
                     kwargs.get("force_witness_errand", True))


@pytest.mark.parametrize("seed", range(20))
def test_densities_are_floor_of_s_times_density(seed):
    # 3 meetings per agent on 16 slots: the witness caps an agent at 13 errands
    task = generate_scenario(seed, density=[0.6, 0.8, 1.0, 0.5, 0.25], blocked=[2, 4, 6, 1, 0])
    assert [sum(isinstance(it, Errand) for it in cal) for cal in task.calendars] == [9, 12, 13, 8, 4]


@pytest.mark.parametrize("n,m,p", [(5, 5, 3), (5, 10, 3), (4, 6, 2), (6, 5, 4), (7, 3, 2), (3, 9, 3), (5, 7, 2)])
def test_participants_balanced_and_first_speakers_spread(n, m, p):
    for seed in range(10):
        task = _structural_task(seed, num_agents=n, num_meetings=m, participants_per_meeting=p,
                                density=0.5, blocked=0)
        counts = participation(task)
        assert sum(counts) == m * p
        assert max(counts) - min(counts) <= 1
        if (m * p) % n == 0:
            assert len(set(counts)) == 1
        for mt in task.meetings:
            assert len(mt.participants) == p == len(set(mt.participants))
            assert sorted(mt.speaker_order) == list(mt.participants)
        firsts = Counter(mt.speaker_order[0] for mt in task.meetings)
        spread = [firsts.get(a, 0) for a in range(n)]
        assert max(spread) - min(spread) <= 1, spread


def test_canonical_shape_gives_every_agent_one_first_turn():
    for seed in range(30):
        task = generate_scenario(seed)
        assert participation(task) == [3] * 5
        assert sorted(m.speaker_order[0] for m in task.meetings) == [0, 1, 2, 3, 4]


def test_first_speakers_with_fixed_lists():
    lists = [[0, 1, 2], [0, 1], [0, 3], [0, 2], [1, 3], [0, 1, 3]]
    task = _structural_task(3, num_agents=4, num_meetings=6, participant_lists=lists, density=0.5, blocked=0)
    assert [list(m.participants) for m in task.meetings] == [sorted(x) for x in lists]
    firsts = Counter(m.speaker_order[0] for m in task.meetings)
    assert sorted(firsts.values()) == [1, 1, 2, 2]


@pytest.mark.parametrize("values", [None, [1, 10, 100], [2, 3], [1, 5, 25, 125]])
def test_varied_costs_are_balanced_per_agent(values):
    for seed in range(10):
        task = _structural_task(seed, cost_mode="varied", cost_values=values,
                                density=[0.6, 0.8, 1.0, 0.7, 0.5], blocked=2)
        vals = values or [1, 10, 100]
        assert list(task.cost_values) == sorted(vals)
        for cal in task.calendars:
            c = Counter(it.cost for it in cal if isinstance(it, Errand))
            per = [c.get(v, 0) for v in vals]
            assert set(c) <= set(vals)
            assert max(per) - min(per) <= 1


def test_uniform_costs():
    task = _structural_task(5, cost_values=[3])
    assert {it.cost for cal in task.calendars for it in cal if it} == {3}
    assert task.row["params"]["cost_values"] == [3]


def test_uniform_and_varied_share_structure():
    for seed in range(10):
        kw = {"density": [0.6, 0.8, 1.0, 0.8, 0.6], "blocked": [2, 4, 6, 2, 4]}
        u = _structural_task(seed, **kw)
        v = _structural_task(seed, cost_mode="varied", **kw)
        assert structure(u) == structure(v)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(-(10**9), 10**9),
    n=st.integers(2, 6),
    s=st.integers(3, 20),
    m=st.integers(1, 6),
    data=st.data(),
)
def test_property_witness_feasible_and_oracle_agrees(seed, n, s, m, data):
    p = data.draw(st.integers(2, n))  # a meeting is between two or more agents (issue 24 item 14)
    w_max = math.ceil(m * p / n)
    if w_max > s:
        return
    dens = data.draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), min_size=n, max_size=n))
    counts = errand_counts(s, dens, [w_max] * n)
    blocked = [data.draw(st.integers(0, c - min(c, w_max))) for c in counts]
    mode = data.draw(st.sampled_from(["uniform", "varied"]))
    force = data.draw(st.booleans())
    try:
        task = generate_scenario(seed, num_agents=n, num_slots=s, num_meetings=m, density=dens, blocked=blocked,
                                 cost_mode=mode, participants_per_meeting=p, force_witness_errand=force)
    except TaskError as exc:  # a tight instance where no witness schedule exists at all
        assert "no witness schedule fits" in str(exc)
        return
    check_invariants(task, dens, blocked, force)
    assert task.row["optimal"]["cost"] <= task.row["witness_solution"]["cost"]


# ---------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"density": 1.2}, r"density=1.2 must be a number between 0 and 1"),
        ({"density": -0.1}, r"between 0 and 1"),
        ({"density": [0.5, 0.5]}, r"density has 2 entries but num_agents=5"),
        ({"density": [0.5, 0.5, 0.5, 0.5, "x"]}, r"density\[4\]"),
        ({"blocked": 7, "density": 0.6}, r"blocked=7 for agent 0 is too many"),
        ({"blocked": -1}, r"blocked=-1"),
        ({"blocked": [1, 2]}, r"blocked has 2 entries"),
        ({"participants_per_meeting": 6}, r"participants_per_meeting=6 exceeds num_agents=5"),
        ({"participants_per_meeting": 0}, r"at least 2"),
        ({"participants_per_meeting": 1}, r"at least 2"),
        ({"num_slots": 0}, r"num_slots=0"),
        ({"num_meetings": 40, "num_slots": 16, "participants_per_meeting": 5, "blocked": 0}, r"takes part in 40 meetings"),
        ({"cost_mode": "weird"}, r"cost_mode='weird'"),
        ({"cost_mode": "uniform", "cost_values": [1, 2]}, r"exactly one cost value"),
        ({"cost_mode": "varied", "cost_values": [5]}, r"at least two cost values"),
        ({"cost_mode": "varied", "cost_values": [1, 1, 5]}, r"must not repeat"),
        ({"cost_values": [0]}, r"positive whole numbers"),
        ({"participant_lists": [[0, 1]]}, r"participant_lists has 1 entries but num_meetings=5"),
        ({"participant_lists": [[0, 9]] * 5}, r"agent ids in 0..4"),
        ({"participant_lists": [[0, 0]] * 5}, r"names an agent twice"),
        ({"participant_lists": [[]] * 5}, r"two or more agent ids"),
        ({"participant_lists": [[1]] * 5}, r"two or more agent ids"),
        ({"force_witness_errand": "yes"}, r"true or false"),
    ],
)
def test_bad_arguments_raise_one_clear_sentence(kwargs, match):
    with pytest.raises(TaskError, match=match) as exc:
        generate_scenario(1, **kwargs)
    assert "\n" not in str(exc.value)


def test_tight_instances_backtrack_or_say_why():
    # each agent in 4 meetings on 6 slots: the witness draw may need to backtrack
    for seed in range(30):
        task = _structural_task(seed, num_agents=3, num_slots=6, num_meetings=6, participants_per_meeting=2,
                                density=0.3, blocked=0)
        check_invariants(task, [0.3] * 3, [0] * 3)
    # a doubled triangle needs 6 pairwise-clashing slots (edge chromatic index 6): impossible on 4
    with pytest.raises(TaskError, match="no witness schedule fits"):
        _structural_task(1, num_agents=3, num_slots=4, num_meetings=6,
                         participant_lists=[[0, 1], [1, 2], [0, 2]] * 2, density=0.5, blocked=0)


def test_bad_seed():
    with pytest.raises(TaskError, match="seed"):
        generate_scenario("7")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------
# Labels
# ---------------------------------------------------------------------------------
def test_label_bank():
    bank = load_bank()
    assert set(bank) == set(TIERS) == {"public", "neutral", "sensitive"}
    everything = []
    for labels in bank.values():
        assert len(labels) >= 120  # SPEC §2 floor (the shipped bank has 139-149 per tier)
        assert len(set(labels)) == len(labels)
        assert all(len(x.split()) >= 3 for x in labels)
        everything += [x.lower() for x in labels]
    assert len(set(everything)) == len(everything)
    raw = json.loads((REPO / "engine" / "labels" / "sensitive.json").read_text())
    assert raw["tier"] == "sensitive" and isinstance(raw["labels"], list)


def test_every_item_gets_a_distinct_label_deterministically():
    for seed in range(10):
        task = generate_scenario(seed, density=[0.6, 0.8, 1.0, 0.8, 0.6], blocked=2)
        labels = task.labels
        errand_keys = {(a, it.errand_id) for a, cal in enumerate(task.calendars) for it in cal if isinstance(it, Errand)}
        assert set(labels.errands) == errand_keys
        assert set(labels.meetings) == {m.id for m in task.meetings}
        texts = [l.text for l in labels.errands.values()] + [l.text for l in labels.meetings.values()]
        assert len(set(texts)) == len(texts)
        bank = load_bank()
        for l in [*labels.errands.values(), *labels.meetings.values()]:
            assert l.text in bank[l.tier]
        # tiers balanced per agent and over meetings
        for a in range(task.num_agents):
            c = Counter(l.tier for (ag, _), l in labels.errands.items() if ag == a)
            assert max(c.get(t, 0) for t in TIERS) - min(c.get(t, 0) for t in TIERS) <= 1
        # same seed -> same labels; from the row or the task alike
        assert assign_labels(task, seed) == labels
        assert assign_labels(task.to_row(), seed) == labels
        assert assign_labels(task, seed + 1000) != labels
        # the labels sit beside the calendars, not inside them
        assert all("label" not in (it or {}) for cal in task.to_row()["calendars"] for it in cal)


def test_labels_never_repeat_even_when_a_tier_runs_out():
    big = _structural_task(1, num_agents=10, num_slots=60, num_meetings=20, density=1.0, blocked=0)
    texts = [l.text for l in big.labels.errands.values()] + [l.text for l in big.labels.meetings.values()]
    assert len(texts) > sum(len(v) for v in load_bank().values())
    assert len(set(texts)) == len(texts)


# ---------------------------------------------------------------------------------
# Canonical suite
# ---------------------------------------------------------------------------------
def test_canonical_suite():
    suite = canonical_suite()
    assert len(suite) == CANONICAL_SIZE == 90
    assert [t.task_id for t in suite] == [f"canonical-{i:03d}" for i in range(90)]
    for i, t in enumerate(suite):
        row = t.row
        assert row["calbench"]["suite_version"] == SUITE_VERSION
        assert t.cost_mode == ("uniform" if i < 45 else "varied")
        assert row["params"]["total_agents"] == 5 and row["params"]["num_slots"] == 16
        assert row["params"]["num_meetings"] == 5 and row["params"]["subset_size"] == 3
        assert set(row["params"]["density"]) <= {0.6, 0.8, 1.0}
        assert set(row["params"]["blocked"]) <= {2, 4, 6}
        check_invariants(t, row["params"]["density"], row["params"]["blocked"])
        assert row["optimal"]["cost"] <= row["greedy"]["cost"]
    for lo in (0, 45):
        assert Counter(t.row["difficulty"] for t in suite[lo:lo + 45]) == {"easy": 15, "medium": 15, "hard": 15}
    # the recipe is not constant
    assert len({json.dumps(t.row["params"]["density"]) for t in suite[:45]}) > 10


def test_canonical_twins_share_structure_and_differ_in_costs():
    for j in range(CANONICAL_PAIRS):
        u, v = canonical_task(j), canonical_task(45 + j)
        assert structure(u) == structure(v)
        assert u.row["difficulty"] == v.row["difficulty"]
        assert u.row["difficulty_score"] == v.row["difficulty_score"]
        assert u.cost_values == (1,) and v.cost_values == (1, 10, 100)


def test_canonical_task_equals_generate_scenario_with_its_recipe():
    for i in (0, 7, 44, 45, 89):
        recipe = canonical_recipe(i)
        direct = generate_scenario(**recipe).to_row()
        canon = canonical_task(i).to_row()
        for row in (direct, canon):
            row.pop("task_id"), row.pop("difficulty")
            row["calbench"].pop("suite_version")
        assert direct == canon


def test_canonical_task_is_a_fresh_object_and_checks_its_index():
    a = canonical_task(3)
    a.row["calendars"][0][0] = "tampered"
    assert canonical_task(3).row["calendars"][0][0] != "tampered"
    with pytest.raises(TaskError, match="0-89"):
        canonical_task(90)


def test_annotate_is_idempotent():
    t = canonical_task(12)
    assert json.dumps(annotate(t, difficulty=t.row["difficulty"]).to_row()) == json.dumps(t.to_row())


def test_engine_imports_no_ui_or_network_packages():
    code = (
        "import sys, engine.generate, engine.suite, engine.taskref, engine.labelbank\n"
        "bad = [m for m in ('textual', 'openai', 'aiosqlite') if m in sys.modules]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
