"""Pilot-study rows beside the games (schema migration 4): participants, steps, answers,
beliefs and timings.  A small API over one :class:`saves.store.Store`; games themselves
stay in ``games`` / ``events`` / ``seat_results`` and are linked through ``study_steps.game_id``.

Every write is one transaction (``Store._tx``), so a crash leaves a participant at the
last step that was recorded complete.  ``withdraw`` removes every row of one participant,
their games included.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from engine.redact import redact

__all__ = ["StudyStore", "STUDY_TABLES", "StudyRows", "StudyMergeRefused", "read_study_rows", "check_study_merge",
           "merge_study_rows"]

STUDY_TABLES = ("study_participants", "study_steps", "study_answers", "study_beliefs", "study_timings",
                "study_drafts", "study_answer_drafts")


_DELETE_ANSWER_DRAFT = ("DELETE FROM study_answer_drafts WHERE study_id = ? AND participant = ? AND step = ? "
                       "AND questionnaire = ? AND item = ?")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


STALL_MINUTES = 10.0  # no step started or finished for this long: the participant has stalled


def _state(r: dict[str, Any]) -> str:
    """active | completed | declined | screened_out | timed_out (stalled is a reading of time, see lab.study.status)."""
    return r.get("outcome") or r["status"]


def _row(cur, row) -> dict[str, Any]:
    return {d[0]: v for d, v in zip(cur.description, row)}


class StudyStore:
    """The study tables of one open store."""

    def __init__(self, store: Any, study_id: str) -> None:
        self.store = store
        self.study_id = study_id

    # -- reading -------------------------------------------------------------------------------
    async def _all(self, sql: str, args: Iterable[Any] = ()) -> list[dict[str, Any]]:
        async with self.store._db.execute(sql, tuple(args)) as cur:
            return [_row(cur, r) for r in await cur.fetchall()]

    async def participant(self, participant: str) -> dict[str, Any] | None:
        rows = await self._all("SELECT * FROM study_participants WHERE study_id = ? AND participant = ?",
                               (self.study_id, participant))
        if not rows:
            return None
        r = rows[0]
        r["assignment"] = json.loads(r["assignment"])
        r["state"] = _state(r)
        return r

    async def participants(self, *, simulated: bool | None = None) -> list[dict[str, Any]]:
        where, args = "study_id = ?", [self.study_id]
        if simulated is not None:
            where += " AND simulated = ?"
            args.append(int(simulated))
        rows = await self._all(f"SELECT * FROM study_participants WHERE {where} ORDER BY simulated, slot, "
                               "started_at", args)
        for r in rows:
            r["assignment"] = json.loads(r["assignment"])
            r["state"] = _state(r)
        return rows

    async def steps(self, participant: str) -> list[dict[str, Any]]:
        rows = await self._all("SELECT * FROM study_steps WHERE study_id = ? AND participant = ? ORDER BY step",
                               (self.study_id, participant))
        for r in rows:
            r["data"] = json.loads(r["data"]) if r["data"] else {}
        return rows

    async def all_steps(self) -> list[dict[str, Any]]:
        rows = await self._all("SELECT * FROM study_steps WHERE study_id = ? ORDER BY participant, step",
                               (self.study_id,))
        for r in rows:
            r["data"] = json.loads(r["data"]) if r["data"] else {}
        return rows

    async def answers(self, participant: str | None = None) -> list[dict[str, Any]]:
        return await self._rows("study_answers", participant, "step, item, attempt")

    async def beliefs(self, participant: str | None = None) -> list[dict[str, Any]]:
        return await self._rows("study_beliefs", participant, "game_id, round, target, slot")

    async def timings(self, participant: str | None = None) -> list[dict[str, Any]]:
        return await self._rows("study_timings", participant, "rowid")

    async def drafts(self, participant: str | None = None) -> list[dict[str, Any]]:
        return await self._rows("study_drafts", participant, "rowid")

    async def answer_drafts(self, participant: str | None = None) -> list[dict[str, Any]]:
        """Written questionnaire answers not given yet (typed, enter not pressed), as last copied."""
        return await self._rows("study_answer_drafts", participant, "step, item")

    async def _rows(self, table: str, participant: str | None, order: str) -> list[dict[str, Any]]:
        where, args = "study_id = ?", [self.study_id]
        if participant is not None:
            where += " AND participant = ?"
            args.append(participant)
        return await self._all(f"SELECT * FROM {table} WHERE {where} ORDER BY participant, {order}", args)

    async def last_activity(self) -> dict[str, str]:
        """participant -> the latest time a step of theirs started or finished (UTC ISO)."""
        rows = await self._all("SELECT participant, MAX(COALESCE(started_at, ''), COALESCE(completed_at, '')) AS t "
                               "FROM study_steps WHERE study_id = ? GROUP BY participant, step", (self.study_id,))
        out: dict[str, str] = {}
        for r in rows:
            if r["t"] and r["t"] > out.get(r["participant"], ""):
                out[r["participant"]] = r["t"]
        return out

    async def held_slots(self, simulated: bool, *, stall_minutes: float = STALL_MINUTES,
                         now: datetime | None = None) -> dict[int, list[str]]:
        """slot -> the participants holding it: completed ones, and active ones not stalled.
        A slot of a participant who declined, was screened out, withdrew (their row is gone)
        or stalled (no step started or finished for ``stall_minutes``) is open again."""
        now = now or datetime.now(timezone.utc)
        last = await self.last_activity()
        held: dict[int, list[str]] = {}
        for p in await self.participants(simulated=simulated):
            if p["outcome"]:
                continue
            if p["status"] != "completed":
                ts = last.get(p["participant"]) or p["started_at"]
                if ts and (now - datetime.fromisoformat(ts)).total_seconds() / 60 >= stall_minutes:
                    continue
            held.setdefault(int(p["slot"]), []).append(p["participant"])
        return held

    async def next_slot(self, simulated: bool, *, stall_minutes: float = STALL_MINUTES,
                        now: datetime | None = None) -> int:
        """The lowest counterbalancing slot nobody holds (see :meth:`held_slots`)."""
        held = await self.held_slots(simulated, stall_minutes=stall_minutes, now=now)
        slot = 0
        while slot in held:
            slot += 1
        return slot

    # -- writing -------------------------------------------------------------------------------
    async def add_participant(self, participant: str, *, slot: int, simulated: bool,
                              assignment: list[dict[str, Any]], steps: list[str], design_hash: str,
                              pool_id: str | None = None) -> None:
        """Register a participant and their planned steps, in one transaction."""
        async with self.store._tx() as db:
            await self._insert(db, participant, slot, simulated, assignment, steps, design_hash, pool_id)

    async def register(self, participant: str, *, simulated: bool, plan: Callable[[int], tuple[list, list]],
                       design_hash: str, pool_id: str | None = None, stall_minutes: float = STALL_MINUTES) -> int:
        """Register a participant at the lowest open slot (:meth:`next_slot`), the slot chosen and
        the row written in one write transaction (two arrivals at once never take one slot).
        ``plan(slot)`` gives ``(assignment, steps)``.  Returns the slot."""
        async with self.store._tx() as db:
            slot = await self.next_slot(simulated, stall_minutes=stall_minutes)
            assignment, steps = plan(slot)
            await self._insert(db, participant, slot, simulated, assignment, steps, design_hash, pool_id)
        return slot

    async def admit_pool(self, pool_id: str, *, cap: int, new_id: Callable[[set[str]], str],
                         plan: Callable[[int], tuple[list, list]], design_hash: str,
                         stall_minutes: float = STALL_MINUTES) -> tuple[str | None, bool]:
        """A public link's arrival, in one write transaction (two arrivals at once, or the same pool
        id twice, never take two rows): the real participant who already has ``pool_id``
        (``(id, False)``, whatever their state); else, while fewer than ``cap`` real participants
        have not left (active or completed; declined, screened out and timed out free their place),
        a new one at the lowest open slot with id ``new_id(every id of the study)`` (``(id, True)``);
        else ``(None, False)``: the study is full."""
        async with self.store._tx() as db:
            rows = await self._all("SELECT participant, outcome FROM study_participants WHERE study_id = ? "
                                   "AND simulated = 0 AND pool_id = ? ORDER BY started_at LIMIT 1",
                                   (self.study_id, pool_id))
            if rows:
                return rows[0]["participant"], False
            taken = {r["participant"] for r in await self._all(
                "SELECT participant FROM study_participants WHERE study_id = ?", (self.study_id,))}
            staying = (await self._all("SELECT COUNT(*) AS n FROM study_participants WHERE study_id = ? AND "
                                       "simulated = 0 AND outcome IS NULL", (self.study_id,)))[0]["n"]
            if staying >= cap:
                return None, False
            participant = new_id(taken)
            slot = await self.next_slot(False, stall_minutes=stall_minutes)
            assignment, steps = plan(slot)
            await self._insert(db, participant, slot, False, assignment, steps, design_hash, pool_id)
        return participant, True

    async def _insert(self, db, participant, slot, simulated, assignment, steps, design_hash, pool_id) -> None:
        await db.execute("INSERT INTO study_participants (study_id, participant, slot, simulated, assignment, "
                         "design_hash, started_at, pool_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (self.study_id, participant, slot, int(simulated), json.dumps(assignment),
                          design_hash, _now(), pool_id))
        await db.executemany("INSERT INTO study_steps (study_id, participant, step, name) VALUES (?, ?, ?, ?)",
                             [(self.study_id, participant, i, name) for i, name in enumerate(steps)])

    async def start_step(self, participant: str, step: int, *, game_id: str | None = None) -> None:
        async with self.store._tx() as db:
            await db.execute("UPDATE study_steps SET started_at = COALESCE(started_at, ?), "
                             "game_id = COALESCE(?, game_id) WHERE study_id = ? AND participant = ? AND step = ?",
                             (_now(), game_id, self.study_id, participant, step))

    async def add_seconds(self, participant: str, step: int, seconds: float) -> None:
        async with self.store._tx() as db:
            await db.execute("UPDATE study_steps SET seconds = COALESCE(seconds, 0) + ? "
                             "WHERE study_id = ? AND participant = ? AND step = ?",
                             (seconds, self.study_id, participant, step))

    async def complete_step(self, participant: str, step: int, *, seconds: float = 0.0,
                            data: dict[str, Any] | None = None) -> None:
        async with self.store._tx() as db:
            await db.execute("UPDATE study_steps SET completed_at = ?, seconds = COALESCE(seconds, 0) + ?, "
                             "data = ? WHERE study_id = ? AND participant = ? AND step = ?",
                             (_now(), seconds, redact(json.dumps(data or {})), self.study_id, participant, step))

    async def complete_participant(self, participant: str, code: str) -> None:
        async with self.store._tx() as db:
            await db.execute("UPDATE study_participants SET status = 'completed', completed_at = ?, "
                             "completion_code = ? WHERE study_id = ? AND participant = ?",
                             (_now(), code, self.study_id, participant))

    async def set_outcome(self, participant: str, outcome: str) -> None:
        """The participant left for good: ``declined`` (consent), ``screened_out`` (the quiz) or
        ``timed_out`` (over the pool's time limit)."""
        async with self.store._tx() as db:
            await db.execute("UPDATE study_participants SET outcome = ?, completed_at = ? "
                             "WHERE study_id = ? AND participant = ?", (outcome, _now(), self.study_id, participant))

    async def set_pool_id(self, participant: str, pool_id: str) -> None:
        async with self.store._tx() as db:
            await db.execute("UPDATE study_participants SET pool_id = ? WHERE study_id = ? AND participant = ?",
                             (pool_id, self.study_id, participant))

    async def add_answers(self, participant: str, step: int, questionnaire: str,
                          answers: list[dict[str, Any]], *, game_id: str | None = None) -> None:
        """``answers``: ``{"item", "response", "attempt"=1, "correct"=None}`` each.  Written as
        each is given (a quit keeps it; a resume continues after it)."""
        rows = [(self.study_id, participant, step, questionnaire, a["item"],
                 None if a.get("response") is None else redact(str(a["response"])), int(a.get("attempt", 1)),
                 None if a.get("correct") is None else int(bool(a["correct"])), game_id, _now()) for a in answers]
        async with self.store._tx() as db:
            await db.executemany("INSERT OR REPLACE INTO study_answers (study_id, participant, step, questionnaire, "
                                 "item, response, attempt, correct, game_id, answered_at) "
                                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            # an answer given takes the place of what was being typed for it
            await db.executemany(_DELETE_ANSWER_DRAFT,
                                 [(self.study_id, participant, step, questionnaire, a["item"]) for a in answers])

    async def keep_answer_draft(self, participant: str, step: int, questionnaire: str, item: str, text: str, *,
                                game_id: str | None = None) -> None:
        """The live copy of a written answer not given yet (``study_answer_drafts``): ``text`` as
        it stands replaces the last copy of this item; blank text deletes it."""
        async with self.store._tx() as db:
            if str(text).strip():
                await db.execute("INSERT OR REPLACE INTO study_answer_drafts (study_id, participant, step, "
                                 "questionnaire, item, game_id, text, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                 (self.study_id, participant, step, questionnaire, item, game_id,
                                  redact(str(text)), _now()))
            else:
                await db.execute(_DELETE_ANSWER_DRAFT, (self.study_id, participant, step, questionnaire, item))

    async def add_beliefs(self, participant: str, game_id: str, round_: int, observer: int,
                          grid: dict[int, list[int | None]]) -> None:
        """``grid``: ``{target: [belief per slot]}``; ``None`` is a cell left blank (stored NULL)."""
        rows = [(self.study_id, participant, game_id, round_, observer, int(t), k, None if b is None else int(b),
                 _now())
                for t, row in grid.items() for k, b in enumerate(row)]
        async with self.store._tx() as db:
            await db.executemany("INSERT OR REPLACE INTO study_beliefs (study_id, participant, game_id, round, "
                                 "observer, target, slot, belief, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                 rows)

    async def add_timing(self, participant: str, game_id: str, *, round_: int | None, turn: int | None,
                         phase: str, seconds: float, timed_out: bool, partial: bool = False) -> None:
        """``partial``: the call was cut short by a quit (ctrl+q, a crash) before an answer."""
        async with self.store._tx() as db:
            await db.execute("INSERT INTO study_timings (study_id, participant, game_id, round, turn, phase, "
                             "seconds, timed_out, recorded_at, partial) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (self.study_id, participant, game_id, round_, turn, phase, round(seconds, 3),
                              int(timed_out), _now(), int(partial)))

    async def replace_drafts(self, participant: str, game_id: str, drafts: list[dict[str, Any]],
                             replacing: Iterable[int] = ()) -> list[int]:
        """The live copy of what the participant wrote but has not sent (``{"round", "kind" (queued |
        composer), "channel", "recipients", "text"}`` each): the rows ``replacing`` (this sitting's
        last copy, by rowid) are swapped for ``drafts`` in one transaction.  Returns the new rows' ids
        (to pass as ``replacing`` next time; an empty list when nothing is unsent)."""
        rows = [(self.study_id, participant, game_id, d.get("round"), d["kind"], d.get("channel"),
                 "|".join(str(r) for r in d.get("recipients") or ()) or None, redact(str(d["text"])), _now())
                for d in drafts if str(d.get("text") or "").strip()]
        ids: list[int] = []
        async with self.store._tx() as db:
            gone = [(int(r), self.study_id, participant) for r in replacing]
            if gone:
                await db.executemany("DELETE FROM study_drafts WHERE rowid = ? AND study_id = ? AND participant = ?",
                                     gone)
            for row in rows:
                cur = await db.execute("INSERT INTO study_drafts (study_id, participant, game_id, round, kind, "
                                       "channel, recipients, text, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                       row)
                ids.append(int(cur.lastrowid))
        return ids

    async def withdraw(self, participant: str) -> dict[str, int]:
        """Delete every row of ``participant``, their games (events, seat results) included.
        Returns the number of rows removed per table."""
        counts: dict[str, int] = {}
        async with self.store._tx() as db:
            async with db.execute("SELECT game_id FROM study_steps WHERE study_id = ? AND participant = ? "
                                  "AND game_id IS NOT NULL", (self.study_id, participant)) as cur:
                games = [r[0] for r in await cur.fetchall()]
            for table in ("events", "seat_results"):
                n = 0
                for g in games:
                    cur = await db.execute(f"DELETE FROM {table} WHERE game_id = ?", (g,))
                    n += cur.rowcount
                counts[table] = n
            n = 0
            for g in games:
                cur = await db.execute("DELETE FROM games WHERE game_id = ?", (g,))
                n += cur.rowcount
            counts["games"] = n
            for table in reversed(STUDY_TABLES):
                cur = await db.execute(f"DELETE FROM {table} WHERE study_id = ? AND participant = ?",
                                       (self.study_id, participant))
                counts[table] = cur.rowcount
        return counts

    async def delete_simulated(self) -> int:
        """Withdraw every simulated participant (a new dry run replaces the last one)."""
        sims = await self.participants(simulated=True)
        for p in sims:
            await self.withdraw(p["participant"])
        return len(sims)


# -- merging another host's database (``calbench import A.db B.db --db all.db``) ---------------

class StudyMergeRefused(Exception):
    """A source database whose study rows cannot join the target's (one line): another study
    design, or a participant already there with other rows.  Nothing of that source is written."""


async def _columns(db, table: str) -> list[str]:
    async with db.execute(f"PRAGMA table_info({table})") as cur:
        return [r[1] for r in await cur.fetchall()]


class StudyRows:
    """Every study row of one database, by participant: what a merge carries over.

    ``rows[(study_id, participant)][table]`` is that participant's rows of ``table`` (tuples in
    the order of ``columns[table]``; timings and drafts in the order they were written).
    Simulated participants (a dry run on that host) are not carried: their ids (``sim-001``, …)
    are the same on every host; ``simulated`` counts them per study and ``simulated_games`` holds
    their games' ids (left out of the merge with them)."""

    def __init__(self) -> None:
        self.columns: dict[str, list[str]] = {}
        self.rows: dict[tuple[str, str], dict[str, list[tuple]]] = {}
        self.hashes: dict[str, set[str]] = {}
        self.simulated: dict[str, int] = {}
        self.simulated_games: set[str] = set()

    def studies(self) -> list[str]:
        return sorted({sid for sid, _ in self.rows} | set(self.simulated))


async def read_study_rows(store: Any) -> StudyRows:
    """The study rows of ``store`` (a source database of a merge), see :class:`StudyRows`."""
    db = store._db
    out = StudyRows()
    sims: set[tuple[str, str]] = set()
    async with db.execute("SELECT study_id, participant, simulated, design_hash FROM study_participants") as cur:
        for sid, pid, simulated, dh in await cur.fetchall():
            if simulated:
                sims.add((sid, pid))
                out.simulated[sid] = out.simulated.get(sid, 0) + 1
                continue
            out.rows[(sid, pid)] = {t: [] for t in STUDY_TABLES}
            if dh:
                out.hashes.setdefault(sid, set()).add(dh)
    for table in STUDY_TABLES:
        cols = out.columns[table] = await _columns(db, table)
        listed = ", ".join(cols)
        async with db.execute(f"SELECT {listed} FROM {table} ORDER BY rowid") as cur:
            for row in await cur.fetchall():
                key = (row[0], row[1])  # every study table starts (study_id, participant, ...)
                if key in out.rows:
                    out.rows[key][table].append(tuple(row))
                elif table == "study_steps" and key in sims and row[cols.index("game_id")]:
                    out.simulated_games.add(row[cols.index("game_id")])
    return out


def _same(a: dict[str, list[tuple]], b: dict[str, list[tuple]]) -> bool:
    return all(Counter(a.get(t, ())) == Counter(b.get(t, ())) for t in STUDY_TABLES)


async def _plan(db, src: StudyRows, source: str, target: str,
                origin: dict[tuple[str, str], str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``(new, already there)`` participant keys of ``src`` against the database ``db``; raises
    :class:`StudyMergeRefused` for another design or a participant there with other rows."""
    for sid in sorted(src.hashes):
        async with db.execute("SELECT DISTINCT design_hash FROM study_participants WHERE study_id = ? "
                              "AND simulated = 0 AND design_hash IS NOT NULL", (sid,)) as cur:
            have = {r[0] for r in await cur.fetchall()}
        if have and not have & src.hashes[sid]:
            raise StudyMergeRefused(
                f"{source}: study {sid!r} was run from another study file than the one in {target} (design "
                f"{', '.join(sorted(src.hashes[sid]))} in {source}, {', '.join(sorted(have))} in {target}); "
                f"nothing of {source} was merged")
    new, same = [], []
    for key in sorted(src.rows):
        theirs: dict[str, list[tuple]] = {}
        for table in STUDY_TABLES:
            listed = ", ".join(src.columns[table])
            async with db.execute(f"SELECT {listed} FROM {table} WHERE study_id = ? AND participant = ?",
                                  key) as cur:
                theirs[table] = [tuple(r) for r in await cur.fetchall()]
        if not theirs["study_participants"]:
            new.append(key)
        elif _same(src.rows[key], theirs):
            same.append(key)
        else:
            other = origin.get(key, target)
            raise StudyMergeRefused(
                f"{source}: participant {key[1]} of study {key[0]!r} is also in {other}, with other rows; "
                f"nothing of {source} was merged (two hosts gave out one id, or the participant went on after an "
                f"earlier merge: then merge into a new database)")
    return new, same


async def check_study_merge(store: Any, src: StudyRows, source: str, *,
                            origin: dict[tuple[str, str], str]) -> None:
    """Raise :class:`StudyMergeRefused` now, before any game of ``source`` is written."""
    await _plan(store._db, src, source, store.path, origin)


async def merge_study_rows(store: Any, src: StudyRows, source: str, *,
                           origin: dict[tuple[str, str], str]) -> dict[str, dict[str, int]]:
    """Copy the participants of ``src`` that ``store`` lacks, every study table, in one write
    transaction (checked again inside it).  ``origin`` maps each participant merged in this run
    to the file it came from (for the refusal's words) and is updated.  Returns
    ``{study_id: {"new": n, "already": n, "simulated": n}}``."""
    async with store._tx() as db:
        new, same = await _plan(db, src, source, store.path, origin)
        for table in STUDY_TABLES:
            cols = src.columns[table]
            sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
            rows = [r for key in new for r in src.rows[key][table]]
            if rows:
                await db.executemany(sql, rows)
    for key in new:
        origin[key] = source
    out = {sid: {"new": 0, "already": 0, "simulated": src.simulated.get(sid, 0)} for sid in src.studies()}
    for sid, _ in new:
        out[sid]["new"] += 1
    for sid, _ in same:
        out[sid]["already"] += 1
    return out
