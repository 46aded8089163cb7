"""Report numbers against hand-computed values (lab.report), on small databases.

The three synthetic games below carry per-seat metrics chosen by hand; every expected
number in the tests is worked out in the comments from those values.  Real games (our
scripted protocols, a hand task with test personas) check the parts computed from the
events: per-meeting excess and VPS for the first-speaker effect, and the level costs of
imported traces.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import random

import pytest
from doubles import PlanPersona

import lab.report as R
from engine.events import ListSink
from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from engine.model import Task
from personas.registry import make_personas
from saves.store import Store


def run_sync(coro):
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        return ex.submit(asyncio.run, coro).result()


def seat(assigned, sched, excess, signed, fair, msgs, vps, shown=None):
    return {"meetings_assigned": assigned, "meetings_scheduled": sched, "success": sched / assigned,
            "excess": excess, "excess_shown": excess if shown is None else shown, "signed_excess": signed,
            "fairness": fair, "messages_sent": msgs, "messages_per_meeting": msgs / max(sched, 1), "vps": vps}


def synth(gid, started, mode, agents, seats, coordination):
    n = len(seats)
    row = {"task_id": f"t-{gid}", "calendars": [[None] * 4 for _ in range(n)],
           "meetings": [{"id": 1, "participants": [0, 1]}], "calbench": {"cost_mode": mode}}
    return {"game_id": gid, "config": {"num_agents": n, "agents": [
                {"type": "llm" if a.startswith("llm:") else "scripted", "model": a.split(":")[-1]} for a in agents]},
            "events": [], "final_state": {}, "started_at": started, "ended_at": started, "stopped": False,
            "metrics": {"coordination_rate": coordination,
                        "per_seat": [dict(agent_id=i, **s) for i, s in enumerate(seats)]},
            "task": row, "saved": {"agents": ",".join(agents), "status": "completed"}}


GAMES = [
    # g1, uniform: signed excess 1, -1, 0 (mean 0) -> fairness 1, 1, 0.
    synth("g1", "2026-01-01T00:00:01", "uniform", ["llm:a", "llm:b", "imap"],
          [seat(2, 2, 1, 1, 1.0, 6, 10.0), seat(2, 1, 0, -1, 1.0, 3, 4.0), seat(2, 2, 0, 0, 0.0, 4, 17.0)], 0.5),
    # g2, uniform, every seat llm:a (a "protocol" game for Table 2); signed 0, 2, -2.
    synth("g2", "2026-01-01T00:00:02", "uniform", ["llm:a", "llm:a", "llm:a"],
          [seat(2, 2, 0, 0, 0.0, 2, 6.0), seat(2, 2, 2, 2, 2.0, 3, 8.0), seat(2, 0, 0, -2, 2.0, 1, 0.0)], 0.5),
    # g3, varied: llm:b pays 3 levels (100 shown) too much; signed 3, 0, -3.
    synth("g3", "2026-01-01T00:00:03", "varied", ["llm:b", "llm:a", "imap"],
          [seat(2, 2, 3, 3, 3.0, 5, 8.0, shown=100), seat(2, 2, 0, 0, 0.0, 4, 5.0), seat(2, 2, 0, -3, 3.0, 4, 12.0)],
          1.0),
]


async def _rows(games, tmp_path=None):
    store = await Store.open(":memory:" if tmp_path is None else tmp_path)
    try:
        for g in games:
            assert await store.import_trace(json.loads(json.dumps(g)))
        rows = await store.game_results()
        traces = [await store.load_trace(g["game_id"]) for g in await store.list_games()]
        return rows, traces
    finally:
        await store.close()


@pytest.fixture(scope="module")
def rows():
    return run_sync(_rows(GAMES))[0]


def by(rows_, **key):
    hit = [r for r in rows_ if all(r[k] == v for k, v in key.items())]
    assert len(hit) == 1, (key, rows_)
    return hit[0]


def test_table1_by_persona_hand_computed(rows):
    rep = R.build_report(rows, group_by="persona")
    t = rep["table"]
    assert [(r["cost_mode"], r["persona"]) for r in t] == [
        ("uniform", "imap"), ("uniform", "llm:a"), ("uniform", "llm:b"),
        ("varied", "imap"), ("varied", "llm:a"), ("varied", "llm:b")]
    a = by(t, cost_mode="uniform", persona="llm:a")
    # Seats g1/0, g2/0, g2/1, g2/2: scheduled 2, 2, 2, 0; excess 1, 0, 2, 0; messages 6, 2, 3, 1;
    # fairness 1, 0, 2, 2; VPS 10, 6, 8, 0.
    assert a["seats"] == 4 and a["games"] == 2
    assert a["meetings"] == pytest.approx(1.5)
    assert a["coordination"] == pytest.approx(0.75)
    assert a["excess"] == pytest.approx(0.75)
    assert a["messages_per_meeting"] == pytest.approx(12 / 6)  # pooled, not the mean of 3, 1, 1.5, 1
    assert a["fairness"] == pytest.approx(1.25)
    assert a["vps"] == pytest.approx(6.0)
    b = by(t, cost_mode="uniform", persona="llm:b")
    assert (b["seats"], b["meetings"], b["coordination"], b["excess"], b["messages_per_meeting"], b["fairness"],
            b["vps"]) == (1, 1.0, 0.5, 0.0, 3.0, 1.0, 4.0)
    vb = by(t, cost_mode="varied", persona="llm:b")
    assert vb["excess"] == 3.0 and vb["excess_shown"] == 100.0 and vb["messages_per_meeting"] == 2.5
    assert by(t, cost_mode="uniform", persona="imap")["scripted"] is True


def test_table1_by_cost_mode_and_model(rows):
    t = R.build_report(rows, group_by="cost_mode")["table"]
    u, v = by(t, cost_mode="uniform"), by(t, cost_mode="varied")
    # Uniform: six seats of g1 and g2.  Scheduled 2,1,2,2,2,0; messages 6,3,4,2,3,1.
    assert u["seats"] == 6 and u["games"] == 2
    assert u["meetings"] == pytest.approx(9 / 6) and u["coordination"] == pytest.approx(4.5 / 6)
    assert u["excess"] == pytest.approx(3 / 6) and u["messages_per_meeting"] == pytest.approx(19 / 9)
    assert u["fairness"] == pytest.approx(1.0) and u["vps"] == pytest.approx(45 / 6)
    assert v["seats"] == 3 and v["excess"] == pytest.approx(1.0) and v["messages_per_meeting"] == pytest.approx(13 / 6)
    assert v["fairness"] == pytest.approx(2.0) and v["vps"] == pytest.approx(25 / 3)
    models = R.build_report(rows, group_by="model")["table"]
    assert [(r["cost_mode"], r["model"]) for r in models][:3] == [("uniform", "a"), ("uniform", "b"),
                                                                    ("uniform", "imap")]
    assert by(models, cost_mode="uniform", model="a")["seats"] == 4
    with pytest.raises(ValueError):
        R.build_report(rows, group_by="colour")


def test_table2_only_games_with_one_persona(rows):
    t2 = R.build_report(rows)["protocols"]
    assert len(t2) == 1  # g1 and g3 mix personas
    p = t2[0]
    assert (p["persona"], p["cost_mode"], p["games"], p["seats"]) == ("llm:a", "uniform", 1, 3)
    assert p["coordination"] == 0.5  # the game's share of meetings scheduled, not the mean seat success 2/3
    assert p["excess"] == pytest.approx(2 / 3) and p["fairness"] == pytest.approx(4 / 3)
    assert p["messages_per_meeting"] == pytest.approx(6 / 4)
    assert p["vps"] == pytest.approx(14.0)  # game VPS: the sum over its targets


def test_completion_conditioned_regret(rows):
    reg = R.build_report(rows)["regret"]
    a = by(reg, cost_mode="uniform", persona="llm:a")
    # Full-completion seats: g1/0 (excess 1), g2/0 (0), g2/1 (2); g2/2 scheduled nothing.
    assert (a["seats"], a["full_completion"]) == (4, 3)
    assert a["full_completion_share"] == pytest.approx(0.75)
    assert a["nonzero_regret_share"] == pytest.approx(2 / 3)
    assert a["excess_per_meeting"] == pytest.approx((1 / 2 + 0 / 2 + 2 / 2) / 3)
    b = by(reg, cost_mode="uniform", persona="llm:b")
    assert (b["full_completion"], b["nonzero_regret_share"], b["excess_per_meeting"]) == (0, None, None)
    vb = by(reg, cost_mode="varied", persona="llm:b")
    assert (vb["full_completion_share"], vb["nonzero_regret_share"], vb["excess_per_meeting"]) == (1.0, 1.0, 1.5)


def test_leaderboard_pools_models_and_lists_protocols_apart(rows):
    lb = R.build_report(rows, with_leaderboard=True)["leaderboard"]
    names = {r["name"]: r for r in lb["models"]}
    assert set(names) == {"llm:a", "llm:b"}  # imap is a reference protocol, never rated
    # g1 and g3 hold both models; g2 holds only llm:a and rates nothing.
    assert names["llm:a"]["rated_games"] == 2 and names["llm:b"]["rated_games"] == 2
    a, b = names["llm:a"], names["llm:b"]
    # Raw means: llm:a seats succeed 1,1,1,0,1; excess shown 1,0,2,0,0; excess VPS (VPS − 5, floored) 5,1,3,0,0.
    assert (a["games"], a["seats"]) == (3, 5)
    assert a["coordination"] == pytest.approx(0.8) and a["excess"] == pytest.approx(0.6)
    assert a["excess_vps"] == pytest.approx(9 / 5)
    # llm:a out-coordinated llm:b in g1 and tied in g3.
    assert a["coordination_mu"] > 25 > b["coordination_mu"]
    # The same updates by hand: per metric, g1 then g3 (games in started_at order), teams in
    # name order, scores = coordination, −excess (shown), −excess VPS; each with its margin.
    from openskill.models import PlackettLuce

    scores = {"coordination": [(1.0, 0.5), (1.0, 1.0)], "excess": [(-1.0, 0.0), (0.0, -100.0)],
              "vps": [(-5.0, 0.0), (0.0, -3.0)]}
    for m, margin in (("coordination", 0.2), ("excess", 10.0), ("vps", 5.0)):
        model = PlackettLuce(margin=margin)
        ra, rb = model.rating(name="llm:a"), model.rating(name="llm:b")
        for sa, sb in scores[m]:
            [[ra], [rb]] = model.rate([[ra], [rb]], scores=[sa, sb])
        assert (a[f"{m}_mu"], a[f"{m}_sigma"]) == pytest.approx((ra.mu, ra.sigma)), m
        assert (b[f"{m}_mu"], b[f"{m}_sigma"]) == pytest.approx((rb.mu, rb.sigma)), m
    for r in lb["models"]:
        assert r["mmr"] == pytest.approx(sum(r[f"{m}_mu"] - 3 * r[f"{m}_sigma"] for m in R.METRICS) / 3)
    assert [r["rank"] for r in lb["models"]] == [1, 2]
    assert lb["models"][0]["mmr"] >= lb["models"][1]["mmr"]
    (imap,) = lb["protocols"]
    assert imap["name"] == "imap" and imap["games"] == 2 and imap["coordination"] == 1.0
    assert imap["excess_vps"] == pytest.approx(((17 - 5) + (12 - 5)) / 2)
    assert lb["margins"] == {"coordination": 0.2, "excess": 10.0, "vps": 5.0}


def test_leaderboard_is_deterministic_whatever_the_row_order(rows):
    ref = json.dumps(R.public(R.build_report(rows, with_leaderboard=True)), sort_keys=True)
    for seed in range(5):
        shuffled = list(rows)
        random.Random(seed).shuffle(shuffled)
        assert json.dumps(R.public(R.build_report(shuffled, with_leaderboard=True)), sort_keys=True) == ref


def _rec(gid, started, persona, success, excess_shown=0.0, vps=0.0):
    return {"game_id": gid, "started_at": started, "agent_id": 0, "persona": persona, "model": persona,
            "scripted": R.is_scripted(persona), "success": success, "excess_shown": excess_shown, "vps": vps,
            "cost_mode": "uniform"}


def test_score_margins_are_used():
    """Scores, not only ranks, reach OpenSkill: once ratings differ, a win by more than the
    margin updates differently from a win by less (rank-only updates would be identical)."""
    def mu_after(second_gap):
        recs = [_rec("g1", "1", "llm:x", 1.0), _rec("g1", "1", "llm:y", 0.5),
                _rec("g2", "2", "llm:x", 0.5), _rec("g2", "2", "llm:y", 0.5 + second_gap)]
        lb = R.leaderboard(recs)
        return next(r for r in lb["models"] if r["name"] == "llm:x")["coordination_mu"]

    assert mu_after(0.1) == pytest.approx(mu_after(0.15))  # both under the 0.2 margin
    assert mu_after(0.5) != pytest.approx(mu_after(0.1))   # over it: the margin factor applies


def test_protocols_rank_by_coordination_then_excess_then_vps():
    recs = [_rec("g1", "1", "imap", 1.0, 5.0, 20.0), _rec("g2", "2", "sdmap", 1.0, 2.0, 6.0),
            _rec("g3", "3", "dsm-private", 0.5, 0.0, 0.0), _rec("g4", "4", "dsm-welfare", 1.0, 2.0, 5.0)]
    lb = R.leaderboard(recs)
    assert lb["models"] == []
    assert [r["name"] for r in lb["protocols"]] == ["dsm-welfare", "sdmap", "imap", "dsm-private"]
    # excess VPS: max(0, VPS − 5): 15, 1, 0, 0
    assert [r["excess_vps"] for r in lb["protocols"]] == [0.0, 1.0, 15.0, 0.0]


# -- parts computed from the events ------------------------------------------------------
def E(i, c=1):
    return {"errand_id": i, "cost": c}


def hand_task():
    # Agent 0 has an errand at slot 0; everything else is free.
    return Task.from_row({"task_id": "fs", "seed": 1, "calendars": [[E(1), None, None, None], [None] * 4, [None] * 4],
                          "meetings": [{"id": 1, "participants": [0, 1], "speaker_order": [1, 0]},
                                       {"id": 2, "participants": [0, 2], "speaker_order": [0, 2]}]})


def test_first_speaker_rows_hand_computed():
    task = hand_task()
    plan = {1: 0, 2: 2}  # M1 at slot 0 (agent 0 must move its errand), M2 at slot 2 (free for both)
    res = run_sync(run_game(task, [PlanPersona(plan) for _ in range(3)], GameConfig(deterministic=True), ListSink()))
    trace = json.loads(json.dumps(res.trace))
    rows = R.agent_meeting_rows(trace)
    got = {(r["agent_id"], r["meeting_id"]): r for r in rows}
    assert set(got) == {(0, 1), (1, 1), (0, 2), (2, 2)}
    assert [got[k]["first"] for k in [(0, 1), (1, 1), (0, 2), (2, 2)]] == [False, True, True, False]
    # The oracle puts both meetings on free slots (cost 0); agent 0 paid 1 level for M1.
    assert [got[k]["excess"] for k in [(0, 1), (1, 1), (0, 2), (2, 2)]] == [1, 0, 0, 0]
    # The first speaker's "Let's meet at slot k." is a proposal (evidence 0.70, strength 0.25):
    # its one reader's belief goes 0.5 -> 0.55, so the round's VPS about the speaker is 0.05.
    assert got[(1, 1)]["vps"] == pytest.approx(0.05) and got[(0, 2)]["vps"] == pytest.approx(0.05)
    assert got[(0, 1)]["vps"] == 0.0 and got[(2, 2)]["vps"] == 0.0
    records = [{"game_id": trace["game_id"], "agent_id": a, "persona": "plan", "model": "plan", "cost_mode": "uniform",
                "scripted": False} for a in range(3)]
    (fs, _all) = R.first_speaker(rows, records)
    # Only agent 0 spoke both first (M2) and later (M1): one pair, Δ = first − subsequent.
    assert (fs["group"], fs["agent_meetings"], fs["first_n"], fs["subsequent_n"]) == ("plan", 4, 2, 2)
    assert fs["vps_pairs"] == 1 and fs["delta_vps"] == pytest.approx(0.05 - 0.0)
    assert fs["excess_pairs"] == 1 and fs["delta_excess"] == pytest.approx(0 - 1)
    assert fs["first_vps"] == pytest.approx(0.05) and fs["subsequent_vps"] == 0.0
    assert fs["first_excess"] == 0 and fs["subsequent_excess"] == pytest.approx(0.5)
    assert _all["group"] == "(all)" and _all["agent_meetings"] == 4


def test_trace_facts_agree_with_the_engine_metrics():
    """Levels and VPS folded from the events equal what the game recorded, seat by seat."""
    for seed, spec, mode in [(3, "imap", "uniform"), (4, "sdmap", "varied"), (6, "dsm-welfare", "varied"),
                             (8, "imap,sdmap,dsm-welfare,dsm-private,imap", "uniform")]:
        res = run_sync(run_game(generate_scenario(seed, cost_mode=mode), make_personas(spec, 5),
                                GameConfig(deterministic=True)))
        f = R.trace_facts(json.loads(json.dumps(res.trace)))
        ps = res.trace["metrics"]["per_seat"]
        assert f["cost_levels"] == [p["cost"] for p in ps], spec
        assert f["oracle_levels"] == [p["oracle_cost"] for p in ps], spec
        assert f["vps"] == pytest.approx([p["vps"] for p in ps], abs=1e-5), spec
        assert len(f["rows"]) == 15 and sum(r["first"] for r in f["rows"]) == 5


def test_imported_authors_traces_get_levels_and_vps_from_their_events(compat_dir):
    traces = [json.loads(p.read_text()) for p in sorted(compat_dir.glob("authors_trace_*.json"))]
    rows, loaded = run_sync(_rows(traces))
    assert all(r["vps"] is None and r["excess"] is None for r in rows)  # the store has shown units only
    rep = R.build_report(rows, loaded, with_leaderboard=True)
    t = rep["table"]
    assert {(r["cost_mode"], r["persona"]) for r in t} == {("uniform", "imap"), ("uniform", "dsm-private"),
                                                           ("varied", "dsm-welfare")}
    imap = by(t, persona="imap")
    # IMAP: 30 messages over 15 scheduled participant-meetings; every costs reply reveals its
    # 16 slots to the initiator and each decision one more: 5 rounds x 17 = 85 for the game.
    assert imap["messages_per_meeting"] == pytest.approx(2.0)
    assert imap["vps"] == pytest.approx(85 / 5)
    assert by(rep["protocols"], persona="imap")["vps"] == pytest.approx(85.0)
    welfare = by(t, persona="dsm-welfare")
    # Their varied trace shows costs 1/100/1000; in levels (1/2/3) the excess is small.
    assert welfare["excess"] is not None and welfare["excess"] < welfare["excess_shown"]
    assert welfare["fairness"] is not None
    assert rep["first_speaker"] and all(r["agent_meetings"] > 0 for r in rep["first_speaker"])
    assert [r["name"] for r in rep["leaderboard"]["protocols"]][0] == "imap"
