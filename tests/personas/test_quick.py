"""The quick-action codec (``personas/quick.py``): what a human's quick keys send, in each
scripted protocol, and what the bots read back out of it (moved from tests/tui/test_units.py)."""

from __future__ import annotations

from engine import protocol
from personas import quick
from personas.scripted.protocol import read_text


# -- quick actions ------------------------------------------------------------------------------------
def test_quick_actions_write_english_and_imap_payloads():
    [m] = quick.ask_costs(2, 4, [0, 1, 2, 5], channel="dm", to=[3])
    assert m.to == 3 and m.payload == {"protocol": "imap", "kind": "cost_request", "meeting_id": 4,
                                       "slots": [0, 1, 2, 5]}
    assert "slots 0, 1, 2 and 5" in m.content
    a, b = quick.share_costs(2, 4, {0: 0, 3: 10, 5: None}, channel="dm", to=[0, 1])
    assert a.payload["costs"] == {"0": 0, "3": 10, "5": None} and (a.to, b.to) == (0, 1)
    assert "free at slot 0" in a.content and "slot 3 cost 10" in a.content and "can't do slot 5" in a.content
    [p] = quick.propose(2, 4, [7], channel="participant_groupchat", to=[])
    assert p.type == "participant_groupchat" and p.payload["kind"] == "decision" and p.payload["slot"] == 7
    [p2] = quick.propose(2, 4, [7, 9], channel="dm", to=[1])
    assert p2.payload is None and "slots 7 and 9" in p2.content
    [y] = quick.accept(2, 4, 7, channel="dm", to=[1], protocol=None)
    assert y.payload is None and "slot 7 works" in y.content
    # What the bots read back out of it.
    assert read_text(y.content, 16).works == {7}
    assert read_text(quick.decline(2, 4, 7, channel="dm", to=[1])[0].content, 16).fails == {7}
    assert protocol.slots_in_text("how about slots 3-5 or slot 9?", 16) == [3, 4, 5, 9]


def test_quick_actions_type_for_each_scripted_protocol():
    # SD-MAP: the initiator proposes and confirms; a responder replies PENDING / IMPOSSIBLE.
    [p] = quick.propose(2, 4, [7], channel="dm", to=[3], protocol="sdmap", initiator=True)
    assert p.payload == {"protocol": "sdmap", "kind": "propose", "meeting_id": 4, "slot": 7}
    [p] = quick.propose(2, 4, [7], channel="dm", to=[0], protocol="sdmap", initiator=False)
    assert p.payload is None and "slot 7" in p.content  # a responder's counter-proposal: English
    [y] = quick.accept(2, 4, 7, channel="dm", to=[0], protocol="sdmap", answering="propose")
    assert y.payload == {"protocol": "sdmap", "kind": "reply", "meeting_id": 4, "slot": 7, "status": "PENDING"}
    [n] = quick.decline(2, 4, 7, channel="dm", to=[0], protocol="sdmap", answering="propose")
    assert n.payload["kind"] == "reply" and n.payload["status"] == "IMPOSSIBLE"
    [c] = quick.accept(2, 4, 7, channel="dm", to=[3], protocol="sdmap", answering="reply", initiator=True)
    assert c.payload == {"protocol": "sdmap", "kind": "confirm", "meeting_id": 4, "slot": 7}
    [s] = quick.share_costs(2, 4, {0: 0}, channel="dm", to=[0], protocol="sdmap")
    assert s.payload is None and "free at slot 0" in s.content
    # DSM: the initiator offers (proposals) and decides; a responder scores.
    [r] = quick.ask_costs(2, 4, [1, 5], channel="dm", to=[3], protocol="dsm", initiator=True)
    assert r.payload["kind"] == "proposals" and r.payload["slots"] == [1, 5]
    [s] = quick.share_costs(2, 4, {0: 0, 3: 10, 5: None}, channel="dm", to=[0], protocol="dsm")
    assert s.payload["kind"] == "scores" and s.payload["scores"] == {"0": 11, "3": 7, "5": 0}
    [d] = quick.propose(2, 4, [7], channel="dm", to=[3], protocol="dsm", initiator=True)
    assert d.payload == {"protocol": "dsm", "kind": "decision", "meeting_id": 4, "slot": 7}
    [y] = quick.accept(2, 4, 7, channel="dm", to=[0], protocol="dsm", answering="proposals", my_cost=0)
    assert y.payload["kind"] == "scores" and y.payload["scores"] == {"7": 11}
    [n] = quick.decline(2, 4, 7, channel="dm", to=[0], protocol="dsm", answering="proposals")
    assert n.payload["scores"] == {"7": 0}
    # Scores come back as costs for the cheapest-common-slot hint.
    assert protocol.costs_in_payload({"protocol": "dsm", "kind": "scores", "scores": {"3": 11, "4": 7, "5": 0}}) \
        == {3: 0, 4: 15, 5: None}
    assert [quick.protocol_of(m) for m in ("imap", "sdmap", "dsm-welfare", "dsm-private", "human", "gpt")] \
        == ["imap", "sdmap", "dsm", "dsm", None, None]
