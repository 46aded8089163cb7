"""Reading the save database: a game's events and trace, listings, the rows reports
read, and the small questions other packages ask (``game_status``, ``seat_result``,
``last_round``).  Nothing here writes; no other package reads ``Store._db``."""

from __future__ import annotations

import json
from typing import Any, Iterable

from .codec import _loads, decode_events
from .errors import GameNotFound, _damaged
from .schema import schema_version
from .traces import _SEAT_COLUMNS, TRACE_COLUMNS, check_row_text, trace_from_row

_GAME_LIST_COLUMNS = ("game_id", "task_id", "agents", "status", "started_at", "ended_at", "coordination",
                      "excess_cost", "cost_mode", "source", "verification")
_GAME_LIST_TEXT = ("game_id", "task_id", "agents", "started_at", "ended_at", "cost_mode", "source", "verification")


class Queries:
    """The store's reads (a part of :class:`saves.store.Store`)."""

    async def schema_version(self) -> int:
        return await schema_version(self._db)

    async def resolve_game_id(self, game_id: str) -> str:
        """The full id of the one game whose id is ``game_id`` or starts with it."""
        prefix = game_id.strip()
        if not prefix:
            raise GameNotFound("no game id given")
        async with self._db.execute("SELECT game_id FROM games WHERE game_id = ?", (prefix,)) as cur:
            if await cur.fetchone() is not None:
                return prefix
        like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        async with self._db.execute("SELECT game_id FROM games WHERE game_id LIKE ? ESCAPE '\\' "
                                    "ORDER BY game_id LIMIT 6", (like,)) as cur:
            hits = [r[0] for r in await cur.fetchall()]
        if not hits:
            raise GameNotFound(f"no saved game matches {prefix!r} (see 'calbench games')")
        if len(hits) > 1:
            shown = ", ".join(h[:12] + "…" for h in hits[:5])
            more = " and more" if len(hits) > 5 else ""
            raise GameNotFound(f"{prefix!r} matches several saved games ({shown}{more}); give more characters")
        return hits[0]

    async def load_events(self, game_id: str, *, from_seq: int = 0) -> list[dict[str, Any]]:
        async with self._db.execute("SELECT b.codec, b.data, g.task_row FROM event_blobs b JOIN games g "
                                    "ON g.game_id = b.game_id WHERE b.game_id = ?", (game_id,)) as cur:
            blob = await cur.fetchone()
        if blob is not None:
            codec, data, task_row = blob
            events = decode_events(codec, data, _loads(task_row, game_id, "task row", dict), game_id=game_id)
            return [e for e in events if e["seq"] >= from_seq] if from_seq else events
        async with self._db.execute("SELECT seq, type, timestamp, data FROM events WHERE game_id = ? AND seq >= ? "
                                    "ORDER BY seq", (game_id, from_seq)) as cur:
            rows = await cur.fetchall()
        out = []
        for s, t, ts, d in rows:
            try:  # json, not orjson: an integer past 64 bits stays one, and is refused where it is stored
                data = json.loads(d)
            except (ValueError, TypeError, RecursionError):
                raise _damaged(game_id, f"event {s}", "is not valid JSON") from None
            if not isinstance(data, dict):
                raise _damaged(game_id, f"event {s}", "is not a JSON object")
            if not isinstance(t, str) or not (ts is None or isinstance(ts, str)):
                raise _damaged(game_id, f"event {s}", "has a type or timestamp that is not text")
            out.append({"seq": s, "type": t, "timestamp": ts, "data": data})
        return out

    async def load_trace(self, game_id: str) -> dict[str, Any]:
        """The trace of one saved game (SPEC §12 shape); a unique id prefix is enough."""
        gid = await self.resolve_game_id(game_id)
        async with self._db.execute(f"SELECT {', '.join(TRACE_COLUMNS)} FROM games WHERE game_id = ?",
                                    (gid,)) as cur:
            row = await cur.fetchone()
        check_row_text(gid, row)
        return trace_from_row(gid, row, await self.load_events(gid))

    async def interrupted_events(self, game_id: str) -> list[dict[str, Any]]:
        """The events of rounds cut short and played again (:meth:`reopen_game`), in seq order."""
        async with self._db.execute("SELECT extra FROM games WHERE game_id = ?", (game_id,)) as cur:
            row = await cur.fetchone()
        extra = _loads(row[0]) if row and row[0] else None
        found = extra.get("interrupted_events") if isinstance(extra, dict) else None
        return [e for e in found if isinstance(e, dict)] if isinstance(found, list) else []

    async def game_status(self, game_id: str) -> str | None:
        """The saved game's status (``running``, ``completed``, ``stopped``, ``failed``), or
        None when no game has this exact id."""
        async with self._db.execute("SELECT status FROM games WHERE game_id = ?", (game_id,)) as cur:
            row = await cur.fetchone()
        return row[0] if row else None

    async def seat_result(self, game_id: str, agent_id: int) -> dict[str, Any] | None:
        """One seat's ``seat_results`` row (the seat metrics, ``meetings_assigned`` … ``vps``),
        or None before the game has ended."""
        async with self._db.execute(f"SELECT {', '.join(_SEAT_COLUMNS)} FROM seat_results "
                                    "WHERE game_id = ? AND agent_id = ?", (game_id, agent_id)) as cur:
            row = await cur.fetchone()
        return dict(zip(_SEAT_COLUMNS, row)) if row is not None else None

    async def last_round(self, game_id: str) -> int | None:
        """The highest round any of the game's events is in (None before the first round)."""
        async with self._db.execute("SELECT MAX(round) FROM events WHERE game_id = ?", (game_id,)) as cur:
            top = (await cur.fetchone())[0]
        if top is None:  # a finished game's events are one compressed blob, not rows
            rounds = [(e.get("data") or {}).get("round") for e in await self.load_events(game_id)]
            top = max((r for r in rounds if isinstance(r, int)), default=None)
        return top

    async def list_games(self, *, status: str | None = None, task_id: str | None = None,
                         settings_key: str | None = None, source: str | None = None) -> list[dict[str, Any]]:
        where, args = self._filters(status=status, task_id=task_id, settings_key=settings_key, source=source)
        async with self._db.execute(f"SELECT {', '.join(_GAME_LIST_COLUMNS)} FROM games {where} "
                                    "ORDER BY started_at, game_id", args) as cur:
            rows = [dict(zip(_GAME_LIST_COLUMNS, r)) for r in await cur.fetchall()]
        for g in rows:  # a listing is read by people: a damaged cell is named, not a traceback
            for k in _GAME_LIST_TEXT:
                if g[k] is not None and not isinstance(g[k], str):
                    raise _damaged(g["game_id"], k.replace("_", " "), f"is a {type(g[k]).__name__}, not text")
            for k in ("coordination", "excess_cost"):
                if g[k] is not None and (isinstance(g[k], bool) or not isinstance(g[k], (int, float))):
                    raise _damaged(g["game_id"], k.replace("_", " "), f"is a {type(g[k]).__name__}, not a number")
        return rows

    @staticmethod
    def _filters(prefix: str = "", **kw: Any) -> tuple[str, list[Any]]:
        clauses, args = [], []
        for col, val in kw.items():
            if val is None:
                continue
            if isinstance(val, (list, tuple, set, frozenset)):
                vals = list(val)
                clauses.append(f"{prefix}{col} IN ({', '.join('?' * len(vals))})" if vals else "0")
                args.extend(vals)
            else:
                clauses.append(f"{prefix}{col} = ?")
                args.append(val)
        return ("WHERE " + " AND ".join(clauses)) if clauses else "", args

    async def completed_task_ids(self, settings_key: str) -> set[str]:
        async with self._db.execute("SELECT DISTINCT task_id FROM games WHERE settings_key = ? AND "
                                    "status = 'completed' AND task_id IS NOT NULL", (settings_key,)) as cur:
            return {r[0] for r in await cur.fetchall()}

    async def infra_failed_games(self, settings_key: str) -> list[tuple[str, str | None]]:
        """``(game_id, task_id)`` of the completed games under ``settings_key`` with a seat call
        the infrastructure failed (``games.failures``, migration 10: an endpoint down, a
        timeout) — their scores do not measure the agents; ``--resume`` sets them aside and
        plays their tasks again."""
        async with self._db.execute("SELECT game_id, task_id FROM games WHERE settings_key = ? AND "
                                    "status = 'completed' AND json_extract(failures, '$.infra') > 0 "
                                    "ORDER BY started_at, game_id", (settings_key,)) as cur:
            return [(r[0], r[1]) for r in await cur.fetchall()]

    async def completed_task_rows(self, settings_key: str) -> dict[str, set[str]]:
        """Task id -> the distinct task rows (JSON text) its completed games under
        ``settings_key`` were played on (a game saved without its row adds nothing)."""
        out: dict[str, set[str]] = {}
        async with self._db.execute("SELECT DISTINCT task_id, task_row FROM games WHERE settings_key = ? AND "
                                    "status = 'completed' AND task_id IS NOT NULL AND task_row IS NOT NULL",
                                    (settings_key,)) as cur:
            for tid, row in await cur.fetchall():
                out.setdefault(tid, set()).add(row)
        return out

    async def running_game_ids(self, settings_key: str | None = None) -> list[str]:
        where, args = self._filters(status="running", settings_key=settings_key)
        async with self._db.execute(f"SELECT game_id FROM games {where} ORDER BY started_at, game_id", args) as cur:
            return [r[0] for r in await cur.fetchall()]

    async def game_results(self, *, settings_key: str | Iterable[str] | None = None,
                           task_id: str | Iterable[str] | None = None, source: str | None = None,
                           status: str | None = "completed", cost_mode: str | None = None,
                           game_ids: Iterable[str] | None = None,
                           include_unverified: bool = False) -> list[dict[str, Any]]:
        """One row per (game, seat), joining ``games`` and ``seat_results``, for reports.

        Imported traces that did not verify are left out unless ``include_unverified``.

        Keys: game_id, task_id, agents, settings_key, status, source, cost_mode, coordination,
        excess_cost, started_at, agent_id, persona, model, the seat metrics
        (meetings_assigned … vps) and ``seat`` (the full per-seat record).
        """
        def norm(v):
            return v if v is None or isinstance(v, str) else tuple(v)

        where, args = self._filters("g.", settings_key=norm(settings_key), task_id=norm(task_id), source=source,
                                    status=status, cost_mode=cost_mode,
                                    game_id=tuple(game_ids) if game_ids is not None else None)
        if not include_unverified:
            where = (where + " AND " if where else "WHERE ") + "g.verification IS NOT 'unverified'"
        gcols = ("game_id", "task_id", "agents", "settings_key", "status", "source", "cost_mode", "coordination",
                 "excess_cost", "started_at", "failures")
        scols = ("agent_id", "persona", "model", *_SEAT_COLUMNS)
        sql = (f"SELECT {', '.join('g.' + c for c in gcols)}, {', '.join('s.' + c for c in scols)}, s.data "
               f"FROM games g JOIN seat_results s ON s.game_id = g.game_id {where} "
               "ORDER BY g.started_at, g.game_id, s.agent_id")
        out = []
        async with self._db.execute(sql, args) as cur:
            for r in await cur.fetchall():
                d = dict(zip(gcols + scols, r[:-1]))
                d["seat"] = _loads(r[-1], d["game_id"], f"seat {d['agent_id']} record", dict)
                d["failures"] = _loads(d["failures"], d["game_id"], "failures", dict) if d["failures"] else None
                for k in ("agents", "task_id", "persona", "model"):
                    if d[k] is not None and not isinstance(d[k], str):
                        raise _damaged(d["game_id"], k, f"is a {type(d[k]).__name__}, not text")
                out.append(d)
        return out

    async def integrity_check(self) -> str:
        async with self._db.execute("PRAGMA integrity_check") as cur:
            return (await cur.fetchone())[0]
