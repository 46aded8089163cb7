"""The save database: games, their events and per-seat results, in SQLite (DESIGN "Persistence").

One :class:`Store` wraps one aiosqlite connection in WAL mode.  Games are created when
they start (``create_game``), their events arrive through a sink as they happen
(``sink``), and ``finish_game`` stores the final state, the metrics and one
``seat_results`` row per seat.  JSON traces (ours and the paper authors') come in and
go out through ``import_trace`` / ``load_trace``.

Durability, in the two modes a sink offers:

* ``durable=True`` (interactive games) commits every event as it is emitted, so a kill
  loses at most the event being written;
* ``durable=False`` (headless scripted suites, where events come at microsecond rates)
  buffers and commits at phase boundaries — a ``resolution`` or ``game_end`` event, or
  every 200 events — in one transaction each; a kill loses at most the phase being
  written (and ``--resume`` reruns an unfinished game anyway).

WAL with ``synchronous=NORMAL`` keeps every committed transaction across a process kill
(only a power cut may lose the last ones); the database is never left corrupt.

The schema lives in ``schema.sql`` as numbered forward migrations; ``Store.open`` applies
the missing ones in order.  API keys are never written here: every JSON text goes
through ``engine.redact.redact`` on its way in.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json

import orjson
import os
import re
import sqlite3
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable

import aiosqlite

from engine.inputs import MAX_NESTING, check_id, nesting_depth, non_finite_at
from engine.model import COST_MODES
from engine.redact import redact
from engine.trace import cost_mode as trace_cost_mode
from engine.trace import cost_mode_of_row, headline, seat_results

STATUSES = ("running", "completed", "stopped", "failed")
FLUSH_TYPES = frozenset({"resolution", "game_end"})
FLUSH_EVERY = 200

# Top-level trace keys that have their own column; anything else goes to games.extra.
_KNOWN_KEYS = frozenset({"game_id", "config", "events", "final_state", "metrics", "started_at", "ended_at",
                         "stopped", "calbench_version", "task", "saved"})

_SEAT_COLUMNS = ("meetings_assigned", "meetings_scheduled", "success", "cost", "cost_shown", "oracle_cost",
                 "oracle_cost_shown", "excess", "excess_shown", "signed_excess", "signed_excess_shown",
                 "adjusted_cost", "fairness", "messages_sent", "messages_received", "messages_per_meeting", "vps")

_GAME_LIST_COLUMNS = ("game_id", "task_id", "agents", "status", "started_at", "ended_at", "coordination",
                      "excess_cost", "cost_mode", "source", "verification")
_GAME_LIST_TEXT = ("game_id", "task_id", "agents", "started_at", "ended_at", "cost_mode", "source", "verification")


class StoreError(Exception):
    """Something about the save database the user can act on; the message says what."""


class GameNotFound(StoreError, LookupError):
    """No saved game matches the id (or prefix) given."""


# -- schema ----------------------------------------------------------------------------------

_MIGRATION_HEADER = re.compile(r"^--\s*migration\s+(\d+)\s*:\s*(.*)$", re.MULTILINE)


def _split_statements(sql: str) -> list[str]:
    """Split a script into statements (comments kept inside; semicolons in comments are fine)."""
    out, buf = [], ""
    for line in sql.splitlines(keepends=True):
        if not buf and line.lstrip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out


def load_migrations(text: str | None = None) -> list[tuple[int, str, list[str]]]:
    """``[(version, title, statements), ...]`` from schema.sql, checked to be 1, 2, 3, ..."""
    if text is None:
        text = resources.files("saves").joinpath("schema.sql").read_text(encoding="utf-8")
    heads = list(_MIGRATION_HEADER.finditer(text))
    steps = []
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        steps.append((int(m.group(1)), m.group(2).strip(), _split_statements(text[m.end():end])))
    versions = [v for v, _, _ in steps]
    if versions != list(range(1, len(steps) + 1)):
        raise RuntimeError(f"schema.sql migrations must be numbered 1, 2, 3, ... (found {versions})")
    return steps


MIGRATIONS = load_migrations()
SCHEMA_VERSION = MIGRATIONS[-1][0]


# -- small helpers ---------------------------------------------------------------------------

def _dumps(obj: Any) -> str:
    # orjson: ~7x faster than json for event rows, the store's hot path in bulk suites.
    # Every JSON text the store writes passes through engine.redact: the last line of
    # defence against a key that reached a failure detail or a message.
    return redact(orjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS).decode())


def _text(v: Any) -> Any:
    """A plain text column (agents, settings key, persona, model): redacted like JSON texts."""
    return redact(v) if isinstance(v, str) else v


class DamagedRow(StoreError):
    """A stored value that cannot be read back (edited by hand, a damaged file): one line
    naming the game and the column, never a traceback (issue 24 item 13)."""


def _damaged(game_id: Any, what: str, why: str) -> DamagedRow:
    from engine.inputs import printable

    return DamagedRow(f"the save database is damaged: game {printable(game_id, 40)}'s {what} {why}; "
                      "export the other games, or restore the database from a copy")


def _loads(text: str | None, game_id: Any = None, what: str | None = None, kind: type | None = None) -> Any:
    """A stored JSON text.  With ``what`` (a column) the value must decode, and be a ``kind``
    (or None) when given; otherwise :class:`DamagedRow`."""
    if text is None:
        return None
    if what is None:
        return orjson.loads(text)
    try:
        value = orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        raise _damaged(game_id, what, "is not valid JSON") from None
    if kind is not None and value is not None and not isinstance(value, kind):
        raise _damaged(game_id, what, f"is a JSON {type(value).__name__}, not an {kind.__name__}")
    return value


def _seq_key(q: Any) -> tuple:
    return (not isinstance(q, int), q if isinstance(q, int) else 0)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _num(v: Any) -> Any:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _event_row(game_id: str, ev: dict[str, Any], seq: int) -> tuple:
    data = ev.get("data")
    if not isinstance(data, dict):
        data = {}
    rnd, agent = data.get("round"), data.get("agent_id")
    return (game_id, seq, str(ev.get("type")), ev.get("timestamp"),
            rnd if isinstance(rnd, int) else None, agent if isinstance(agent, int) else None, _dumps(data))


_INSERT_EVENT = ("INSERT OR REPLACE INTO events (game_id, seq, type, timestamp, round, agent_id, data) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?)")
_ROWS_PER_STATEMENT = 400  # 7 parameters a row; SQLite allows 32766 per statement


@functools.lru_cache(maxsize=64)
def _insert_events_sql(n: int) -> str:
    return _INSERT_EVENT + ", (?, ?, ?, ?, ?, ?, ?)" * (n - 1)


# -- lean, compressed events of finished games (migration 5) ---------------------------------
#: games with these statuses keep their events as one blob; running and stopped games keep
#: one row per event (a stopped game may be reopened and continued).
BLOB_STATUSES = frozenset({"completed", "failed"})
#: zstd level 3: as small as zlib level 6 on these payloads at about a tenth of its CPU time
#: (measured: 0.08 ms vs 0.73 ms per scripted game, 5,980 vs 5,987 bytes)
_ZSTD_LEVEL = 3


def _task_of(task_row: Any):
    if not isinstance(task_row, dict):
        return None
    try:
        from engine.model import Task

        return Task.from_row(task_row)
    except Exception:
        return None


def encode_events(events: list[dict[str, Any]], task_row: Any = None, *, task: Any = None,
                  trusted: bool = False) -> tuple[str, int, int | None, bytes]:
    """``(codec, count, last_seq, blob)`` for a finished game's events.

    With a task row (or its ``task``, the same task already read) the events are slimmed
    first (``engine.lean``: calendar renders and copies that folding rebuilds exactly are
    left out); every event keeps its seq, type, timestamp and the rest of its data.
    ``trusted``: the events were just made by this engine (``engine.lean.slim_events``).
    :func:`decode_events` is the exact inverse.
    """
    import zstandard

    slim = None
    task = task if task is not None else _task_of(task_row)
    if task is not None:
        from engine.lean import slim_events

        try:
            slim = slim_events(task, events, trusted=trusted)
        except Exception:  # never lose a game over an odd trace: store it whole
            slim = None
    if slim is None:
        codec = "json-zstd"
        rows = [[ev.get("seq", i), str(ev.get("type")), ev.get("timestamp"), d if isinstance(d, dict) else {}]
                for i, (ev, d) in enumerate((ev, ev.get("data")) for ev in events)]
    else:
        codec = "lean-zstd"
        rows = [[ev.get("seq", i), str(ev.get("type")), ev.get("timestamp"), d if isinstance(d, dict) else {}, k]
                for i, (ev, (d, k)) in enumerate(zip(events, slim))]
    # trusted events were not checked value by value (``_check_trace``): a value JSON cannot
    # hold raises here rather than being stored as its text
    payload = orjson.dumps(rows, default=None if trusted else str, option=orjson.OPT_NON_STR_KEYS)
    text = payload.decode()
    clean = redact(text)  # like every JSON text the store writes
    if clean is not text and clean != text:
        payload = clean.encode()
    last = max((r[0] for r in rows if isinstance(r[0], int)), default=None)
    return codec, len(rows), last, zstandard.ZstdCompressor(level=_ZSTD_LEVEL).compress(payload)


def decode_events(codec: str, blob: bytes, task_row: Any = None, *, game_id: Any = "?") -> list[dict[str, Any]]:
    """The events :func:`encode_events` stored, in full, in seq order.  A blob that does not
    decode is a :class:`DamagedRow`."""
    if codec not in ("lean-zstd", "json-zstd"):
        raise StoreError(f"unknown event codec {codec!r}; upgrade calbench to read this database")
    try:
        return _decode_events(codec, blob, task_row)
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - zstd, JSON or shape: the stored bytes are not what we wrote
        raise _damaged(game_id, "events", f"cannot be read ({type(exc).__name__})") from None


def _decode_events(codec: str, blob: bytes, task_row: Any) -> list[dict[str, Any]]:
    import zstandard

    if not isinstance(blob, bytes):
        raise TypeError("the events are not stored as bytes")
    rows = orjson.loads(zstandard.ZstdDecompressor().decompress(blob, max_output_size=_MAX_EVENTS_BYTES))
    if codec == "lean-zstd":
        task = _task_of(task_row)
        if task is None:
            raise StoreError("a lean trace cannot be read without its task row")
        from engine.lean import fatten_events

        datas = fatten_events(task, [(r[1], r[3], r[4]) for r in rows])
    else:
        datas = [r[3] for r in rows]
    evs = [{"seq": r[0], "type": r[1], "timestamp": r[2], "data": d} for r, d in zip(rows, datas)]
    evs.sort(key=lambda e: e["seq"])
    return evs


_INSERT_GAME = ("INSERT INTO games (game_id, task_id, task_row, config, agents, settings_key, status, started_at, "
                "ended_at, final_state, metrics, cost_mode, source, calbench_version, coordination, excess_cost, "
                "extra, verification, verification_problems) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "?, ?, ?)")
_INSERT_BLOB = "INSERT OR REPLACE INTO event_blobs (game_id, codec, events, last_seq, data) VALUES (?, ?, ?, ?, ?)"


def _agents_of(config: dict[str, Any]) -> list[dict[str, Any]]:
    agents = config.get("agents") if isinstance(config, dict) else None
    return [a if isinstance(a, dict) else {"type": str(a)} for a in agents] if isinstance(agents, list) else []


def _seat_rows(game_id: str, trace: dict[str, Any], agents_spec: str) -> list[tuple]:
    """seat_results rows: from metrics.per_seat (ours), else from final_state (the authors')."""
    config = trace.get("config") if isinstance(trace.get("config"), dict) else {}
    cfg_agents = _agents_of(config)
    spec = [s.strip() for s in agents_spec.split(",")] if agents_spec else []
    seats = seat_results(trace)
    rows = []
    for i, s in enumerate(seats):
        a = s.get("agent_id", i)
        if not isinstance(a, int):
            a = i
        if len(spec) == len(seats) and 0 <= a < len(spec):
            persona = spec[a]
        else:
            persona = cfg_agents[a].get("type") if 0 <= a < len(cfg_agents) else None
        model = s.get("model") or (cfg_agents[a].get("model") if 0 <= a < len(cfg_agents) else None)
        rows.append((game_id, a, _text(persona), _text(model), *[_num(s.get(c)) for c in _SEAT_COLUMNS], _dumps(s)))
    return rows


_SEAT_VALUES = f"({', '.join('?' * (len(_SEAT_COLUMNS) + 5))})"
_INSERT_SEAT = (f"INSERT OR REPLACE INTO seat_results (game_id, agent_id, persona, model, {', '.join(_SEAT_COLUMNS)}, "
                f"data) VALUES {_SEAT_VALUES}")


@functools.lru_cache(maxsize=16)
def _insert_seats_sql(n: int) -> str:
    return _INSERT_SEAT + f", {_SEAT_VALUES}" * (n - 1)


#: Largest decompressed event blob read back (a long LLM game's lean events are a few MB).
_MAX_EVENTS_BYTES = 1 << 30
MAX_DEPTH = MAX_NESTING  # 64: a trace nests a dozen levels; far deeper is not one (docs/hardening.md)
_INT_MIN, _INT_MAX = -(2 ** 63), 2 ** 63 - 1  # what SQLite and the JSON writer hold


def _check_values(obj: Any) -> None:
    """Refuse, in plain words, values the store cannot hold: integers outside 64 bits,
    non-JSON types, non-string keys, deep nesting.

    Fast path: orjson refuses exactly these (~0.3 ms for a game's trace); only when it
    does is the value walked (iteratively) to say where."""
    try:
        orjson.dumps(obj)
        return
    except (TypeError, orjson.JSONEncodeError) as exc:
        _locate_bad_value(obj)
        raise StoreError(f"not a trace: it holds a value that cannot be stored ({exc})") from None


def _locate_bad_value(obj: Any) -> None:
    stack: list[tuple[Any, int, str]] = [(obj, 0, "")]
    while stack:
        v, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            raise StoreError(f"not a trace: nested more than {MAX_DEPTH} levels deep (at {where or 'the top'})")
        if isinstance(v, bool) or v is None or isinstance(v, str):
            continue
        if isinstance(v, int):
            if not _INT_MIN <= v <= _INT_MAX:
                raise StoreError(f"not a trace: the number at {where or 'the top'} is too large to store")
        elif isinstance(v, float):
            continue
        elif isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str):
                    raise StoreError(f"not a trace: a key at {where or 'the top'} is not a string")
                if isinstance(x, (dict, list, int)) and not isinstance(x, bool):
                    stack.append((x, depth + 1, f"{where}.{k}" if where else k))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                if isinstance(x, (dict, list, int)) and not isinstance(x, bool):
                    stack.append((x, depth + 1, f"{where}[{i}]"))
        else:
            raise StoreError(f"not a trace: {where or 'the top'} holds a {type(v).__name__}, not a JSON value")


def _check_trace(trace: Any, *, trusted: bool = False) -> None:
    """Refuse, in plain words, what is not a trace.  ``trusted``: the engine just made its
    events, so only the rest is checked here (the events' values are checked as they are
    encoded, ``encode_events``)."""
    if not isinstance(trace, dict):
        raise StoreError(f"not a trace: expected a JSON object, got {type(trace).__name__}")
    _check_values({k: v for k, v in trace.items() if k != "events"} if trusted else trace)
    if not trusted and nesting_depth(trace, MAX_DEPTH) > MAX_DEPTH:  # orjson alone lets 254 levels through
        raise StoreError(f"not a trace: nested more than {MAX_DEPTH} levels deep (the limit)")
    if not trusted:  # orjson writes NaN and Infinity as null: a metric would change on the way in
        bad = non_finite_at(trace)
        if bad is not None:
            raise StoreError(f"not a trace: {bad} is NaN or infinite; a trace holds finite numbers only")
    for key in ("started_at", "ended_at"):
        if trace.get(key) is not None and not isinstance(trace[key], str):
            raise StoreError(f"not a trace: '{key}' must be a date-time string, got {type(trace[key]).__name__}")
    if "stopped" in trace and not isinstance(trace["stopped"], (bool, type(None))):
        raise StoreError("not a trace: 'stopped' must be true or false")
    for key in ("metrics", "final_state", "task", "saved"):
        if trace.get(key) is not None and not isinstance(trace[key], dict):
            raise StoreError(f"not a trace: '{key}' must be an object")
    gid = trace.get("game_id")
    if not isinstance(gid, str) or not gid.strip():
        raise StoreError("not a trace: 'game_id' is missing or not a string")
    if not trusted:  # ids are capped where they come in (issue 24 item 11)
        check_id(gid, "not a trace: its 'game_id'", error=StoreError)
        tid = (trace.get("config") or {}).get("task_id") if isinstance(trace.get("config"), dict) else None
        if tid is not None:
            check_id(str(tid), "not a trace: its config's 'task_id'", error=StoreError)
    events = trace.get("events")
    if not isinstance(events, list):
        raise StoreError("not a trace: 'events' is missing or not a list")
    if "config" in trace and not isinstance(trace["config"], dict):
        raise StoreError("not a trace: 'config' must be an object")
    if trusted:
        return
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or not isinstance(ev.get("type"), str) or not isinstance(ev.get("data"), dict):
            raise StoreError(f"not a trace: event {i} needs a 'type' string and a 'data' object")
        ts = ev.get("timestamp")
        if ts is not None and not isinstance(ts, (str, int, float)):
            raise StoreError(f"not a trace: event {i} has a {type(ts).__name__} as its timestamp")
    seqs = [ev.get("seq", i) for i, ev in enumerate(events)]
    bad = [s for s in seqs if not isinstance(s, int) or isinstance(s, bool)]
    if bad:
        raise StoreError(f"not a trace: an event 'seq' must be an integer, got {bad[0]!r}")
    if len(set(seqs)) != len(seqs):
        raise StoreError("not a trace: two events share one 'seq'")


# -- no peeking ------------------------------------------------------------------------------

REVEAL_FLAG = "--reveal-all-seats"


def human_game_in_play(trace: dict[str, Any]) -> bool:
    """A saved game with a human seat that has not ended (running, or stopped and resumable).

    Its trace holds every seat's calendar and private labels; showing it from another shell
    while the participant plays would let anyone peek.  Commands refuse such a game unless
    the researcher adds :data:`REVEAL_FLAG`.
    """
    saved = trace.get("saved") if isinstance(trace.get("saved"), dict) else {}
    status = saved.get("status")
    if status not in ("running", "stopped"):
        return False
    cfg = trace.get("config") if isinstance(trace.get("config"), dict) else {}
    kinds = {str(a.get(k)).lower() for a in _agents_of(cfg) for k in ("type", "kind")}
    names = {n.strip().lower() for n in str(saved.get("agents") or "").split(",")}
    return ("human" in kinds or "human" in names or isinstance(cfg.get("human_seat"), int)
            or bool(cfg.get("remote_seats")) or cfg.get("participant") is not None)


def in_play_message(trace: dict[str, Any], what: str) -> str:
    status = (trace.get("saved") or {}).get("status")
    return (f"game {str(trace.get('game_id'))[:8]} has a human seat and has not ended ({status}); {what} it now "
            f"would show every seat's calendar, costs and private labels to whoever reads this terminal. "
            f"Wait until the game ends, or add {REVEAL_FLAG} to show them anyway")


# -- backfills run after a migration step, inside its transaction -----------------------------

async def _backfill_v2(db: aiosqlite.Connection) -> None:
    """Fill the columns and seat rows migration 2 added, from what version 1 stored."""
    async with db.execute("SELECT game_id, task_row, config, agents, final_state, metrics FROM games") as cur:
        games = await cur.fetchall()
    for gid, task_row, config, agents, final_state, metrics in games:
        row = _loads(task_row)
        trace = {"config": _loads(config) or {}, "final_state": _loads(final_state), "metrics": _loads(metrics)}
        coord, excess = headline(trace)
        await db.execute("UPDATE games SET cost_mode = ?, coordination = ?, excess_cost = ?, "
                         "source = ? WHERE game_id = ?",
                         (cost_mode_of_row(row), coord, excess, "calbench" if row is not None else "authors", gid))
        rows = _seat_rows(gid, trace, agents or "")
        if rows:
            await db.executemany(_INSERT_SEAT, rows)


BACKFILLS: dict[int, Callable[[aiosqlite.Connection], Awaitable[None]]] = {2: _backfill_v2}


# -- the sink --------------------------------------------------------------------------------

class StoreSink:
    """An ``engine.events.EventSink`` writing one game's events to the store."""

    def __init__(self, store: "Store", game_id: str, durable: bool) -> None:
        self.store = store
        self.game_id = game_id
        self.durable = durable
        self.buffer: list[tuple] = []
        self.written = 0  # events committed through this sink
        self.closed = False

    async def emit(self, event: dict[str, Any]) -> None:
        if self.closed:
            raise StoreError(f"the event sink for game {self.game_id} is closed")
        seq = event.get("seq")
        row = _event_row(self.game_id, event, seq if isinstance(seq, int) else self.written + len(self.buffer))
        if self.durable:
            await self.store._write_events([row])
            self.written += 1
            return
        self.buffer.append(row)
        if event.get("type") in FLUSH_TYPES or len(self.buffer) >= FLUSH_EVERY:
            await self.flush()

    async def flush(self) -> None:
        """Commit everything emitted so far, in one transaction."""
        if not self.buffer:
            return
        rows = list(self.buffer)
        await self.store._write_events(rows)
        del self.buffer[: len(rows)]  # only once committed: a cancelled flush keeps them for the next one
        self.written += len(rows)

    async def aclose(self) -> None:
        if self.closed:
            return
        try:
            await self.flush()
        finally:
            self.closed = True
            self.store._forget_sink(self)

    async def __aenter__(self) -> "StoreSink":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


# -- the store -------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PreparedGame:
    """A game's rows, ready to be written: made where the game was played (a worker
    process, a Ray worker), so the one writer of the database only inserts them.

    ``game``: the ``games`` row; ``blob``: the ``event_blobs`` row of a finished game (or
    None); ``events``: ``events`` rows of a running or stopped one; ``seats``: the
    ``seat_results`` rows.  Plain tuples of text, numbers and bytes: cheap to send."""

    game: tuple
    blob: tuple | None
    events: list[tuple]
    seats: list[tuple]

    @property
    def game_id(self) -> str:
        return self.game[0]

    @property
    def task_id(self) -> str | None:
        return self.game[1]


def prepare_game(trace: dict[str, Any], *, encoded: tuple | None = None, verification: str | None = None,
                 problems: list[str] | None = None, task: Any = None, trusted: bool = False) -> PreparedGame:
    """Check ``trace`` and turn it into the rows saving it writes (:class:`PreparedGame`).

    ``encoded``: its events already packed by :func:`encode_events`, with ``trace["events"]``
    empty.  Otherwise a finished game's events are packed here: ``task`` is its task when
    the caller has it (else it is read from the trace's row) and ``trusted`` says the
    events were just made by this engine (``engine.lean.slim_events``).  A value the store
    cannot hold is a :class:`StoreError`.
    """
    _check_trace(trace, trusted=trusted and encoded is None)
    if encoded is not None and (len(encoded) != 4 or encoded[0] not in ("lean-zstd", "json-zstd")):
        raise StoreError("encoded events must be (codec, count, last_seq, blob) from encode_events")
    saved = trace.get("saved") if isinstance(trace.get("saved"), dict) else {}
    if verification is None:
        v = saved.get("verification")
        verification = v if v in ("verified", "unverified") else None
    status = saved.get("status") if saved.get("status") in STATUSES else None
    if status is None:
        status = "stopped" if trace.get("stopped") or "final_state" not in trace else "completed"
    try:
        return _game_rows(trace, status, verification, problems, encoded, task, trusted)
    except (TypeError, OverflowError, orjson.JSONEncodeError) as exc:
        raise StoreError(f"not a trace: a value cannot be stored ({exc})") from None


def _game_rows(trace: dict[str, Any], status: str, verification: str | None, problems: list[str] | None,
               encoded: tuple | None, task_obj: Any, trusted: bool) -> PreparedGame:
    gid = trace["game_id"]
    config = trace.get("config") if isinstance(trace.get("config"), dict) else {}
    task = trace.get("task") if isinstance(trace.get("task"), dict) else None
    saved = trace.get("saved") if isinstance(trace.get("saved"), dict) else {}
    source = saved.get("source") or ("calbench" if task is not None or "calbench_version" in trace else "authors")
    agents = saved.get("agents")
    if not isinstance(agents, str):
        agents = ",".join(str(a.get("type")) for a in _agents_of(config))
    settings_key = saved.get("settings_key")
    if not isinstance(settings_key, str):
        settings_key = f"{source}:{config.get('experiment_name') or agents}"
    task_id = (task or {}).get("task_id") or config.get("task_id")
    cost_mode = saved.get("cost_mode") if saved.get("cost_mode") in COST_MODES else trace_cost_mode(trace)
    coord, excess = headline(trace)
    extra = {k: v for k, v in trace.items() if k not in _KNOWN_KEYS}
    game = (gid, _text(str(task_id)) if task_id is not None else None, _dumps(task) if task else None,
            _dumps(config), _text(agents), _text(settings_key), status, trace.get("started_at"), trace.get("ended_at"),
            _dumps(trace["final_state"]) if "final_state" in trace else None,
            _dumps(trace["metrics"]) if "metrics" in trace else None,
            cost_mode, source, trace.get("calbench_version"), coord, excess, _dumps(extra) if extra else None,
            verification, _dumps(problems) if problems else None)
    events = trace.get("events") or []
    blob, rows = None, []
    if encoded is not None:
        blob = (gid, *encoded)
    elif status in BLOB_STATUSES and events:
        blob = (gid, *encode_events(events, task, task=task_obj, trusted=trusted))
    else:
        rows = [_event_row(gid, ev, ev.get("seq", i)) for i, ev in enumerate(events)]
    return PreparedGame(game, blob, rows, _seat_rows(gid, trace, agents))


def _foreign_tables(path: str) -> list[str] | None:
    """The tables of the SQLite file at ``path`` when it is not a CalBench database, read
    through a read-only connection (nothing is written: no journal mode switched, no table
    made); None when it is ours, new or empty, or not SQLite at all (left to the caller)."""
    from urllib.parse import quote

    try:
        if os.path.getsize(path) == 0:
            return None
    except OSError:
        return None
    uri = "file:" + quote(os.path.abspath(path))
    for opts in ("?mode=ro", "?mode=ro&immutable=1"):  # immutable: a WAL file we may not open shared
        try:
            con = sqlite3.connect(uri + opts, uri=True)
        except sqlite3.Error:
            continue
        try:
            tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                                "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
            cols = [r[1] for r in con.execute("PRAGMA table_info(schema_version)")]
        except sqlite3.OperationalError:
            continue
        except sqlite3.DatabaseError:
            return None  # not SQLite: Store.open says so in its own words
        finally:
            con.close()
        if not tables or cols == ["version", "applied_at"]:
            return None
        return tables
    return None


def _refuse_foreign(path: str) -> None:
    tables = _foreign_tables(path)
    if tables is not None:
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise StoreError(f"{path} is an SQLite database of another program (tables: {shown}), not a CalBench "
                         "save database; it was left as it was. Give --db a CalBench database or a new file")


class Store:
    """The save database.  Open with ``await Store.open(path)`` (``":memory:"`` for tests)."""

    def __init__(self, db: aiosqlite.Connection, path: str) -> None:
        self._db = db
        self.path = path
        self._lock = asyncio.Lock()
        self._sinks: dict[str, list[StoreSink]] = {}

    # -- lifecycle ------------------------------------------------------------------------
    @classmethod
    async def open(cls, path: str | os.PathLike) -> "Store":
        path = os.fspath(path)
        memory = path == ":memory:" or path.startswith("file::memory:")
        if not memory and not path.startswith("file:"):
            parent = Path(path).expanduser().resolve().parent
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the folder {parent} for the save database: "
                                 f"{exc.strerror or exc}") from None
            path = str(Path(path).expanduser())
        if not memory and not path.startswith("file:"):
            _refuse_foreign(path)  # another program's database: refused before anything is written
        try:
            if not memory:
                # Probe synchronously first: when aiosqlite's own connect fails, its worker
                # thread outlives the event loop and prints a traceback at exit.
                sqlite3.connect(path, uri=path.startswith("file:")).close()
            db = await aiosqlite.connect(path, isolation_level=None, uri=path.startswith("file:"))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the save database {path}: {exc}") from None
        store = cls(db, path)
        try:
            await db.execute("PRAGMA busy_timeout = 10000")
            # Two processes creating one database at once can be told "database is locked"
            # at once, without the busy timeout (switching to WAL, or SQLite refusing a lock
            # upgrade that could deadlock): the set-up is idempotent, so try it again.
            for attempt in range(8):
                try:
                    await store._set_up(memory)
                    break
                except sqlite3.OperationalError as exc:
                    if attempt == 7 or "locked" not in str(exc) and "busy" not in str(exc):
                        raise
                    await asyncio.sleep(0.05 * 2 ** attempt)
        except sqlite3.DatabaseError as exc:
            await db.close()
            raise StoreError(f"{path} is not a usable CalBench database: {exc}") from None
        except BaseException:
            await db.close()
            raise
        return store

    async def _set_up(self, memory: bool) -> None:
        """WAL mode, the connection's pragmas and the migrations (each safe to repeat)."""
        db = self._db
        if not memory:
            async with db.execute("PRAGMA journal_mode = WAL") as cur:
                mode = (await cur.fetchone())[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"{self.path}: SQLite refused WAL mode (journal_mode is {mode})")
        await db.execute("PRAGMA synchronous = NORMAL")
        await db.execute("PRAGMA foreign_keys = ON")
        await self._migrate()

    async def close(self) -> None:
        """Flush every open sink, then close the connection (and see its thread end: a
        process may fork next, and a fork should find no other thread running)."""
        try:
            for sinks in list(self._sinks.values()):
                for s in list(sinks):
                    await s.aclose()
        finally:
            await self._db.close()
            thread = getattr(self._db, "_thread", None)  # aiosqlite's worker; it stops right after close
            if thread is not None and thread.is_alive():
                thread.join(timeout=2)

    async def __aenter__(self) -> "Store":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # -- migrations -----------------------------------------------------------------------
    async def schema_version(self) -> int:
        async with self._db.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version") as cur:
            return (await cur.fetchone())[0]

    async def _migrate(self) -> None:
        db = self._db
        await db.execute("CREATE TABLE IF NOT EXISTS schema_version "
                         "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
        current = await self.schema_version()
        if current > SCHEMA_VERSION:
            raise StoreError(f"{self.path} was written by a newer CalBench (schema version {current}; this "
                             f"one knows up to {SCHEMA_VERSION}); upgrade calbench to open it")
        for version, title, statements in MIGRATIONS:
            if version <= current:
                continue
            async with self._tx():
                # Another process may have migrated while we waited for the write lock.
                if await self.schema_version() >= version:
                    continue
                try:
                    for stmt in statements:
                        await db.execute(stmt)
                    if version in BACKFILLS:
                        await BACKFILLS[version](db)
                except sqlite3.Error as exc:
                    raise StoreError(f"{self.path}: migration {version} ({title}) failed: {exc}") from None
                await db.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                                 (version, _now()))

    # -- transactions ---------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _tx(self):
        async with self._lock:
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    await self._db.execute("ROLLBACK")
                raise
            else:
                await self._db.execute("COMMIT")

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

    # -- games ----------------------------------------------------------------------------
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

    async def interrupted_events(self, game_id: str) -> list[dict[str, Any]]:
        """The events of rounds cut short and played again (:meth:`reopen_game`), in seq order."""
        async with self._db.execute("SELECT extra FROM games WHERE game_id = ?", (game_id,)) as cur:
            row = await cur.fetchone()
        extra = _loads(row[0]) if row and row[0] else None
        found = extra.get("interrupted_events") if isinstance(extra, dict) else None
        return [e for e in found if isinstance(e, dict)] if isinstance(found, list) else []

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

    def sink(self, game_id: str, *, durable: bool = True) -> StoreSink:
        s = StoreSink(self, game_id, durable)
        self._sinks.setdefault(game_id, []).append(s)
        return s

    def _forget_sink(self, sink: StoreSink) -> None:
        sinks = self._sinks.get(sink.game_id)
        if sinks and sink in sinks:
            sinks.remove(sink)
            if not sinks:
                del self._sinks[sink.game_id]

    async def _flush_sinks(self, game_id: str) -> None:
        for s in list(self._sinks.get(game_id, ())):
            await s.flush()

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
        missing = [_event_row(game_id, ev, ev.get("seq", i)) for i, ev in enumerate(trace.get("events") or [])
                   if isinstance(ev, dict) and (top is None or ev.get("seq", i) > top)]
        coord, excess = headline(trace)
        extra = {k: v for k, v in trace.items() if k not in _KNOWN_KEYS}
        if "interrupted_events" not in extra:  # e.g. a failure trace: the set-aside events stay
            kept = await self.interrupted_events(game_id)
            if kept:
                extra["interrupted_events"] = kept
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
                "calbench_version = COALESCE(?, calbench_version), cost_mode = ? WHERE game_id = ?",
                (status, trace.get("started_at"), trace.get("ended_at") or _now(), _dumps(trace.get("final_state")),
                 _dumps(trace.get("metrics")), _dumps(trace.get("config") or {}), coord, excess,
                 _dumps(extra) if extra else None, trace.get("calbench_version"),
                 cost_mode or cost_mode_of_row(task), game_id))
            if status in BLOB_STATUSES:
                row = await db.execute_fetchall("SELECT task_row FROM games WHERE game_id = ?", (game_id,))
                await self._pack_events(db, game_id, _loads(row[0][0]) if row else None)

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

    async def delete_game(self, game_id: str) -> bool:
        async with self._tx() as db:
            cur = await db.execute("DELETE FROM games WHERE game_id = ?", (game_id,))
            return cur.rowcount > 0

    # -- import / export ------------------------------------------------------------------
    async def import_trace(self, trace: dict[str, Any], *, verification: str | None = None,
                           problems: list[str] | None = None, encoded: tuple | None = None) -> bool:
        """Save a JSON trace (ours or the authors'); False when its game id is saved already.

        ``verification`` ('verified' / 'unverified', with its ``problems``) is what the
        importer found when it folded the trace (``engine.replay.verify_trace``); None for
        a game this program just played.  Reports leave unverified games out by default.
        ``encoded``: the game's events already packed by :func:`encode_events`, with
        ``trace["events"]`` empty.
        """
        game = prepare_game(trace, encoded=encoded, verification=verification, problems=problems)
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
        async with self._db.execute(
                "SELECT config, final_state, metrics, started_at, ended_at, status, calbench_version, task_row, "
                "extra, agents, settings_key, source, cost_mode, verification FROM games WHERE game_id = ?",
                (gid,)) as cur:
            (config, final_state, metrics, started_at, ended_at, status, version, task_row, extra, agents,
             settings_key, source, cost_mode, verification) = await cur.fetchone()
        for what, v in (("start time", started_at), ("end time", ended_at), ("agents", agents),
                        ("version", version), ("settings key", settings_key)):
            if v is not None and not isinstance(v, str):
                raise _damaged(gid, what, f"is a {type(v).__name__}, not text")
        trace: dict[str, Any] = {
            "game_id": gid,
            "config": _loads(config, gid, "config", dict) or {},
            "events": await self.load_events(gid),
            "final_state": _loads(final_state, gid, "final state", dict),
            "metrics": _loads(metrics, gid, "metrics", dict),
            "started_at": started_at,
            "ended_at": ended_at,
            "stopped": status != "completed",
        }
        if version is not None:
            trace["calbench_version"] = version
        for k, v in (_loads(extra, gid, "extra fields", dict) or {}).items():
            trace.setdefault(k, v)
        if task_row is not None:
            trace["task"] = _loads(task_row, gid, "task row", dict)
        trace["saved"] = {"agents": agents, "settings_key": settings_key, "status": status, "source": source,
                          "cost_mode": cost_mode}
        if verification is not None:
            trace["saved"]["verification"] = verification
        return trace

    # -- claims: a run's lease on the tasks it plays (see saves/lease.py) -----------------
    async def claim_units(self, settings_key: str, units: list[tuple[str, str, str | None]], owner,
                          *, skip_done: bool = True) -> dict[str, str]:
        """Claim suite units ``(unit, task_id, game_id)`` for ``owner`` (a ``saves.lease.Owner``).

        In one write transaction, each unit becomes

        * ``done``  — ``skip_done`` and the task is completed under ``settings_key`` already;
        * ``taken`` — a live process (not ``owner``) holds its claim: respected, not played;
        * ``claimed`` — claimed now (it was free, or ours already);
        * ``stale`` — it was claimed by a process that is gone; taken over now.

        ``unit`` is ``"<task_id>#<occurrence>"``; a task counts as done for occurrence n
        when more than n games of it are completed.
        """
        from .lease import owner_alive

        if not units:
            return {}
        out: dict[str, str] = {}
        now = _now()
        async with self._tx() as db:
            done: dict[str, int] = {}
            if skip_done:
                tids = sorted({t for _, t, _ in units})
                for i in range(0, len(tids), 500):
                    part = tids[i:i + 500]
                    rows = await db.execute_fetchall(
                        f"SELECT task_id, COUNT(*) FROM games WHERE settings_key = ? AND status = 'completed' "
                        f"AND task_id IN ({', '.join('?' * len(part))}) GROUP BY task_id", [settings_key, *part])
                    done.update({r[0]: r[1] for r in rows})
            held: dict[str, tuple] = {}
            names = [u for u, _, _ in units]
            for i in range(0, len(names), 500):
                part = names[i:i + 500]
                rows = await db.execute_fetchall(
                    f"SELECT unit, owner, host, pid, claimed_at FROM claims WHERE settings_key = ? "
                    f"AND unit IN ({', '.join('?' * len(part))})", [settings_key, *part])
                held.update({r[0]: r[1:] for r in rows})
            new_rows = []
            for unit, task_id, game_id in units:
                occurrence = int(unit.rsplit("#", 1)[1]) if "#" in unit and unit.rsplit("#", 1)[1].isdigit() else 0
                if done.get(task_id, 0) > occurrence:
                    out[unit] = "done"
                    continue
                h = held.get(unit)
                if h is not None and h[0] != owner.token:
                    if owner_alive(h[0], h[1], h[2], h[3]):
                        out[unit] = "taken"
                        continue
                    out[unit] = "stale"
                else:
                    out[unit] = "claimed"
                new_rows.append((settings_key, unit, task_id, game_id, owner.token, owner.host, owner.pid,
                                 owner.run_pid, now))
            if new_rows:
                await db.executemany("INSERT OR REPLACE INTO claims (settings_key, unit, task_id, game_id, owner, "
                                     "host, pid, run_pid, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", new_rows)
        return out

    async def release_claims(self, settings_key: str, owner) -> int:
        """Drop ``owner``'s claims under ``settings_key`` (a run that ends cleanly)."""
        async with self._tx() as db:
            cur = await db.execute("DELETE FROM claims WHERE settings_key = ? AND owner = ?",
                                   (settings_key, owner.token))
            return cur.rowcount

    async def drop_claims(self, settings_key: str, owners: Iterable[str]) -> int:
        """Drop the claims of ``owners`` (tokens of processes that are gone) under ``settings_key``."""
        owners = sorted(set(owners))
        if not owners:
            return 0
        async with self._tx() as db:
            cur = await db.execute(f"DELETE FROM claims WHERE settings_key = ? AND owner IN "
                                   f"({', '.join('?' * len(owners))})", [settings_key, *owners])
            return cur.rowcount

    async def claims(self, settings_key: str) -> list[dict[str, Any]]:
        """Every claim under ``settings_key``, each with ``alive`` (is its process still there)."""
        from .lease import owner_alive

        cols = ("unit", "task_id", "game_id", "owner", "host", "pid", "run_pid", "claimed_at")
        async with self._db.execute(f"SELECT {', '.join(cols)} FROM claims WHERE settings_key = ? ORDER BY unit",
                                    (settings_key,)) as cur:
            rows = [dict(zip(cols, r)) for r in await cur.fetchall()]
        for r in rows:
            r["alive"] = owner_alive(r["owner"], r["host"], r["pid"], r["claimed_at"])
        return rows

    # -- leases: one live owner of a game or a participant's session (see lab/lease.py) ---
    _LEASE_COLS = ("unit", "task_id", "game_id", "owner", "host", "pid", "run_pid", "claimed_at")

    @staticmethod
    def _lease_row(r: tuple) -> dict[str, Any]:
        from .lease import LEASE_STALE_SECONDS, owner_alive

        unit, role, game_id, owner, host, pid, run_pid, at = r
        return {"subject": unit, "role": role, "game_id": game_id, "owner": owner, "host": host, "pid": pid,
                "heartbeat": at, "alive": owner_alive(owner, host, pid, at, stale_after=LEASE_STALE_SECONDS)}

    async def take_lease(self, subject: str, owner, *, role: str, game_id: str | None = None
                         ) -> tuple[str, dict[str, Any] | None]:
        """Take the lease on ``subject`` for ``owner`` (a ``saves.lease.Owner``), in one write transaction.

        Answers ``("claimed", None)`` (it was free, or ours), ``("stale", old)`` (its holder is
        gone: taken over) or ``("taken", holder)`` (a live process holds it: nothing written).
        """
        from .lease import LEASE_KEY

        async with self._tx() as db:
            rows = await db.execute_fetchall(f"SELECT {', '.join(self._LEASE_COLS)} FROM claims "
                                             "WHERE settings_key = ? AND unit = ?", (LEASE_KEY, subject))
            held = self._lease_row(rows[0]) if rows else None
            if held is not None and held["owner"] != owner.token and held["alive"]:
                return "taken", held
            await db.execute("INSERT OR REPLACE INTO claims (settings_key, unit, task_id, game_id, owner, host, pid, "
                             "run_pid, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (LEASE_KEY, subject, role, game_id, owner.token, owner.host, owner.pid, owner.run_pid,
                              _now()))
        if held is not None and held["owner"] != owner.token:
            return "stale", held
        return "claimed", None

    async def renew_lease(self, subject: str, owner) -> bool:
        """The holder's heartbeat; False when ``owner`` no longer holds the lease (taken over)."""
        from .lease import LEASE_KEY

        async with self._lock:
            cur = await self._db.execute("UPDATE claims SET claimed_at = ? WHERE settings_key = ? AND unit = ? "
                                         "AND owner = ?", (_now(), LEASE_KEY, subject, owner.token))
            return cur.rowcount == 1

    async def release_lease(self, subject: str, owner) -> bool:
        """Drop ``owner``'s lease on ``subject`` (a clean end); another holder's is left alone."""
        from .lease import LEASE_KEY

        async with self._lock:
            cur = await self._db.execute("DELETE FROM claims WHERE settings_key = ? AND unit = ? AND owner = ?",
                                         (LEASE_KEY, subject, owner.token))
            return cur.rowcount == 1

    async def lease(self, subject: str) -> dict[str, Any] | None:
        """The lease on ``subject`` (``role``, ``pid``, ``host``, ``heartbeat``, ``alive``), or None."""
        from .lease import LEASE_KEY

        async with self._db.execute(f"SELECT {', '.join(self._LEASE_COLS)} FROM claims WHERE settings_key = ? "
                                    "AND unit = ?", (LEASE_KEY, subject)) as cur:
            row = await cur.fetchone()
        return self._lease_row(row) if row else None

    async def leases(self, prefix: str = "") -> list[dict[str, Any]]:
        """Every lease whose subject starts with ``prefix`` (e.g. ``"game:"``), live or stale."""
        from .lease import LEASE_KEY

        esc = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        async with self._db.execute(f"SELECT {', '.join(self._LEASE_COLS)} FROM claims WHERE settings_key = ? "
                                    "AND unit LIKE ? ESCAPE '\\' ORDER BY unit", (LEASE_KEY, esc + "%")) as cur:
            return [self._lease_row(r) for r in await cur.fetchall()]

    # -- queries --------------------------------------------------------------------------
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
                 "excess_cost", "started_at")
        scols = ("agent_id", "persona", "model", *_SEAT_COLUMNS)
        sql = (f"SELECT {', '.join('g.' + c for c in gcols)}, {', '.join('s.' + c for c in scols)}, s.data "
               f"FROM games g JOIN seat_results s ON s.game_id = g.game_id {where} "
               "ORDER BY g.started_at, g.game_id, s.agent_id")
        out = []
        async with self._db.execute(sql, args) as cur:
            for r in await cur.fetchall():
                d = dict(zip(gcols + scols, r[:-1]))
                d["seat"] = _loads(r[-1], d["game_id"], f"seat {d['agent_id']} record", dict)
                for k in ("agents", "task_id", "persona", "model"):
                    if d[k] is not None and not isinstance(d[k], str):
                        raise _damaged(d["game_id"], k, f"is a {type(d[k]).__name__}, not text")
                out.append(d)
        return out

    async def integrity_check(self) -> str:
        async with self._db.execute("PRAGMA integrity_check") as cur:
            return (await cur.fetchone())[0]
