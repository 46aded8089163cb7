"""The phrasebook (engine/phrasebook.py): one act, one text, whoever sent it; seeded
wording; every phrasing reads back through the engine's free-text reader."""

from __future__ import annotations

import pytest

from engine.phrasebook import Act, Phrasebook, act_of_payload, act_of_text, person_tag
from engine.protocol import payload, read_text
from personas.llm.persona import LLMPersona

MARKERS = ("PENDING", "IMPOSSIBLE", "impossible", "Decision for meeting", "Agent ", "score", "DSM", "⟨")


def _llm_agree_text(slot: int) -> str:
    """The words an LLM seat's typed ``agree`` action sends (personas/llm/persona.py)."""
    from types import SimpleNamespace

    from engine.observe import TurnObservation

    seat = LLMPersona.__new__(LLMPersona)
    seat.seat = 1
    obs = TurnObservation.__new__(TurnObservation)
    object.__setattr__(obs, "meeting", SimpleNamespace(id=2, participants=(0, 1, 2)))
    object.__setattr__(obs, "view", SimpleNamespace(channels=("dm",)))
    object.__setattr__(obs, "is_participant", True)
    return seat._agree_messages(obs, [slot])[0].content


@pytest.mark.parametrize("seed", ["g-1", "g-2", "study-game-7"])
def test_the_same_typed_action_renders_identically_whichever_partner_kind_sent_it(seed):
    book = Phrasebook(seed)
    # A proposal of slot 5: IMAP's and DSM's decision, SD-MAP's propose, an LLM's (the mock's) sentence.
    proposals = [act_of_payload(payload("imap", "decision", 2, slot=5)),
                 act_of_payload(payload("sdmap", "propose", 2, slot=5)),
                 act_of_payload(payload("dsm", "decision", 2, slot=5, plan="p5", moves=[], participants=[0, 1, 2])),
                 act_of_text("Let's schedule Meeting M2 at slot 5.", 16)]
    # Slot 5 works: SD-MAP's PENDING reply, an LLM's typed agree action.
    works = [act_of_payload(payload("sdmap", "reply", 2, slot=5, status="PENDING")), act_of_text(_llm_agree_text(5), 16)]
    # Slot 5 does not: SD-MAP's IMPOSSIBLE reply, a DSM score of 0, an LLM saying so.
    fails = [act_of_payload(payload("sdmap", "reply", 2, slot=5, status="IMPOSSIBLE")),
             act_of_payload(payload("dsm", "scores", 2, subround=1, scores={"5": 0})),
             act_of_text("Sorry, I can't do slot 5.", 16)]
    for group in (proposals, works, fails):
        assert len(set(group)) == 1 and group[0]
        for r in range(5):
            texts = {book.say(a, round=r, turn=1, sender=3) for a in group}
            assert len(texts) == 1
            (text,) = texts
            assert not any(m in text for m in MARKERS), text
    assert person_tag(book.say(proposals[0], round=0, turn=0, sender=1)) == "proposal"  # ⟨decision⟩ as a person says it


def test_rendering_is_deterministic_per_seed_and_varies_across_a_game():
    act = act_of_payload(payload("imap", "costs", 1, costs={"0": 0, "3": 10, "4": None}))
    a, b, other = Phrasebook("game-a"), Phrasebook("game-a"), Phrasebook("game-b")
    keys = [(r, t, s) for r in range(4) for t in range(3) for s in range(3)]
    first = [a.say(act, round=r, turn=t, sender=s) for r, t, s in keys]
    assert first == [b.say(act, round=r, turn=t, sender=s) for r, t, s in keys]  # the same game: the same words
    assert len(set(first)) >= 5  # wording varies within a game
    assert first != [other.say(act, round=r, turn=t, sender=s) for r, t, s in keys]  # and between games
    for text in first:
        got = read_text(text, 16)
        assert got.works >= {0} and got.fails == {4} and got.costs == {3: 10}, text


@pytest.mark.parametrize("act", [
    Act.of(("works", (0, 1, 2, 7))), Act.of(("works", (1, 4, 9, 12))), Act.of(("fails", (3, 5, 9))),
    Act.of(("ask", (3, 5, 9))), Act.of(("ask_costs", (0, 1, 2, 3, 7, 12))), Act.of(("propose", (6,))),
    Act.of(("costs", ((1, 5), (3, 5), (6, 10)))), Act.of(("fails", (2,)), ("propose", (7,))),
])
def test_every_phrasing_reads_back_to_the_same_slots(act):
    book = Phrasebook("read-back")
    for r in range(12):
        text = book.say(act, round=r, turn=0, sender=0)
        assert act_of_text(text, 16) == act, text


def test_a_kind_the_phrasebook_does_not_know_is_read_from_its_words():
    p = {"protocol": "imap", "kind": "counter_offer", "meeting_id": 2, "slot": 9}  # a kind from another branch
    act = act_of_payload(p, "Agent 1: I can't do slot 4 (IMPOSSIBLE). How about slot 9?", 16)
    assert act == Act.of(("fails", (4,)), ("propose", (9,)))
    text = Phrasebook("x").say(act, round=0, turn=0, sender=1)
    assert "IMPOSSIBLE" not in text and "Agent" not in text
    assert Phrasebook("x").say(act_of_payload(p, "", 16), round=0, turn=0, sender=1)  # nothing readable: still words


def test_any_payload_of_any_kind_renders_without_raising():
    """Whatever a payload holds (a field missing, the wrong type, a kind from elsewhere), the
    phrasebook gives words: a partner's turn never fails in a blinded game."""
    import random

    from engine.protocol import KINDS

    rng = random.Random(5)
    junk = [None, "x", -3, 2.5, [], {}, [1, "a"], {"3": "z"}, True, 7, [{"meeting_id": 1}], [[1, 2]]]
    book = Phrasebook("fuzz")
    for proto, kinds in KINDS.items():
        for kind, fields in list(kinds.items()) + [("brand_new_kind", ("slot",))]:
            for i in range(40):
                p = {"protocol": proto, "kind": kind, "meeting_id": rng.choice([1, None, "2"])}
                for f in fields + ("slot", "slots", "moves", "status"):
                    if rng.random() < 0.6:
                        p[f] = rng.choice(junk)
                text = book.say(act_of_payload(p, rng.choice(["", "slot 3?", "no"]), 16), round=i, turn=0, sender=1)
                assert isinstance(text, str) and text
