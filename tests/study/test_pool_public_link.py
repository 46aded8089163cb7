"""Issue 30, online pools: one public study link (a pool id in, the next slot out, a cap, the
same pool id never twice) and a code and return link for every way a session ends."""

from __future__ import annotations

import asyncio
import csv
from datetime import datetime, timedelta, timezone

import pytest

from lab.study.export import export_study
from lab.study.model import load_study
from lab.study.pool import PoolDoor, PoolRefusal
from lab.study.runner import StudyRunner, completion_code, design_hash
from lab.study.simulate import SimulatedDriver
from saves.store import Store
from saves.study import StudyStore
from studykit import SCRIPTED_ONLY, example_text

POOL = '''[pool]
id_param = "PROLIFIC_PID"
return_url = "https://app.prolific.com/submissions/complete?cc={code}"
max_participants = 2
time_limit_minutes = 60
[pool.completed]
code = "C1DONE"
[pool.declined]
code = "C1NOCONSENT"
[pool.screened_out]
code = "C1SCREEN"
return_url = "https://example.org/screened?who={pool_id}&cc={code}"
[pool.timed_out]
code = "C1TIMEOUT"
'''


def _study(tmp_path, pool: str = POOL, *, quiz_max: int | None = None, pattern: str | None = None):
    replace = dict(SCRIPTED_ONLY)
    if quiz_max is not None:
        expl = 'explanation = "Everyone in the meeting must place it in the same slot in the same round."'
        replace[expl] = expl + f"\nmax_attempts = {quiz_max}"
    if pattern is not None:
        replace["seed = 7 "] = f'participant_pattern = "{pattern}"\nseed = 7 '
    text = example_text(**replace)
    head = text.split("[pool]")[0]
    p = tmp_path / "study.toml"
    p.write_text(head + pool)
    return load_study(p)


class Person(SimulatedDriver):
    """A real participant answering as the simulated driver does, who may decline consent."""

    simulated = False

    def __init__(self, study, pid, *, consent: bool = True):
        super().__init__(study, pid)
        self.agree = consent
        self.ends: list[tuple] = []

    async def consent(self, text):
        return self.agree

    async def goodbye(self, outcome, **info):
        self.ends.append((outcome, info.get("code"), info.get("return_link")))

    async def thanks(self, code, **info):
        self.ends.append(("completed", info.get("pool_code"), info.get("return_link")))


async def test_the_public_link_admits_resumes_and_caps(tmp_path):
    study = _study(tmp_path)
    db = str(tmp_path / "s.db")
    door = PoolDoor(study, db)
    code_a, a = await door.admit("5f3c0001")
    assert a == "W001"
    # the same pool id again: the same participant, the same link, never a second slot
    assert await door.admit("5f3c0001") == (code_a, "W001")
    code_b, b = await door.admit("5f3c0002")
    assert b == "W002" and code_b != code_a
    with pytest.raises(PoolRefusal, match="full"):
        await door.admit("5f3c0003")  # max_participants = 2
    with pytest.raises(PoolRefusal, match="PROLIFIC_PID"):
        await door.admit("")
    async with await Store.open(db) as store:
        db_ = StudyStore(store, study.name)
        rows = {p["participant"]: p for p in await db_.participants()}
        assert {p: (r["pool_id"], r["slot"]) for p, r in rows.items()} == {"W001": ("5f3c0001", 0),
                                                                          "W002": ("5f3c0002", 1)}
        # W001 declines: their place is free again, and they stay themselves
        r = StudyRunner(study, store, "W001", Person(study, "W001", consent=False))
        await r.run()
    assert await door.admit("5f3c0001") == (code_a, "W001")
    _, c = await door.admit("5f3c0003")
    assert c == "W003"


async def test_two_arrivals_at_once_never_share_a_slot_or_a_pool_id(tmp_path):
    study = _study(tmp_path, POOL.replace("max_participants = 2", "max_participants = 10"))
    db = str(tmp_path / "s.db")
    door = PoolDoor(study, db)
    await door.admit("first")  # the database exists before the rush
    got = await asyncio.gather(*[door.admit(pid) for pid in ("x1", "x2", "x1", "x3", "x2", "x1")])
    assert len({pid for _, pid in got}) == 3
    assert got[0] == got[2] == got[5] and got[1] == got[4]
    async with await Store.open(db) as store:
        rows = await StudyStore(store, study.name).participants()
    assert sorted(r["slot"] for r in rows) == [0, 1, 2, 3]
    assert sorted(r["pool_id"] for r in rows) == ["first", "x1", "x2", "x3"]


def test_a_public_link_needs_ids_the_study_accepts(tmp_path):
    from lab.gamespec import SetupError

    study = _study(tmp_path, pattern="P[0-9]+")
    with pytest.raises(SetupError, match="participant_prefix"):
        PoolDoor(study, str(tmp_path / "s.db"))
    with pytest.raises(SetupError, match="max_participants"):
        PoolDoor(_study(tmp_path, '[pool]\nid_param = "PROLIFIC_PID"\n'), str(tmp_path / "s.db"))


async def test_every_outcome_gets_its_code_and_return_link_shown_and_exported(tmp_path):
    study = _study(tmp_path, quiz_max=1)
    wrong = (study.quiz[0].answer + 1) % len(study.quiz[0].choices)
    db = tmp_path / "s.db"
    async with await Store.open(db) as store:
        st = StudyStore(store, study.name)
        ends = {}
        for pid, pool_id in (("W001", "pp1"), ("W002", "pp2"), ("W003", "pp3"), ("W004", "pp4")):
            drv = Person(study, pid, consent=pid != "W002")
            if pid == "W003":
                async def bad_quiz(questions, **_):
                    return [{"item": 0, "response": wrong, "attempt": 1}]
                drv.quiz = bad_quiz
            r = StudyRunner(study, store, pid, drv)
            await r.enroll(pool_id=pool_id)
            if pid == "W004":  # registered 61 minutes ago: over the 60-minute limit at the next step
                old = (datetime.now(timezone.utc) - timedelta(minutes=61)).isoformat()
                async with store._tx() as tx:
                    await tx.execute("UPDATE study_participants SET started_at = ? WHERE participant = ?",
                                     (old, pid))
                r = StudyRunner(study, store, pid, drv)
            await r.run()
            ends[pid] = drv.ends
        states = {p["participant"]: p["state"] for p in await st.participants()}
        await export_study(study, store, tmp_path / "out")
    assert states == {"W001": "completed", "W002": "declined", "W003": "screened_out", "W004": "timed_out"}
    base = "https://app.prolific.com/submissions/complete?cc="
    assert ends == {"W001": [("completed", "C1DONE", base + "C1DONE")],
                    "W002": [("declined", "C1NOCONSENT", base + "C1NOCONSENT")],
                    "W003": [("screened_out", "C1SCREEN", "https://example.org/screened?who=pp3&cc=C1SCREEN")],
                    "W004": [("timed_out", "C1TIMEOUT", base + "C1TIMEOUT")]}
    with open(tmp_path / "out" / "participants.csv", newline="") as fh:
        rows = {r["participant"]: r for r in csv.DictReader(fh)}
    for pid, [(outcome, code, link)] in ends.items():
        assert (rows[pid]["status"], rows[pid]["pool_code"], rows[pid]["return_link"]) == (outcome, code, link)
    assert rows["W001"]["completion_code"] == completion_code(study, "W001")  # its own code is kept too
    with open(tmp_path / "out" / "payments.csv", newline="") as fh:
        assert {r["participant"]: r["pool_code"] for r in csv.DictReader(fh)} == {
            "W001": "C1DONE", "W002": "C1NOCONSENT", "W003": "C1SCREEN", "W004": "C1TIMEOUT"}


async def test_without_outcome_codes_only_completion_gets_a_link(tmp_path):
    study = _study(tmp_path, '[pool]\nreturn_url = "https://pool.example/done?cc={code}"\n')
    async with await Store.open(tmp_path / "s.db") as store:
        done, no = Person(study, "P1"), Person(study, "P2", consent=False)
        await StudyRunner(study, store, "P1", done).run()
        await StudyRunner(study, store, "P2", no).run()
    code = completion_code(study, "P1")
    assert done.ends == [("completed", code, f"https://pool.example/done?cc={code}")]
    assert no.ends == [("declined", None, None)]  # nothing to tell the pool: no code, no link


def test_old_study_files_keep_their_design_hash():
    """The [pool] keys added here leave a file that does not use them hashed as before (the
    hashes main computed for the example file), so returning participants are not told it changed."""
    from lab.study.model import parse_study

    assert design_hash(parse_study(example_text())) == "4dda0168e97474a8"
    assert design_hash(parse_study(example_text(**SCRIPTED_ONLY))) == "9ecde56f807eb133"
