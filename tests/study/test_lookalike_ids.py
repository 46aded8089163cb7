"""Issue 30 item 9: a new id that looks like an existing participant's (P0O1 with a letter O,
PI01, P0001 next to P001) is never registered silently: asked at a terminal, refused without
one (exit 2, naming the existing id and --new-participant), refused by ``serve --study``."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from lab.gamespec import SetupError
from lab.study.admit import ParticipantError, admit
from lab.study.links import study_links
from lab.study.runner import StudyRunner
from lab.study.simulate import SimulatedDriver
from saves.store import Store


class Person(SimulatedDriver):
    simulated = False


def _register(study, db, *pids):
    async def go():
        async with await Store.open(db) as store:
            for pid in pids:
                await StudyRunner(study, store, pid, Person(study, pid)).enroll()
    asyncio.run(go())


def _registered(db):
    con = sqlite3.connect(db)
    try:
        return sorted(r[0] for r in con.execute("SELECT participant FROM study_participants"))
    finally:
        con.close()


@pytest.fixture
def with_p001(scripted_study, tmp_path):
    path, study = scripted_study
    db = tmp_path / "s.db"
    _register(study, db, "P001")
    return path, study, db


@pytest.mark.parametrize("pid", ["P0O1", "PO01", "pOo1", "P00l"])
def test_a_confusable_id_is_refused_without_a_terminal_and_the_existing_id_named(cli, with_p001, pid):
    path, study, db = with_p001
    rc, out, err = cli("study", "run", str(path), "--participant", pid, "--db", str(db))
    assert rc == 2 and "Traceback" not in err
    assert f"{pid} looks like the existing participant P001" in err and "--new-participant" in err
    assert len(err.strip().splitlines()) == 1
    assert _registered(db) == ["P001"]


@pytest.mark.parametrize("pid", ["P0001", "P01", "PX001", "P001A"])
def test_an_id_one_edit_away_is_refused(cli, with_p001, pid):
    path, study, db = with_p001
    rc, out, err = cli("study", "run", str(path), "--participant", pid, "--db", str(db))
    assert rc == 2 and f"{pid} looks like the existing participant P001" in err
    assert _registered(db) == ["P001"]


def test_new_participant_admits_a_lookalike(cli, with_p001):
    path, study, db = with_p001
    who = admit(study, "P0O1", pool_id=None, db=str(db), new_participant=True, ask=None)
    assert who.participant == "P0O1" and who.like == ["P001"]
    # the command goes past the check, on to the study app (which needs a terminal under pytest)
    rc, out, err = cli("study", "run", str(path), "--participant", "P0O1", "--new-participant", "--db", str(db))
    assert rc == 2 and "interactive terminal" in err and "looks like" not in err


def test_unrelated_and_next_numbered_ids_are_admitted_without_asking(with_p001):
    path, study, db = with_p001
    _register(study, db, "P1")

    def never(question):
        raise AssertionError(f"asked {question!r}")

    for pid in ("P002", "P010", "P11", "P101", "Q777", "ABC"):  # other numbers of the scheme, or nothing alike
        assert admit(study, pid, pool_id=None, db=str(db), ask=never).participant == pid
        assert admit(study, pid, pool_id=None, db=str(db), ask=None).like == []
    # an existing participant resumes without a question
    assert admit(study, "P001", pool_id=None, db=str(db), ask=never).participant == "P001"


def test_asked_at_a_terminal_yes_admits_and_no_refuses(with_p001):
    path, study, db = with_p001
    asked: list[str] = []

    def yes(question):
        asked.append(question)
        return True

    who = admit(study, "P0O1", pool_id=None, db=str(db), ask=yes)
    assert who.participant == "P0O1"
    assert asked == ["P0O1 looks like the existing participant P001 \u2014 is this a new participant? [y/N]"]
    with pytest.raises(ParticipantError, match="not registered.*--participant P001"):
        admit(study, "P00I", pool_id=None, db=str(db), ask=lambda q: False)


def test_the_command_asks_at_a_terminal(cli, with_p001, monkeypatch):
    from calbench_cli.commands import study as study_cmd

    path, study, db = with_p001
    prompts: list[str] = []
    monkeypatch.setattr(study_cmd, "_interactive", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: prompts.append(prompt) or "n")
    rc, out, err = cli("study", "run", str(path), "--participant", "P0O1", "--db", str(db))
    assert rc == 2 and "not registered" in err and _registered(db) == ["P001"]
    assert prompts and prompts[0].startswith("P0O1 looks like the existing participant P001")


def test_serve_study_refuses_lookalike_ids(with_p001, tmp_path):
    path, study, db = with_p001
    with pytest.raises(SetupError, match="P0O1 looks like the existing participant P001"):
        study_links(study, "P0O1,P002", str(db))
    with pytest.raises(SetupError, match="PI02 looks like the served participant P102"):
        study_links(study, "P102,PI02", str(tmp_path / "fresh.db"))
    links = study_links(study, "P001,P002,P003", str(db))  # an existing id and the next numbers
    assert sorted(links.values()) == ["P001", "P002", "P003"]
    assert len(study_links(study, "12", str(db))) == 12
