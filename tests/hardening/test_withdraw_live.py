"""Issue 24 (4): ``study withdraw`` during a participant's live session.

Before: withdraw deleted the rows the live session was writing; the session crashed and
left an orphan game.  After: while a session is live, withdraw is refused in one line
naming its process and removes nothing (``--wait`` waits for the session to end); once the
participant quits, the withdraw removes everything, the game included.  Real processes,
a real SQLite file.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .helpers import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "study"))

from studykit import SCRIPTED_ONLY, example_text  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CALBENCH = os.path.join(os.path.dirname(sys.executable), "calbench")

# A participant's session, at the table: the person has not answered yet (seat 0 waits).
SESSION = r"""
import asyncio, sys
from lab.study.model import load_study
from lab.study.runner import StudyRunner
from lab.study.simulate import SimulatedDriver
from personas.human import HumanPersona
from saves.store import Store

class AtTheTable(SimulatedDriver):
    def human_persona(self, ctx):
        return HumanPersona(lambda request: None)

async def main(path, db, participant):
    study = load_study(path)
    async with await Store.open(db) as store:
        await StudyRunner(study, store, participant, AtTheTable(study, participant), deterministic=False).run()

asyncio.run(main(*sys.argv[1:]))
"""


def _q(db, sql, *args):
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute(sql, args).fetchall()
    except sqlite3.Error:
        return None
    finally:
        con.close()


@pytest.fixture
def live(tmp_path):
    study = tmp_path / "study.toml"
    study.write_text(example_text(**SCRIPTED_ONLY))
    db = str(tmp_path / "s.db")
    proc = subprocess.Popen([sys.executable, "-c", SESSION, str(study), db, "P1"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def in_game():
        rows = _q(db, "SELECT g.status FROM study_steps s JOIN games g ON g.game_id = s.game_id "
                      "WHERE s.participant = 'P1'")
        return bool(rows) and rows[0][0] == "running" or proc.poll() is not None
    try:
        assert wait_until(in_game, 90.0), "the session never reached its game"
        assert proc.poll() is None, proc.stderr.read()
        yield str(study), db, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _rows(db):
    return {t: _q(db, f"SELECT COUNT(*) FROM {t}")[0][0] for t in
            ("games", "events", "study_participants", "study_steps")}


def test_withdraw_under_a_live_session_is_refused_and_removes_nothing(live):
    study, db, proc = live
    before = _rows(db)
    assert before["games"] == 1 and before["study_participants"] == 1
    out = subprocess.run([CALBENCH, "study", "withdraw", study, "--participant", "P1", "--db", db],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"study run, pid {proc.pid}" in lines[0] and "nothing was removed" in lines[0], \
        out.stderr
    after = _rows(db)
    assert after["study_participants"] == 1 and after["games"] == 1 and after["events"] >= before["events"]
    assert proc.poll() is None  # the session plays on, untouched
    out = subprocess.run([CALBENCH, "study", "withdraw", study, "--participant", "P1", "--db", db, "--wait", "0.5"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "waited 0.5 s" in out.stderr


def test_withdraw_waits_for_the_session_to_end_then_removes_its_game(live):
    study, db, proc = live
    waiting = subprocess.Popen([CALBENCH, "study", "withdraw", study, "--participant", "P1", "--db", db,
                                "--wait", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        assert waiting.poll() is None  # waiting for the session, nothing removed yet
        assert _rows(db)["study_participants"] == 1
        proc.send_signal(signal.SIGINT)  # the participant quits: the game is saved stopped, leases dropped
        proc.wait(timeout=60)
        out, err = waiting.communicate(timeout=120)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 0, err
    assert "Withdrew P1" in out
    assert _rows(db) == {"games": 0, "events": 0, "study_participants": 0, "study_steps": 0}
    assert _q(db, "SELECT COUNT(*) FROM claims")[0][0] == 0  # no lease left behind
