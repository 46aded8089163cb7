"""Writing games: a game that starts (``create_game``), is reopened to continue
(``reopen_game``), ends (``finish_game``, ``mark_status``), is deleted, or comes in whole
(``import_trace``, ``write_games``).  Each change is one transaction, so a crash leaves
the game as it was before it or as it is after it; a finished game's event rows are
packed into one blob in the transaction that finishes it."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Iterable

import aiosqlite
import orjson

from engine.trace import cost_mode_of_row, headline

from .codec import (_INSERT_BLOB, _INSERT_EVENT, _ROWS_PER_STATEMENT, BLOB_STATUSES, _dumps, _event_row,
                    _insert_events_sql, _loads, _now, _seq_key, _text, decode_events, encode_events)
from .errors import GameNotFound, StoreError
from .traces import (_INSERT_GAME, _INSERT_SEAT, _KNOWN_KEYS, STATUSES, PreparedGame, _game_rows, failures_json,
                     _insert_seats_sql, _seat_rows, prepare_game)


def _missing_rows(game_id: str, trace: dict[str, Any], top: int | None) -> list[tuple]:
    """Event rows of the trace's events after seq ``top`` (the last one saved): those the sink missed."""
    return [_event_row(game_id, ev, ev.get("seq", i)) for i, ev in enumerate(trace.get("events") or [])
            if isinstance(ev, dict) and (top is None or ev.get("seq", i) > top)]


class GameWrites:
    """The store's writes of games, their events and seat rows (a part of :class:`saves.store.Store`)."""

    async def _write_events(self, rows: list[tuple]) -> None:
        """Commit event rows atomically.

        Up to ``_ROWS_PER_STATEMENT`` rows go in one multi-row INSERT: one statement is one
        transaction in autocommit mode, and one trip to the database thread (which is
        what bulk writing is bound by).  More rows take an explicit transaction.
        """
        try:
            if len(rows) <= _ROWS_PER_STATEMENT:
                async with self._lock:
                    await self._db.execute(_insert_events_sql(len(rows)), [v for r in rows for v in r])
            else:
                async with self._tx() as db:
                    await db.executemany(_INSERT_EVENT, rows)
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"cannot save events of game {rows[0][0]}: {exc} "
                             "(was create_game called first?)") from None


    async def create_game(self, game_id: str, *, task_row: dict[str, Any], config: dict[str, Any], agents: str,
                          settings_key: str, started_at: str) -> None:
        """Record a game that starts now (status ``running``).

        A game id that is saved already but not completed (an interrupted run being
        rerun with the same deterministic id) is replaced; a completed one is an error.
        """
        from engine.game import CALBENCH_VERSION

        values = (game_id, _text(str(task_row.get("task_id"))) if task_row.get("task_id") is not None else None,
                  _dumps(task_row), _dumps(config), _text(agents), _text(settings_key), started_at,
                  cost_mode_of_row(task_row),
                  CALBENCH_VERSION)
        sql = ("INSERT INTO games (game_id, task_id, task_row, config, agents, settings_key, status, started_at, "
               "cost_mode, source, calbench_version) VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?, 'calbench', ?)")
        async with self._lock:  # the common case in one statement (autocommit)
            cur = await self._db.execute(sql.replace("INSERT", "INSERT OR IGNORE", 1), values)
            if cur.rowcount == 1:
                return
        async with self._tx() as db:
            old = await db.execute_fetchall("SELECT status FROM games WHERE game_id = ?", (game_id,))
            if old and old[0][0] == "completed":
                raise StoreError(f"game {game_id} is already saved and completed")
            await db.execute("DELETE FROM games WHERE game_id = ?", (game_id,))
            await db.execute(sql, values)

    async def reopen_game(self, game_id: str, keep_upto_seq: int) -> list[dict[str, Any]]:
        """Reopen a stopped (or crashed) game to continue it; returns the events kept.

        In one transaction: the events after ``keep_upto_seq`` (the round cut short; see
        ``engine.game.resume_point``) are moved out of ``events`` into the game's
        ``interrupted_events`` (kept in ``games.extra``, read back by :meth:`interrupted_events`
        and :meth:`load_trace`: nothing a person typed is deleted), the game is marked
        ``running`` again (``ended_at`` cleared), and the events up to ``keep_upto_seq`` are
        read back.  Those kept rows are never rewritten, so a crash at any moment leaves
        either the stopped game as it was or the reopened one.  The engine numbers new
        events after every set-aside one (``engine.game.run_game``).  A completed game is
        refused (``StoreError``); an unknown id raises ``GameNotFound``.
        """
        if not isinstance(keep_upto_seq, int) or isinstance(keep_upto_seq, bool) or keep_upto_seq < -1:
            raise StoreError(f"keep_upto_seq must be an event seq (or -1 for none), not {keep_upto_seq!r}")
        await self._flush_sinks(game_id)
        async with self._tx() as db:
            found = await db.execute_fetchall("SELECT status FROM games WHERE game_id = ?", (game_id,))
            if not found:
                raise GameNotFound(f"no saved game {game_id}")
            if found[0][0] == "completed":
                raise StoreError(f"game {game_id} is completed; only a stopped game can be reopened")
            await self._unpack_blob(db, game_id)
            cut = await db.execute_fetchall("SELECT seq, type, timestamp, data FROM events WHERE game_id = ? "
                                            "AND seq > ? ORDER BY seq", (game_id, keep_upto_seq))
            if cut:
                extra_row = await db.execute_fetchall("SELECT extra FROM games WHERE game_id = ?", (game_id,))
                extra = _loads(extra_row[0][0]) if extra_row and extra_row[0][0] else {}
                if not isinstance(extra, dict):
                    extra = {}
                aside = {e.get("seq"): e for e in extra.get("interrupted_events") or [] if isinstance(e, dict)}
                for q, t, ts, d in cut:
                    aside[q] = {"seq": q, "type": t, "timestamp": ts, "data": json.loads(d)}
                extra["interrupted_events"] = [aside[q] for q in sorted(aside, key=_seq_key)]
                await db.execute("UPDATE games SET extra = ? WHERE game_id = ?", (_dumps(extra), game_id))
            await db.execute("DELETE FROM events WHERE game_id = ? AND seq > ?", (game_id, keep_upto_seq))
            await db.execute("UPDATE games SET status = 'running', ended_at = NULL WHERE game_id = ?", (game_id,))
            rows = await db.execute_fetchall("SELECT seq, type, timestamp, data FROM events WHERE game_id = ? "
                                             "ORDER BY seq", (game_id,))
        return [{"seq": s, "type": t, "timestamp": ts, "data": json.loads(d)} for s, t, ts, d in rows]

    async def _unpack_blob(self, db: aiosqlite.Connection, game_id: str) -> None:
        """Turn a game's event blob back into one row per event (inside a transaction)."""
        found = await db.execute_fetchall("SELECT b.codec, b.data, g.task_row FROM event_blobs b JOIN games g "
                                          "ON g.game_id = b.game_id WHERE b.game_id = ?", (game_id,))
        if not found:
            return
        codec, data, task_row = found[0]
        events = decode_events(codec, data, _loads(task_row))
        await db.executemany(_INSERT_EVENT, [_event_row(game_id, ev, ev["seq"]) for ev in events])
        await db.execute("DELETE FROM event_blobs WHERE game_id = ?", (game_id,))

    async def _pack_events(self, db: aiosqlite.Connection, game_id: str, task_row: Any) -> None:
        """Replace a finished game's event rows by one lean, compressed blob (inside a transaction)."""
        rows = await db.execute_fetchall("SELECT seq, type, timestamp, data FROM events WHERE game_id = ? "
                                         "ORDER BY seq", (game_id,))
        if not rows:
            return
        events = [{"seq": q, "type": t, "timestamp": ts, "data": orjson.loads(d)} for q, t, ts, d in rows]
        codec, n, last, blob = encode_events(events, task_row)
        await db.execute(_INSERT_BLOB, (game_id, codec, n, last, blob))
        await db.execute("DELETE FROM events WHERE game_id = ?", (game_id,))

    async def finish_game(self, game_id: str, trace: dict[str, Any], status: str = "completed") -> None:
        """Store a game's end: final state, metrics, seat results; events the sink missed are added."""
        if status not in STATUSES:
            raise StoreError(f"unknown status {status!r}; choose from {', '.join(STATUSES)}")
        if status == "completed" and trace.get("stopped"):
            status = "stopped"
        await self._flush_sinks(game_id)
        db = self._db
        async with self._lock:
            found = await db.execute_fetchall(
                "SELECT agents, task_row IS NOT NULL, cost_mode, (SELECT MAX(seq) FROM events WHERE game_id = ?), "
                "(SELECT last_seq FROM event_blobs WHERE game_id = ?) FROM games WHERE game_id = ?",
                (game_id, game_id, game_id))
        if not found:
            game = _game_rows(dict(trace, game_id=game_id), status, None, None, None, None, False)
            async with self._tx() as db:
                await self._write_games(db, [game])
            return
        agents, has_task, cost_mode, top, blob_top = found[0]
        if blob_top is not None:
            top = blob_top if top is None else max(top, blob_top)
        missing = _missing_rows(game_id, trace, top)
        coord, excess = headline(trace)
        extra = await self._extra_of(game_id, trace)
        task = trace.get("task") if isinstance(trace.get("task"), dict) else None
        seats = _seat_rows(game_id, trace, agents)
        async with self._tx() as db:  # one commit: a game is 'completed' with all its events and seat rows
            if blob_top is not None and (missing or status not in BLOB_STATUSES):
                await self._unpack_blob(db, game_id)
            if missing:
                await db.executemany(_INSERT_EVENT, missing)
            if task is not None and not has_task:
                await db.execute("UPDATE games SET task_row = ?, task_id = COALESCE(task_id, ?) WHERE game_id = ?",
                                 (_dumps(task), task.get("task_id"), game_id))
            if seats:
                await db.execute(_insert_seats_sql(len(seats)), [v for r in seats for v in r])
            await db.execute(
                "UPDATE games SET status = ?, started_at = COALESCE(?, started_at), ended_at = ?, "
                "final_state = ?, metrics = ?, config = ?, coordination = ?, excess_cost = ?, extra = ?, "
                "calbench_version = COALESCE(?, calbench_version), cost_mode = ?, failures = ? WHERE game_id = ?",
                (status, trace.get("started_at"), trace.get("ended_at") or _now(), _dumps(trace.get("final_state")),
                 _dumps(trace.get("metrics")), _dumps(trace.get("config") or {}), coord, excess,
                 _dumps(extra) if extra else None, trace.get("calbench_version"),
                 cost_mode or cost_mode_of_row(task), failures_json(trace, status), game_id))
            if status in BLOB_STATUSES:
                row = await db.execute_fetchall("SELECT task_row FROM games WHERE game_id = ?", (game_id,))
                await self._pack_events(db, game_id, _loads(row[0][0]) if row else None)

    async def _extra_of(self, game_id: str, trace: dict[str, Any]) -> dict[str, Any]:
        """The trace's keys without a column of their own, with the game's set-aside events."""
        extra = {k: v for k, v in trace.items() if k not in _KNOWN_KEYS}
        if "interrupted_events" not in extra:  # e.g. a failure trace: the set-aside events stay
            kept = await self.interrupted_events(game_id)
            if kept:
                extra["interrupted_events"] = kept
        return extra

    async def mark_status(self, game_id: str, status: str) -> None:
        if status not in STATUSES:
            raise StoreError(f"unknown status {status!r}; choose from {', '.join(STATUSES)}")
        await self._flush_sinks(game_id)
        async with self._tx() as db:
            cur = await db.execute(
                "UPDATE games SET status = ?, ended_at = CASE WHEN ? = 'running' THEN ended_at "
                "ELSE COALESCE(ended_at, ?) END WHERE game_id = ?", (status, status, _now(), game_id))
            if cur.rowcount == 0:
                raise GameNotFound(f"no saved game {game_id}")

    async def keep_unsent(self, game_id: str, unsent: dict[str, Any] | None) -> None:
        """Keep what the person at a stopped game had queued or typed and not sent (the trace's
        ``unsent`` key, in ``games.extra``: ``calbench-play --resume`` puts it back); None
        forgets it.  A completed game is left alone."""
        async with self._tx() as db:
            row = await db.execute_fetchall("SELECT extra, status FROM games WHERE game_id = ?", (game_id,))
            if not row or row[0][1] == "completed":
                return
            extra = _loads(row[0][0]) if row[0][0] else {}
            if not isinstance(extra, dict):
                extra = {}
            if unsent:
                extra["unsent"] = unsent
            elif extra.pop("unsent", None) is None:
                return
            await db.execute("UPDATE games SET extra = ? WHERE game_id = ?",
                             (_dumps(extra) if extra else None, game_id))

    async def delete_game(self, game_id: str) -> bool:
        async with self._tx() as db:
            cur = await db.execute("DELETE FROM games WHERE game_id = ?", (game_id,))
            return cur.rowcount > 0

    # -- import / export ------------------------------------------------------------------
    async def import_trace(self, trace: dict[str, Any], *, verification: str | None = None,
                           problems: list[str] | None = None, encoded: tuple | None = None,
                           checked: bool = False) -> bool:
        """Save a JSON trace (ours or the authors'); False when its game id is saved already.

        ``verification`` ('verified' / 'unverified', with its ``problems``) is what the
        importer found when it folded the trace (``engine.verify.verify_trace``); None for
        a game this program just played.  Reports leave unverified games out by default.
        ``encoded``: the game's events already packed by :func:`encode_events`, with
        ``trace["events"]`` empty.  ``checked``: see :func:`prepare_game`.
        """
        game = prepare_game(trace, encoded=encoded, verification=verification, problems=problems, checked=checked)
        return (await self.write_games([game]))[0]

    async def write_games(self, games: Iterable[PreparedGame]) -> list[bool]:
        """Write several prepared games (:func:`prepare_game`) in one transaction — a suite's
        burst of finished games; one bool per game, False where its id is saved already
        (that one is left as it is)."""
        games = list(games)
        if not games:
            return []
        async with self._tx() as db:
            ids = [g.game_id for g in games]
            saved_ids: set[str] = set()
            for i in range(0, len(ids), 500):
                part = ids[i:i + 500]
                saved_ids |= {r[0] for r in await db.execute_fetchall(
                    f"SELECT game_id FROM games WHERE game_id IN ({', '.join('?' * len(part))})", part)}
            fresh, new = [], []
            for g in games:
                ok = g.game_id not in saved_ids
                saved_ids.add(g.game_id)
                fresh.append(ok)
                if ok:
                    new.append(g)
            try:
                await self._write_games(db, new)
            except (TypeError, OverflowError, sqlite3.InterfaceError, sqlite3.ProgrammingError) as exc:
                # a value SQLite or the JSON writer cannot hold (checked when prepared; this is the backstop)
                raise StoreError(f"not a trace: a value cannot be stored ({exc})") from None
        return fresh

    @staticmethod
    async def _write_games(db: aiosqlite.Connection, games: list[PreparedGame]) -> None:
        """Insert prepared games: a few statements for them all."""
        if not games:
            return
        await db.executemany(_INSERT_GAME, [g.game for g in games])
        blobs = [g.blob for g in games if g.blob is not None]
        if blobs:
            await db.executemany(_INSERT_BLOB, blobs)
        events = [r for g in games for r in g.events]
        if events:
            await db.executemany(_INSERT_EVENT, events)
        seats = [r for g in games for r in g.seats]
        if seats:
            await db.executemany(_INSERT_SEAT, seats)
