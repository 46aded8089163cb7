"""The chat line's tag in a blinded game in the phrasebook's words: what a person calls a
message (⟨proposal⟩ for a protocol's ⟨decision⟩), the same whoever sent it."""

from __future__ import annotations

from calbench_tui.widgets.chat import message_text
from engine.phrasebook import Phrasebook, act_of_payload, act_of_text
from engine.protocol import payload


def _event(frm: int, content: str, p=None) -> dict:
    return {"type": "dm_sent", "round": 1, "turn": 0, "from_agent": frm, "to_agent": 0, "channel": "dm",
            "content": content, "payload": p}


def test_the_tag_is_what_a_person_calls_the_message_whoever_sent_it():
    book = Phrasebook("game-9")
    decision = payload("imap", "decision", 2, slot=5)
    scripted = book.say(act_of_payload(decision), round=1, turn=0, sender=3)
    llm = book.say(act_of_text("Let's schedule Meeting M2 at slot 5.", 16), round=1, turn=0, sender=3)
    assert scripted == llm
    a = message_text(_event(3, scripted, decision), 0, blind=True, person_tags=True).plain
    b = message_text(_event(3, llm, None), 0, blind=True, person_tags=True).plain
    assert a == b and a.endswith("⟨proposal⟩") and "decision" not in a
    # outside a blinded game the protocol's own tag stays
    assert message_text(_event(3, "Decision for meeting M2: slot 5.", decision), 0).plain.endswith("⟨decision⟩")
    assert "⟨" not in message_text(_event(3, scripted, decision), 0, blind=True).plain  # blinded, phrasebook off
