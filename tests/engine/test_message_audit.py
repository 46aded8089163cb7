"""The paper's message audit (§4.3; issue 21): how each sent message is counted
(engine/audit.py, docs/metrics.md "Message audit")."""

from __future__ import annotations

import asyncio
import json

import pytest

from engine.audit import CATEGORIES, classify, pool_audit, seat_audit
from engine.game import GameConfig, run_game
from engine.protocol import payload
from engine.suite import canonical_task
from personas.registry import make_personas


def _typed(proto, kind, **fields):
    return {"content": "(English)", "payload": payload(proto, kind, 1, **fields)}


@pytest.mark.parametrize("data, expected", [
    (_typed("imap", "cost_request", slots=[0, 3]), {"question", "availability"}),
    (_typed("imap", "costs", costs={"0": 0, "3": 10}), {"availability", "cost"}),
    (_typed("imap", "costs", costs={"0": None, "3": None}), {"availability", "refusal"}),
    (_typed("imap", "decision", slot=3), {"proposal"}),
    (_typed("imap", "fail"), {"refusal"}),
    (_typed("sdmap", "propose", slot=4), {"proposal", "question"}),
    (_typed("sdmap", "reply", slot=4, status="PENDING"), {"availability"}),
    (_typed("sdmap", "reply", slot=4, status="IMPOSSIBLE"), {"availability", "refusal"}),
    (_typed("sdmap", "confirm", slot=4), {"proposal"}),
    (_typed("sdmap", "reschedule_request", from_slot=2), {"question"}),
    (_typed("dsm", "proposals", subround=1, slots=[5], L=1, participants=[0, 1]), {"proposal", "question"}),
    (_typed("dsm", "scores", subround=1, scores={"5": 11}), {"availability"}),
    (_typed("dsm", "scores", subround=1, scores={"5": 7, "6": 0}), {"availability", "cost"}),
    (_typed("dsm", "scores", subround=1, scores={"5": 0}), {"availability", "refusal"}),
    (_typed("dsm", "fail", tried=1), {"refusal"}),
    # the authors' JSON in content is typed too
    ({"content": json.dumps({"imap": "costs", "meeting_id": 1, "costs": {"2": 1}})}, {"availability", "cost"}),
])
def test_typed_messages(data, expected):
    cats, typed = classify(data, 16)
    assert typed and cats == expected


@pytest.mark.parametrize("text, expected", [
    ("Slot 5 doesn't work for me. How about slot 7?", {"refusal", "availability", "proposal", "question"}),
    ("I'm free at 3 and 4; slot 9 costs 10.", {"availability", "cost"}),
    ("I can do 2 but it would move an errand.", {"availability", "cost"}),
    ("Which slots work for you?", {"question"}),
    ("Let's go with slot 6.", {"proposal"}),
    ("No.", {"refusal"}),
    ("Hello everyone!", set()),
])
def test_free_text_messages(text, expected):
    cats, typed = classify({"content": text}, 16)
    assert not typed and cats == expected


def test_an_imap_game_counts_exactly():
    task = canonical_task(0)
    trace = asyncio.run(run_game(task, make_personas("imap", 5), GameConfig(deterministic=True))).trace
    seats = seat_audit(trace)
    pooled = pool_audit(seats)
    m = trace["metrics"]["total_cheap_talk_messages"]
    assert pooled["messages"] == m == pooled["typed"] and pooled["free_text"] == 0
    # each meeting: 2 cost_requests (question + availability), 2 costs (availability, cost), 2 decisions
    assert pooled["proposal"]["rate"] == pytest.approx(1 / 3)
    assert pooled["question"]["rate"] == pytest.approx(1 / 3)
    assert pooled["availability"]["rate"] == pytest.approx(2 / 3)
    assert pooled["cost"]["rate"] == pytest.approx(1 / 3)
    assert pooled["refusal"]["rate"] == 0
    # every talking round of a seat states availability (as initiator or as responder)
    assert pooled["availability"]["round_rate"] == 1.0
    assert sum(s["messages"] for s in seats) == m
    assert set(CATEGORIES) <= set(seats[0])


def test_the_authors_imap_trace(compat_dir):
    t = json.loads((compat_dir / "authors_trace_uniform_full_imap_b042_medium_5a_3p_d0p6_c1_2.json").read_text())
    pooled = pool_audit(seat_audit(t))
    assert pooled["messages"] == 30 == pooled["typed"]
    assert [round(pooled[c]["rate"], 4) for c in CATEGORIES] == [0.3333, 0.6667, 0.3333, 0.3333, 0.0]
