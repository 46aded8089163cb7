"""Blinded wording in study games (engine/phrasebook.py, personas/voice.py, the condition's
``phrasebook`` setting): real games of simulated participants through the study runner."""

from __future__ import annotations

import re

import pytest

from lab.study.check import dry_run
from lab.study.export import study_rows
from lab.study.model import StudyFileError, parse_study
from engine.phrasebook import act_of_text
from lab.study.runner import with_phrasebook
from personas.registry import make_personas
from saves.store import Store
from studykit import example_text

#: What gives a protocol away in its words.
MARKERS = re.compile(r"\(PENDING\)|PENDING|IMPOSSIBLE|impossible|Decision for meeting|decided: meeting|^Agent \d"
                     r"|Agent \d+'s costs|asks your costs|score|DSM|movable at cost|Please schedule it")

PROTOCOLS = ("imap", "sdmap", "dsm-welfare", "dsm-private")


def _study(mode: str, partners=PROTOCOLS):
    conds = "".join(f'\n[[conditions]]\nname = "c{i}"\npartners = "{p}"\nmax_turns = 6\nphrasebook = "{mode}"\n'
                    for i, p in enumerate(partners))
    text = example_text()
    start, end = text.index("[[conditions]]"), text.index("# -- tasks")
    text = text[:start] + conds + "\n" + text[end:]
    pool = ", ".join(f'"seed:{100 + i}"' for i in range(len(partners)))
    text = text.replace('pool = ["seed:100", "seed:101", "seed:102", "seed:103"]', f"pool = [{pool}]")
    return parse_study(text.replace("seats = [0, 2]", "seats = [2]"))


async def _messages(tmp_path, mode: str, partners=PROTOCOLS):
    """(participant seat, message rows) of every game of one dry-run cycle."""
    study = _study(mode, partners)
    async with await Store.open(tmp_path / f"{mode}.db") as store:
        r = await dry_run(study, store)
        assert r["ok"], r["failures"]
        rows = await study_rows(study, store)
    me = {g["game_id"]: int(g["seat"]) for g in rows["games.csv"] if g["is_participant_seat"] == 1}
    return me, rows["messages.csv"]


def _to_participant(me, rows):
    return [m for m in rows if m["sender"] != me[m["game_id"]]
            and str(me[m["game_id"]]) in str(m["recipients"]).split("|")]


async def test_no_protocol_marker_in_any_scripted_message_a_blinded_participant_reads(tmp_path):
    me, rows = await _messages(tmp_path, "scripted")
    got = _to_participant(me, rows)
    kinds = {m["typed_kind"] for m in got}
    # every protocol spoke to the participant, with its typed messages (payloads kept)
    assert {k.split(":")[0] for k in kinds if k} >= {"imap", "sdmap", "dsm"}
    assert {"imap:decision", "sdmap:reply", "dsm:scores"} & kinds
    for m in got:
        assert m["sender_kind"] == "protocol"
        assert not MARKERS.search(m["text"]), (m["typed_kind"], m["text"])
    assert len({m["text"] for m in got}) > len(got) // 3  # worded variously, not one sentence per kind

    _, before = await _messages(tmp_path, "off")  # the same study, its partners' own words
    assert sum(bool(MARKERS.search(m["text"])) for m in _to_participant(me, before)) > len(got) // 2


async def test_only_what_the_participant_reads_changes(tmp_path):
    """Payloads and the partners' talk among themselves are the same as with the phrasebook
    off (the bots play the same game); only the words reaching the participant, and the
    participant's own, differ.  (IMAP partners of an IMAP-playing simulated participant read
    each other's payloads only; a bot of another protocol reads the English, so it may
    answer new words differently.)"""
    me, off = await _messages(tmp_path, "off", ("imap", "imap"))
    _, on = await _messages(tmp_path, "scripted", ("imap", "imap"))
    key = lambda m: (m["game_id"], m["seq"])  # noqa: E731
    off_by, on_by = {key(m): m for m in off}, {key(m): m for m in on}
    assert off_by.keys() == on_by.keys()
    changed = 0
    for k, a in off_by.items():
        b = on_by[k]
        assert (a["sender"], a["recipients"], a["typed_kind"], a["round"], a["turn"]) == \
               (b["sender"], b["recipients"], b["typed_kind"], b["round"], b["turn"])
        reaches = str(me[a["game_id"]]) in str(a["recipients"]).split("|") or a["sender"] == me[a["game_id"]]
        if not reaches:
            assert a["text"] == b["text"]
        changed += a["text"] != b["text"]
    assert changed > 0


def test_phrasebook_off_leaves_the_seats_as_they_are():
    seats = make_personas("imap,sdmap,human,dsm-welfare,imap", 5, humans={2: object()})
    assert with_phrasebook(seats, "off", 2, "g") == seats and all(a is b for a, b in zip(
        with_phrasebook(seats, "off", 2, "g"), seats))
    wrapped = with_phrasebook(seats, "scripted", 2, "g")
    assert wrapped[2] is seats[2] and all(wrapped[a] is not seats[a] for a in (0, 1, 3, 4))
    for a in (0, 1, 3, 4):  # the trace records the same seats
        assert (wrapped[a].kind, wrapped[a].model) == (seats[a].kind, seats[a].model)


@pytest.mark.parametrize("value", ['"loud"', "true", '"ALL"'])
def test_the_study_setting_is_validated_in_one_line(value):
    text = example_text().replace('name = "scripted"', f'name = "scripted"\nphrasebook = {value}')
    with pytest.raises(StudyFileError) as exc:
        parse_study(text)
    msg = str(exc.value)
    assert "\n" not in msg and "conditions[0].phrasebook" in msg and "'off', 'scripted' or 'all'" in msg
    assert re.search(r"line \d+", msg)


def test_study_check_says_what_the_wording_is(cli, tmp_path):
    p = tmp_path / "study.toml"
    p.write_text(example_text().replace('name = "scripted"', 'name = "scripted"\nphrasebook = "all"')
                 .replace('name = "llm"', 'name = "llm"\nphrasebook = "all"'))
    rc, out, err = cli("study", "check", str(p))
    assert rc == 0, err
    assert "Phrasebook all in every condition: every partner's messages in a person's words" in out
    p.write_text(example_text())
    rc, out, _ = cli("study", "check", str(p))
    assert "Phrasebook off in every condition" in out


async def _llm_messages(tmp_path, mode: str, base_url: str):
    """What simulated participants received from an LLM partner (the loopback mock, real HTTP)
    in a study whose partners are one LLM and three IMAP seats; and the games' traces."""
    text = example_text(base_url).replace('name = "scripted"', f'name = "scripted"\nphrasebook = "{mode}"') \
        .replace('name = "llm"', f'name = "llm"\nphrasebook = "{mode}"')
    study = parse_study(text)
    async with await Store.open(tmp_path / f"llm-{mode}.db") as store:
        r = await dry_run(study, store)
        assert r["ok"], r["failures"]
        rows = await study_rows(study, store)
        traces = [await store.load_trace(g) for g in {m["game_id"] for m in rows["messages.csv"]}]
    me = {g["game_id"]: int(g["seat"]) for g in rows["games.csv"] if g["is_participant_seat"] == 1}
    return [m for m in _to_participant(me, rows["messages.csv"]) if m["sender_kind"] == "llm"], traces


async def test_an_llm_partner_speaks_through_the_phrasebook_typed_only(tmp_path, mock_llm):
    own, _ = await _llm_messages(tmp_path, "scripted", mock_llm.base_url)  # LLM partners keep their words
    assert own and all(re.search(r"Meeting M\d|Agreed:|Let's schedule", m["text"]) for m in own)
    mock_llm.inject("chatter", count=30, phase="CHEAP_TALK")  # small talk that names no slot
    typed, traces = await _llm_messages(tmp_path, "all", mock_llm.base_url)
    assert typed
    for m in typed:
        assert not re.search(r"Meeting M\d|Agreed:|Let's schedule|yyyy", m["text"]), m["text"]
        assert act_of_text(m["text"], 16), m["text"]  # every line says something about slots
    withheld = [(e.get("data") or {}).get("extra", {}).get("phrasebook_withheld") for t in traces
                for e in t["events"]]
    assert sum(w or 0 for w in withheld) >= 1  # the empty talk was withheld, and the record says so
