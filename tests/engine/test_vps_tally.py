"""The one reduction of belief updates to VPS (``engine.privacy.tally``; issue 23 step 2).

Reports, replay, the metrics widget and the study export each summed belief updates their
own way before; now they read one :class:`engine.privacy.VpsTally`.  Checked here on a game
with typed, free-text and gossip updates, against the estimator's own figures and by hand.
"""

from __future__ import annotations

import pytest

from engine.actions import Message
from engine.events import ListSink
from engine.game import GameConfig, run_game
from engine.privacy import P0, belief_updates, credit, privacy_metrics, tally
from engine.seats import Reply

from doubles import ScriptPersona, hand_task


def _typed(kind, proto="sdmap", **fields):
    return {"protocol": proto, "kind": kind, "meeting_id": 1, **fields}


@pytest.fixture(scope="module")
def game():
    import asyncio

    task = hand_task([[None] * 8, [None] * 8, [None] * 8], [[0, 1, 2]])
    s0 = ScriptPersona(speak=[Reply(actions=(Message("participant_groupchat", "I propose slot 2.", None,
                                                     _typed("propose", slot=2)),))], plan={1: 2})
    s1 = ScriptPersona(speak=[Reply(actions=(Message("participant_groupchat", "I'm free at slot 3."),))], plan={1: 2})
    s2 = ScriptPersona(speak=[Reply(actions=(Message("dm", "Agent 1 is busy at slot 5.", 0),))], plan={1: 2})
    res = asyncio.run(run_game(task, [s0, s1, s2], GameConfig(deterministic=True,
                                                              channels=("dm", "participant_groupchat")), ListSink()))
    return task, res.trace["events"]


def test_the_tally_agrees_with_the_estimator(game):
    task, events = game
    m = privacy_metrics(task, events)
    ups = belief_updates(task, events)
    t = tally(ups, task.num_agents)
    assert t.per_target == pytest.approx(m["per_target_vps"])
    assert sum(t.by_seq.values()) == pytest.approx(m["vps"])  # credits telescope to the total
    typed = [a for a, _ in t.by_source]
    text = [b for _, b in t.by_source]
    assert sum(typed) == pytest.approx(m["typed_vps"])
    assert sum(text) == pytest.approx(m["freetext_vps"] + m["gossip_vps"])
    assert [a + b for a, b in t.by_source] == pytest.approx(t.per_target)
    assert sum(t.per_round_pair.values()) == pytest.approx(m["vps"])
    assert {(r, tt) for r, _o, tt in t.per_round_pair} == set(t.per_round_target)


def test_the_tally_by_hand_and_up_to_an_event(game):
    task, events = game
    ups = belief_updates(task, events)
    first = ups[0]
    assert credit(first) == abs(first["after"] - P0) - abs(first["before"] - P0)
    only_first = tally(ups, task.num_agents, upto_seq=first["seq"])
    same_seq = [u for u in ups if u["seq"] == first["seq"]]
    assert set(only_first.by_seq) == {first["seq"]}
    assert only_first.by_seq[first["seq"]] == pytest.approx(sum(abs(u["after"] - P0) for u in same_seq))
    # SD propose: e = 0.85, α = 0.70 about agent 0, for each of the two readers
    assert only_first.per_target[0] == pytest.approx(2 * (0.3 * 0.5 + 0.7 * 0.85 - 0.5))
