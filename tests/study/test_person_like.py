"""Simulated participants that play like people (issue 29, item 2): ``simulated_protocol =
"person-like"`` is the default of a study file and of ``study check --dry-run``; the person-like
seat proposes in the meetings it leads through the quick actions a person's keys send, and the
same study seed gives the same games; the protocol policies are still there."""

from __future__ import annotations

import json
import sqlite3

from personas.person_like import OFFER_WORDS
from studykit import SCRIPTED_ONLY, example_text


def _study(tmp_path, name="study.toml", **replace):
    from lab.study.model import load_study

    p = tmp_path / name
    p.write_text(example_text(**{**SCRIPTED_ONLY, **replace}))
    return p, load_study(p)


def _games(db):
    con = sqlite3.connect(db)
    rows = con.execute("SELECT game_id, config, agents FROM games ORDER BY game_id").fetchall()
    con.close()
    return rows


async def _participant_messages(db, game_id, seat):
    from saves.store import Store

    async with await Store.open(db) as store:
        events = await store.load_events(game_id)
    return [e["data"] for e in events if e["type"].endswith("_sent") and e["data"]["from_agent"] == seat]


async def test_person_like_is_the_default_and_plays_like_a_person(cli, tmp_path):
    p, study = _study(tmp_path, **{'simulated_protocol = "person-like"': "# (simulated_protocol left out)"})
    assert study.study.simulated_protocol == "person-like"
    db = tmp_path / "s.db"
    import asyncio

    rc, out, err = await asyncio.to_thread(cli, "study", "check", str(p), "--dry-run", "--db", str(db), "--json")
    assert rc == 0, err
    rows = _games(db)
    assert len(rows) == 12
    led = 0
    for gid, config, agents in rows:
        c = json.loads(config)
        assert agents.split(",")[c["human_seat"]] == "human"
        sent = await _participant_messages(db, gid, c["human_seat"])
        # a person's words, and its quick-action proposals ("Let's meet at slot N" / "proposes slot N")
        assert not any("asks your costs for meeting" in d["content"] and d["content"].startswith("Agent ")
                       for d in sent)  # never IMAP's own opening
        led += sum(1 for d in sent if "slot" in d["content"].lower()
                   and any(w in d["content"] for w in ("Let's meet at", "proposes slot", "How about", "Could we do",
                                                       "Does slot", "I'm free at")))
    assert led > 0


async def test_person_like_dry_run_is_the_same_for_the_same_seed(tmp_path):
    from lab.study.check import dry_run
    from saves.store import Store

    _p, study = _study(tmp_path)
    runs = []
    for k in range(2):
        async with await Store.open(tmp_path / f"s{k}.db") as store:
            r = await dry_run(study, store)
            assert r["ok"], r["failures"]
        msgs = []
        for gid, config, _agents in _games(tmp_path / f"s{k}.db"):
            c = json.loads(config)
            msgs.append([d["content"] for d in await _participant_messages(tmp_path / f"s{k}.db", gid,
                                                                            c["human_seat"])])
        runs.append(msgs)
    assert runs[0] == runs[1] and any(runs[0])
    # ... and it is the person-like policy that played: its proposals, not a protocol's messages
    said = [m for game in runs[0] for m in game]
    starts = ("Let's meet at slot",) + tuple(w.split("{")[0] for w in OFFER_WORDS)  # quick key p, typed offers
    assert any(m.startswith(starts) or " proposes slot " in m for m in said)
    assert not any("asks your costs" in m and m.startswith("Agent ") for m in said)


def test_the_protocol_policies_are_kept_and_the_design_hash_of_old_files_is_unchanged(tmp_path):
    from lab.study.runner import design_hash

    _p, imap = _study(tmp_path, "a.toml", **{'simulated_protocol = "person-like"': 'simulated_protocol = "imap"'})
    _p, unset = _study(tmp_path, "b.toml", **{'simulated_protocol = "person-like"': "#"})
    _p, person = _study(tmp_path, "c.toml")
    assert imap.study.simulated_protocol == "imap" and unset.study.simulated_protocol == "person-like"
    # a file written before the default changed (no simulated_protocol) hashes as it did then
    assert design_hash(unset) == design_hash(imap) != design_hash(person)


async def test_an_imap_playing_simulated_participant_still_plays_imap(tmp_path):
    from lab.study.check import dry_run
    from saves.store import Store

    _p, study = _study(tmp_path, **{'simulated_protocol = "person-like"': 'simulated_protocol = "imap"'})
    async with await Store.open(tmp_path / "s.db") as store:
        r = await dry_run(study, store)
        assert r["ok"], r["failures"]
    kinds = set()
    for gid, config, _agents in _games(tmp_path / "s.db"):
        c = json.loads(config)
        kinds |= {(d.get("payload") or {}).get("kind") for d in await _participant_messages(tmp_path / "s.db", gid,
                                                                                           c["human_seat"])}
    assert "cost_request" in kinds or "costs" in kinds
