"""How values are written into and read out of the save database's columns: JSON texts
(every one through ``engine.redact.redact``), event rows, and the lean, compressed event
blob of a finished game (:func:`encode_events` / :func:`decode_events`, migration 5)."""

from __future__ import annotations

import functools
import threading
from datetime import datetime, timezone
from typing import Any

import orjson

from engine.redact import redact, redact_utf8

from .errors import StoreError, _damaged

# -- JSON and text columns --------------------------------------------------------------------

def _dumps(obj: Any) -> str:
    # orjson: ~7x faster than json for event rows, the store's hot path in bulk suites.
    # Every JSON text the store writes passes through engine.redact: the last line of
    # defence against a key that reached a failure detail or a message.
    return redact(orjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS).decode())


def _text(v: Any) -> Any:
    """A plain text column (agents, settings key, persona, model): redacted like JSON texts."""
    return redact(v) if isinstance(v, str) else v


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


# -- event rows (running and stopped games) ----------------------------------------------------

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
#: Largest decompressed event blob read back (a long LLM game's lean events are a few MB).
_MAX_EVENTS_BYTES = 1 << 30
_local = threading.local()  # one zstd compressor per thread (zstandard's compressors are not thread-safe)


def _compress(payload: bytes) -> bytes:
    """``payload`` compressed at :data:`_ZSTD_LEVEL`.  A compressor is made once per thread:
    making one (its tables allocated and cleared) costs about a third of compressing a scripted
    game's events (measured: 0.25 M instructions against 0.71 M)."""
    c = getattr(_local, "zstd", None)
    if c is None:
        import zstandard

        c = _local.zstd = zstandard.ZstdCompressor(level=_ZSTD_LEVEL)
    return c.compress(payload)


_INSERT_BLOB = "INSERT OR REPLACE INTO event_blobs (game_id, codec, events, last_seq, data) VALUES (?, ?, ?, ?, ?)"


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
    slim = None
    task = task if task is not None else _task_of(task_row)
    if task is not None:
        from engine.lean import slim_events

        try:
            slim = slim_events(task, events, trusted=trusted)
        except Exception:  # never lose a game over an odd trace: store it whole
            slim = None
    if slim is None:
        if task is not None:  # renders a game left unwritten are written out for the whole form
            from engine.lean import fill_unwritten

            events = fill_unwritten(task, events)
        codec = "json-zstd"
        rows = [[ev.get("seq", i), str(ev.get("type")), ev.get("timestamp"), d if isinstance(d, dict) else {}]
                for i, (ev, d) in enumerate((ev, ev.get("data")) for ev in events)]
    else:
        codec = "lean-zstd"
        rows = [[ev.get("seq", i), str(ev.get("type")), ev.get("timestamp"), d if isinstance(d, dict) else {}, k]
                for i, (ev, (d, k)) in enumerate(zip(events, slim))]
    # trusted events were not checked value by value (``_check_trace``): a value JSON cannot
    # hold raises here rather than being stored as its text
    if trusted:
        try:  # string keys only (every event this engine makes): orjson without its key option, ~25 % less work
            payload = orjson.dumps(rows)
        except orjson.JSONEncodeError:
            payload = orjson.dumps(rows, option=orjson.OPT_NON_STR_KEYS)
    else:
        payload = orjson.dumps(rows, default=str, option=orjson.OPT_NON_STR_KEYS)
    payload = redact_utf8(payload)  # like every JSON text the store writes
    last = max((r[0] for r in rows if isinstance(r[0], int)), default=None)
    return codec, len(rows), last, _compress(payload)


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
