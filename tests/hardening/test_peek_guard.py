"""Issue 24 (1, 2): one guard for every path that writes or prints a saved game.

A game a person is still playing (running, or stopped and resumable) holds every seat's
calendar, labels and the messages between the other seats.  ``export GAME`` refused it
already; ``export --all`` (also ``--status running|stopped``), ``import`` of a save
database or of a trace saved mid-game, ``report`` and ``study export`` wrote it whole.
Now each goes through ``saves.guard`` and leaves such a game out with one line, unless
``--reveal-all-seats``.
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from engine.game import GameConfig
from engine.generate import generate_scenario
from lab.session import Session, run_session
from personas.human import HumanPersona
from personas.registry import make_personas
from saves.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "study"))


async def _human_game(store, gid: str, seed: int = 5) -> None:
    """A game whose person (seat 0) never answers, interrupted after the bots' first moves:
    saved ``stopped`` (resumable), with its events."""
    task = generate_scenario(seed)
    asked = asyncio.Event()  # the person's first turn or decision: the game waits for them from here
    seats = make_personas("human,imap,imap,imap,imap", task.num_agents,
                          humans={0: HumanPersona(lambda r: r.kind != "register" and asked.set())})
    session = Session(task, seats, GameConfig(), gid, "human,imap,imap,imap,imap", "play:test",
                      {"human_seat": 0, "app": "calbench-play"})
    t = asyncio.ensure_future(run_session(session, store=store, stream=True))
    # (before: polled until more than 8 events were stored, which a game whose person speaks
    # first never has: 4 s of sleeps for every such game)
    await asyncio.wait_for(asked.wait(), 120)  # a bound on a broken test, not a speed check
    assert len(await store.load_events(gid)) >= 8  # the bots' first moves, stored as they came
    t.cancel()
    with pytest.raises(asyncio.CancelledError):
        await t


async def _bot_game(store, gid: str, seed: int = 3) -> None:
    task = generate_scenario(seed)
    session = Session(task, make_personas("imap", task.num_agents), GameConfig(), gid, "imap", "run:test")
    out = await run_session(session, store=store, stream=True)
    assert out.status == "completed"


RUNNING, STOPPED, DONE = "aaaaaaaa-0000-0000-0000-000000000001", "bbbbbbbb-0000-0000-0000-000000000002", \
    "cccccccc-0000-0000-0000-000000000003"


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "saves.db")

    async def build():
        async with await Store.open(path) as store:
            await _human_game(store, RUNNING, seed=5)
            await _human_game(store, STOPPED, seed=6)
            await _bot_game(store, DONE)
    asyncio.run(build())
    con = sqlite3.connect(path)
    con.execute("UPDATE games SET status = 'running' WHERE game_id = ?", (RUNNING,))  # a terminal still open
    con.commit()
    con.close()
    return path


def test_export_all_leaves_games_in_play_out(cli, db, tmp_path):
    """Before: export --all wrote all 3 games, the two in play with every seat's calendar."""
    out = tmp_path / "all"
    rc, _, err = cli("export", "--all", "-o", str(out), "--db", db)
    assert rc == 0, err
    assert sorted(os.listdir(out)) == [f"calbench-{DONE}.json"]
    skipped = [ln for ln in err.splitlines() if ln.startswith("skipped game")]
    assert len(skipped) == 2 and {RUNNING[:8], STOPPED[:8]} == {ln.split()[2] for ln in skipped}
    assert all("--reveal-all-seats" in ln for ln in skipped)


@pytest.mark.parametrize("status,gid", [("running", RUNNING), ("stopped", STOPPED)])
def test_export_all_by_status_leaves_games_in_play_out(cli, db, tmp_path, status, gid):
    out = tmp_path / status
    rc, _, err = cli("export", "--all", "--status", status, "-o", str(out), "--db", db)
    assert rc == 0, err
    assert os.listdir(out) == []
    assert f"skipped game {gid[:8]}" in err


def test_export_all_with_reveal_writes_them(cli, db, tmp_path):
    out = tmp_path / "rev"
    rc, _, err = cli("export", "--all", "-o", str(out), "--db", db, "--reveal-all-seats")
    assert rc == 0, err
    assert len(os.listdir(out)) == 3 and "skipped" not in err


def test_merging_a_database_leaves_games_in_play_out(cli, db, tmp_path):
    """Before: import of another save database copied the live games into the target."""
    target = str(tmp_path / "target.db")
    rc, out, err = cli("import", db, "--db", target)
    con = sqlite3.connect(target)
    ids = {r[0] for r in con.execute("SELECT game_id FROM games")}
    con.close()
    assert ids == {DONE}, (out, err)
    assert err.count("a person is still playing it") == 2
    assert "2 in play left out" in err


def test_importing_a_trace_saved_mid_game_is_left_out(cli, db, tmp_path):
    f = tmp_path / "mid.json"
    rc, _, err = cli("export", STOPPED[:8], "-o", str(f), "--db", db, "--reveal-all-seats")
    assert rc == 0, err
    target = str(tmp_path / "t2.db")
    rc, _, err = cli("import", str(f), "--db", target)
    con = sqlite3.connect(target)
    assert con.execute("SELECT COUNT(*) FROM games").fetchone() == (0,)
    con.close()
    assert "a person is still playing it" in err
    rc, _, err = cli("import", str(f), "--db", target, "--reveal-all-seats")
    con = sqlite3.connect(target)
    assert con.execute("SELECT COUNT(*) FROM games").fetchone() == (1,)
    con.close()


def test_export_one_game_still_refused(cli, db, tmp_path):
    rc, _, err = cli("export", RUNNING[:8], "-o", str(tmp_path / "x.json"), "--db", db)
    assert rc == 2 and "--reveal-all-seats" in err and not (tmp_path / "x.json").exists()


def test_games_json_and_report_carry_no_seat_data_of_a_game_in_play(cli, db):
    rc, out, _ = cli("games", "--json", "--db", db)
    assert rc == 0
    listed = json.loads(out)["games"]
    assert {g["game_id"] for g in listed} == {RUNNING, STOPPED, DONE}
    keys = {k for g in listed for k in g}
    assert not keys & {"task_row", "final_state", "metrics", "config", "events"}
    rc, out, err = cli("report", "--json", "--db", db)
    assert rc == 0, err
    assert RUNNING not in out and STOPPED not in out


# -- study export (item 2) ---------------------------------------------------------------------

async def test_study_export_during_a_participants_game_leaves_it_out(scripted_study, tmp_path):
    """Before: the CSVs held every message of the game in play, DMs between the other seats
    included.  After: the game is left out, one line says so; finished games are written."""
    import asyncio as _asyncio

    from lab.study.export import export_study
    from lab.study.runner import StudyRunner
    from lab.study.simulate import SimulatedDriver
    from test_resume_withdraw_export import CrashingDriver

    _, study = scripted_study
    async with await Store.open(tmp_path / "s.db") as store:
        drv = CrashingDriver(study, "P001", crash_game=1, at_event=140)
        r = StudyRunner(study, store, "P001", drv)
        await r.enroll()
        drv.task = _asyncio.ensure_future(r.run())
        with pytest.raises(_asyncio.CancelledError):
            await drv.task
        live = next(s["game_id"] for s in await r.db.steps("P001") if s["name"] == "game:1")
        async with store._db.execute("SELECT status FROM games WHERE game_id = ?", (live,)) as cur:
            assert (await cur.fetchone())[0] == "stopped"
        seat = r.games[1].seat
        from engine.events import MESSAGE_EVENTS

        others = [e for e in await store.load_events(live) if e["type"] in MESSAGE_EVENTS
                  and e["data"].get("from_agent") != seat and seat not in (e["data"].get("recipients") or [])
                  and e["data"].get("to_agent") != seat]
        assert others  # the game in play holds messages the participant cannot see
        skipped: list[str] = []
        await export_study(study, store, tmp_path / "out", skipped=skipped, include_simulated=True)
    with open(tmp_path / "out" / "messages.csv", newline="") as fh:
        msgs = list(csv.DictReader(fh))
    with open(tmp_path / "out" / "games.csv", newline="") as fh:
        games = list(csv.DictReader(fh))
    assert not [m for m in msgs if m["game_id"] == live]
    assert not [g for g in games if g["game_id"] == live]
    assert any(g["status"] == "completed" for g in games)  # the finished game 0 is there
    assert len(skipped) == 1 and live[:8] in skipped[0] and "P001" in skipped[0]


def test_study_export_cli_says_which_game_it_left_out(cli, scripted_study, tmp_path):
    from lab.study.runner import StudyRunner
    from test_resume_withdraw_export import CrashingDriver

    path, study = scripted_study
    db = str(tmp_path / "s2.db")

    async def build():
        async with await Store.open(db) as store:
            drv = CrashingDriver(study, "P9", crash_game=0, at_event=60)
            r = StudyRunner(study, store, "P9", drv)
            await r.enroll()
            drv.task = asyncio.ensure_future(r.run())
            with pytest.raises(asyncio.CancelledError):
                await drv.task
    asyncio.run(build())
    rc, out, err = cli("study", "export", str(path), "--out", str(tmp_path / "o"), "--db", db)
    assert rc == 0, err
    assert "skipped game" in err and "P9" in err


@pytest.fixture
def scripted_study(tmp_path):
    from lab.study.model import load_study
    from studykit import SCRIPTED_ONLY, example_text

    p = tmp_path / "study.toml"
    p.write_text(example_text(**SCRIPTED_ONLY))
    return p, load_study(p)
