"""Issue 29 item 4: a protocol lives in one home.  ``firstfree.py`` — a protocol that exists
only in the tests — declares itself in one module and registers when imported; with no edit
anywhere else it plays whole games through the real engine, is filed by ``calbench run``'s lab
calls, scored for privacy by its own evidence rules, counted by the message audit, spoken by a
person's quick keys and offered by the spec, the set-up screen, a study file and a table."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from engine.audit import seat_audit
from engine.game import GameConfig, run_game
from engine.privacy import belief_updates, privacy_metrics
from engine.taskref import resolve_tasks
from engine.verify import verify_trace

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("engine", "personas", "saves", "lab", "calbench_tui", "calbench_cli", "calbench_devtools")


def _messages(trace):
    return [e["data"] for e in trace["events"] if e["type"].endswith("_sent")]


async def _play(spec: str, ref: str = "canonical:0-2"):
    from personas.registry import make_personas

    out = []
    for task in resolve_tasks(ref):
        res = await run_game(task, make_personas(spec, task.num_agents), GameConfig(deterministic=True))
        out.append((task, res.trace))
    return out


async def test_it_plays_whole_games_through_the_engine(firstfree):
    games = await _play("first-free")
    scheduled = total = 0
    for task, trace in games:
        msgs = _messages(trace)
        assert msgs and {m["payload"]["protocol"] for m in msgs} == {"firstfree"}
        assert {m["payload"]["kind"] for m in msgs} == {"offer", "answer"}
        assert verify_trace(trace).verified
        m = trace["metrics"]
        scheduled += m["meetings_scheduled"]
        total += len(task.meetings)
    assert scheduled >= total * 0.6, (scheduled, total)  # it schedules meetings, it does not just talk


async def test_it_sits_at_a_table_with_the_built_in_protocols(firstfree):
    """IMAP and SD-MAP bots read its English, it reads theirs: mixed games end and schedule."""
    for task, trace in await _play("first-free,imap,ff,sdmap,dsm-welfare", "canonical:0-4"):
        assert trace["metrics"]["meetings_scheduled"] >= 1
        assert {(m.get("payload") or {}).get("protocol") for m in _messages(trace)} >= {"firstfree", "imap"}


def test_calbench_runs_lab_calls_file_its_games(firstfree, tmp_path):
    from lab.runplan import plan_run, play_run

    plan = plan_run("canonical:0-5", "first-free", channels=("dm",), deterministic=True)
    res = play_run(plan, db=str(tmp_path / "ff.db"))
    assert [g.status for g in res.games] == ["completed"] * 6
    assert all(g.agents == "first-free" for g in res.games)
    [row] = res.summary  # Table 2's row, under the seat's name
    assert row["persona"] == "first-free" and row["games"] == 6 and row["coordination"] > 0.5 and row["vps"] > 0
    assert res.exit_code() == 0

    from saves.store import Store

    async def read():
        store = await Store.open(tmp_path / "ff.db")
        try:
            return await store.load_trace(res.games[0].game_id)
        finally:
            await store.close()

    trace = asyncio.run(read())
    assert {m["payload"]["protocol"] for m in _messages(trace)} == {"firstfree"}
    assert trace["metrics"]["vps"] > 0


async def test_privacy_scores_its_messages_by_its_own_evidence_rules(firstfree):
    [(task, trace)] = await _play("first-free", "canonical:1")
    m = privacy_metrics(task, trace["events"])
    assert m["vps"] > 0 and m["typed_vps"] == pytest.approx(m["vps"]) and m["freetext_vps"] == 0
    rows = belief_updates(task, trace["events"])
    offers = sum(d["payload"]["kind"] == "offer" for d in _messages(trace))
    assert {r["source"] for r in rows} <= {"firstfree_offer", "firstfree_answer"}
    assert sum(r["source"] == "firstfree_offer" for r in rows) == offers  # one update per offer (a DM, one reader)
    for r in rows:
        if r["source"] == "firstfree_answer" and r["evidence"] == 0.0:  # a "no": the slot is infeasible
            assert r["after"] < 0.5


async def test_the_message_audit_counts_it_as_typed_with_its_categories(firstfree):
    [(task, trace)] = await _play("first-free", "canonical:2")
    recs = seat_audit(trace)
    msgs = _messages(trace)
    assert sum(r["typed"] for r in recs) == len(msgs) and sum(r["free_text"] for r in recs) == 0
    offers = sum(d["payload"]["kind"] == "offer" for d in msgs)
    noes = sum(d["payload"]["kind"] == "answer" and not d["payload"]["ok"] for d in msgs)
    assert sum(r["proposal"] for r in recs) == offers == sum(r["question"] for r in recs)
    assert sum(r["availability"] for r in recs) == len(msgs) - offers
    assert sum(r["refusal"] for r in recs) == noes


def test_a_persons_quick_keys_speak_it(firstfree):
    from engine.protocol import is_proposal, protocol_of
    from personas import quick

    assert protocol_of("firstfree") == "firstfree"
    [p] = quick.propose(2, 4, [7], channel="dm", to=[3], protocol="firstfree", initiator=True)
    assert p.payload == {"protocol": "firstfree", "kind": "offer", "meeting_id": 4, "slot": 7}
    assert is_proposal({"payload": p.payload})
    [y] = quick.accept(2, 4, 7, channel="dm", to=[0], protocol="firstfree", answering="offer")
    [n] = quick.decline(2, 4, 7, channel="dm", to=[0], protocol="firstfree", answering="offer")
    assert (y.payload["kind"], y.payload["ok"], n.payload["ok"]) == ("answer", True, False)
    [c] = quick.ask_costs(2, 4, [1, 2], channel="dm", to=[3], protocol="firstfree")
    assert c.payload is None and "costs" in c.content  # no typed form declared: English only


def test_a_blinded_game_words_it_as_a_person_would(firstfree):
    """The phrasebook reads its messages by what its kinds say: an offer is a proposal, like an
    IMAP decision or an LLM's "let's meet at slot 7"."""
    from engine.phrasebook import Phrasebook, act_of_payload, act_of_text, person_tag
    from engine.protocol import payload, read_text

    offer = payload("firstfree", "offer", 4, slot=7)
    act = act_of_payload(offer, "How about slot 7 for meeting M4? It is my first free one.")
    assert act == act_of_payload(payload("imap", "decision", 4, slot=7)) == act_of_text("Let's meet at slot 7.")
    assert act_of_payload(payload("firstfree", "answer", 4, slot=7, ok=False)).verbs == ("fails",)
    words = Phrasebook("g").say(act, round=0, turn=0, sender=1)
    assert "first free" not in words and read_text(words, 16).proposed == [7] and person_tag(words) == "proposal"


def test_the_spec_the_app_a_study_and_a_table_offer_it(firstfree):
    from calbench_tui.screens.setup import persona_choices, persona_words
    from calbench_tui.widgets.seats import kind_short
    from lab.serving import lobby_fill
    from lab.study.model import Condition
    from personas.spec import AgentsSpec, valid_names

    assert AgentsSpec.parse("ff,firstfree,first-free").names == ["first-free"] * 3
    assert "first-free" in valid_names()
    assert "first-free" in persona_choices(False) and "first free slot" in persona_words("first-free")
    assert kind_short("first-free") == "ff"
    assert Condition(name="c", partners="first-free").partners == "first-free"
    assert lobby_fill("FF") == "first-free"


def test_the_product_never_names_it(firstfree):
    """The whole point: nothing outside tests/ was edited to add it."""
    pat = re.compile(r"\bfirst-?free\b", re.I)  # its protocol's and seat's names (not the English "first free")
    hits = [str(p.relative_to(REPO)) for pkg in PRODUCT for p in (REPO / pkg).rglob("*.py")
            if pat.search(p.read_text())]
    assert hits == []


def test_taken_out_it_is_gone(firstfree):
    from engine import protocols
    from personas.spec import AgentsSpec, PersonaSpecError

    protocols.unregister("firstfree")
    with pytest.raises(PersonaSpecError):
        AgentsSpec.parse("first-free").for_seats(5)
    assert protocols.protocol_of_model("firstfree") is None
    protocols.register(firstfree.PROTOCOL)  # the fixture takes it out again


def test_a_seat_name_another_protocol_uses_is_refused(firstfree):
    from dataclasses import replace

    from engine import protocols

    clash = replace(firstfree.PROTOCOL, name="copycat",
                    seats=(replace(firstfree.PROTOCOL.seats[0], name="copycat", aliases=("sd",)),))
    with pytest.raises(ValueError, match="'sd' is already 'sdmap'"):
        protocols.register(clash)
    assert protocols.get("copycat") is None
