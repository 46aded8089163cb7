"""Issue 35 item 6: one truth (the fold), one diff, one tolerance, scoring only in the stage.

Before: the reflection and judge scorers took each round's truth from the recorded
``resolution.calendars`` (editing only the record moved reflection VPS while VPS stayed);
``calbench rescore`` re-scored without checking the record; ``verify`` (relative 1e-6,
recorded keys) and ``rescore`` (1e-9, both sides) diffed with two functions, so one figure
could be "verified" and "changed" at once; the judge wrote ``metrics["judge_vps"]`` after
``game_end`` was emitted; ``run_game(metrics_fn=...)`` scored outside the stage.
"""

from __future__ import annotations

import copy
import inspect
import json

import pytest

from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from engine.verify import rescore_trace, verify_trace
from lab.rescore import RescoreRefused, rescore_db
from personas.llm.factory import make_llm_persona
from personas.registry import make_personas
from saves.store import Store

from .helpers import our_trace, run_async


async def _reflected_game(mock, make_settings, seed=4):
    task = generate_scenario(seed)
    settings = make_settings(mock, reflection=True)
    seats = [make_llm_persona("llm:mock-model", settings) if a % 2 else make_personas("imap", 1)[0]
             for a in range(task.num_agents)]
    res = await run_game(task, seats, GameConfig(deterministic=True))
    return json.loads(json.dumps(res.trace))


def _record_edited(trace):
    """Only the record: every resolution's recorded calendars emptied (the fold is untouched)."""
    t = copy.deepcopy(trace)
    for e in t["events"]:
        if e["type"] == "resolution":
            e["data"]["calendars"] = [[None] * len(c) for c in e["data"]["calendars"]]
    return t


async def test_reflection_and_judge_take_the_truth_from_the_fold(mock, make_settings):
    trace = await _reflected_game(mock, make_settings)
    assert trace["metrics"]["reflection_vps"]["raw_total"] > 0
    # a judge's record, as the judge scorer reads it: one shift per message
    msgs = [e for e in trace["events"] if e["type"].endswith("_sent")]
    judge = {"model": "j", "records": [{"seq": e["seq"], "round": e["data"]["round"], "sender": e["data"]["from_agent"],
                                        "observers": [e["data"]["to_agent"]], "shift": [3, -3] * 8} for e in msgs]}
    truth = rescore_trace({**trace, "judge": judge}).metrics
    edited = rescore_trace({**_record_edited(trace), "judge": judge}).metrics
    assert edited["vps"] == truth["vps"]
    assert edited["reflection_vps"] == truth["reflection_vps"] == trace["metrics"]["reflection_vps"]
    assert edited["judge_vps"] == truth["judge_vps"]
    assert not verify_trace(_record_edited(trace)).verified  # the fold still says the record was edited


def test_rescore_checks_the_record_first(tmp_path):
    db = str(tmp_path / "r.db")
    good, bad = our_trace(3), our_trace(4)
    bad = copy.deepcopy(bad)
    next(e for e in bad["events"] if e["type"] == "turn_end")["data"]["text"] = "edited"  # the record only

    async def fill():
        async with await Store.open(db) as store:
            await store.import_trace(good)
            await store.import_trace(bad, verification="unverified", problems=["edited"])
    run_async(fill())
    with pytest.raises(RescoreRefused, match="its record does not verify: event .* turn_end"):
        rescore_db(db, [bad["game_id"]], dry_run=True)
    out = {r.game_id: r for r in rescore_db(db, None, dry_run=True)}
    assert out[good["game_id"]].status == "unchanged"
    assert out[bad["game_id"]].status == "skipped" and "does not verify" in out[bad["game_id"]].reason


@pytest.mark.parametrize("rel", [1e-13, 1e-7, 1e-3])
def test_verify_and_rescore_agree_on_every_difference(tmp_path, rel):
    """One figure nudged: 'verified' exactly when rescore calls it unchanged."""
    import engine.verify
    import lab.rescore

    assert lab.rescore.diff_scores is engine.verify.diff_scores
    trace = copy.deepcopy(our_trace(3))
    trace["metrics"]["vps"] = trace["metrics"]["vps"] * (1 + rel) + rel
    trace["events"][-1]["data"]["vps"] = trace["metrics"]["vps"]
    db = str(tmp_path / f"t{rel}.db")

    async def fill():
        async with await Store.open(db) as store:
            await store.import_trace(trace)
    run_async(fill())
    verified = verify_trace(trace).verified
    [rec] = rescore_db(db, None, dry_run=True)
    assert verified == (rec.status == "unchanged")
    assert verified == (rel < 1e-9)


async def test_the_judge_is_scored_in_the_stage_so_game_end_and_trace_agree(tmp_path, make_settings):
    from calbench_devtools.mock_endpoint import MockLLMServer
    from lab.runner import _judge
    from lab.session import Session, run_session

    task = generate_scenario(3)
    async with MockLLMServer(policy="judge") as mock:
        judge = make_settings(mock, model="judge-model", temperature=0.0)
        session = Session(task=task, seats=make_personas("imap", task.num_agents),
                          config=GameConfig(deterministic=True), game_id="judged", agents="imap",
                          settings_key="k", extra_config={})
        async with await Store.open(tmp_path / "j.db") as store:
            out = await run_session(session, store=store, stream=True, after=_judge(task, judge))
            saved = await store.load_trace("judged")
    trace = out.trace
    end = trace["events"][-1]["data"]
    assert trace["judge"]["model"] == "judge-model" and trace["metrics"]["judge_vps"]["messages"] > 0
    assert end["judge_vps"] == trace["metrics"]["judge_vps"] == saved["metrics"]["judge_vps"]
    assert trace["scoring"]["judge"] >= 1
    assert verify_trace(json.loads(json.dumps(saved))).verified


def test_run_game_scores_only_through_the_stage():
    assert "metrics_fn" not in inspect.signature(run_game).parameters
