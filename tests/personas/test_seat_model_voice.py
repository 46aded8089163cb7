"""A participant's quick actions in a blinded game's words (SeatModel.voice, engine/phrasebook.py):
one text whoever the recipients are, each payload still its recipient's protocol."""

from __future__ import annotations

import pytest

from engine.phrasebook import Phrasebook, person_tag
from engine.protocol import read_text
from personas.seat_model import SeatModel

MODELS = ["human", "scripted:imap", "scripted:sdmap", "scripted:dsm-welfare", "llm:mock-model"]


def _model(voice: bool) -> SeatModel:
    m = SeatModel(0, ("dm",), 5)
    m.apply({"type": "game_start", "num_slots": 6, "agent_models": MODELS})
    m.apply({"type": "resolution", "round": -1, "participant": False,
             "my_calendar": [None, {"errand_id": 1, "cost": 4}, None, {"errand_id": 3, "cost": 2, "blocked": True},
                             None, None]})
    m.apply({"type": "round_start", "seq": 0, "round": 0, "meeting": {"id": 1, "participants": [0, 1, 2, 3, 4]}})
    if voice:
        m.voice = Phrasebook("game-1")
    return m


@pytest.mark.parametrize("kind,kw", [("propose", {"selected": [2]}), ("ask_costs", {}),
                                     ("share_costs", {"confirmed": True}), ("accept", {"cursor": 4}),
                                     ("decline", {"cursor": 3})])
def test_a_quick_action_reads_the_same_to_an_llm_partner_and_a_scripted_one(kind, kw):
    kw = {"cursor": 0, **kw}
    before = _model(False).quick(kind, **kw)
    assert all("meeting M1" in x.content for x in before.messages)  # quick.py's words: the protocol's form
    out = _model(True).quick(kind, **kw)
    assert [x.to for x in out.messages] == [1, 2, 3, 4]
    texts = {x.content for x in out.messages}
    assert len(texts) == 1  # one text to IMAP, SD-MAP, DSM and the LLM partner
    (text,) = texts
    assert "Agent" not in text and "meeting M" not in text and "Decision" not in text
    # the payloads are still each recipient's own (the bots act on them)
    assert [x.payload for x in out.messages] == [y.payload for y in before.messages]
    assert person_tag(text) is not None
    if kind == "propose":
        assert read_text(text, 6).proposed == [2] and person_tag(text) == "proposal"
    if kind == "decline":
        assert read_text(text, 6).fails == {3}
