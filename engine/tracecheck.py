"""What a trace may hold, said in plain words — the one checker of ``calbench import`` (the
store, ``saves.checks``) and ``calbench trace`` (``engine.verify.verify_trace``), issue 35 (5):
a value that is not JSON, an integer past 64 bits, nesting past :data:`MAX_DEPTH`, NaN or an
infinite number, a trace without its ``game_id`` or ``events``, an event ``seq`` that is not
an integer, a timestamp that is a list, ids past their cap (docs/hardening.md).

Each function takes the exception class to raise (the engine's ``TraceError`` by default,
the store's ``StoreError`` there), so both say the same words."""

from __future__ import annotations

from typing import Any

import orjson

from .inputs import MAX_NESTING, check_id, nesting_depth, non_finite_at

__all__ = ["MAX_DEPTH", "check_trace"]

MAX_DEPTH = MAX_NESTING  # 64: a trace nests a dozen levels; far deeper is not one (docs/hardening.md)
_INT_MIN, _INT_MAX = -(2 ** 63), 2 ** 63 - 1  # what SQLite and the JSON writer hold


def _check_values(obj: Any, error: type[Exception]) -> None:
    """Refuse, in plain words, values the store cannot hold: integers outside 64 bits,
    non-JSON types, non-string keys, deep nesting.

    Fast path: orjson refuses exactly these (~0.3 ms for a game's trace); only when it
    does is the value walked (iteratively) to say where."""
    try:
        orjson.dumps(obj)
        return
    except (TypeError, orjson.JSONEncodeError) as exc:
        _locate_bad_value(obj, error)
        raise error(f"not a trace: it holds a value that cannot be stored ({exc})") from None


def _locate_bad_value(obj: Any, error: type[Exception]) -> None:
    stack: list[tuple[Any, int, str]] = [(obj, 0, "")]
    while stack:
        v, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            raise error(f"not a trace: nested more than {MAX_DEPTH} levels deep (at {where or 'the top'})")
        if isinstance(v, bool) or v is None or isinstance(v, str):
            continue
        if isinstance(v, int):
            if not _INT_MIN <= v <= _INT_MAX:
                raise error(f"not a trace: the number at {where or 'the top'} is too large to store")
        elif isinstance(v, float):
            continue
        elif isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str):
                    raise error(f"not a trace: a key at {where or 'the top'} is not a string")
                if isinstance(x, (dict, list, int)) and not isinstance(x, bool):
                    stack.append((x, depth + 1, f"{where}.{k}" if where else k))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                if isinstance(x, (dict, list, int)) and not isinstance(x, bool):
                    stack.append((x, depth + 1, f"{where}[{i}]"))
        else:
            raise error(f"not a trace: {where or 'the top'} holds a {type(v).__name__}, not a JSON value")


def check_trace(trace: Any, *, trusted: bool = False, error: type[Exception] | None = None) -> None:
    """Refuse, in plain words, what is not a trace.  ``trusted``: the engine just made its
    events, so only the rest is checked here (the events' values are checked as they are
    encoded, ``encode_events``).  Raises ``error`` (default: ``engine.trace.TraceError``)."""
    if error is None:
        from .trace import TraceError as error
    if not isinstance(trace, dict):
        raise error(f"not a trace: expected a JSON object, got {type(trace).__name__}")
    _check_values({k: v for k, v in trace.items() if k != "events"} if trusted else trace, error)
    if not trusted and nesting_depth(trace, MAX_DEPTH) > MAX_DEPTH:  # orjson alone lets 254 levels through
        raise error(f"not a trace: nested more than {MAX_DEPTH} levels deep (the limit)")
    if not trusted:  # orjson writes NaN and Infinity as null: a metric would change on the way in
        bad = non_finite_at(trace)
        if bad is not None:
            raise error(f"not a trace: {bad} is NaN or infinite; a trace holds finite numbers only")
    for key in ("started_at", "ended_at"):
        if trace.get(key) is not None and not isinstance(trace[key], str):
            raise error(f"not a trace: '{key}' must be a date-time string, got {type(trace[key]).__name__}")
    if "stopped" in trace and not isinstance(trace["stopped"], (bool, type(None))):
        raise error("not a trace: 'stopped' must be true or false")
    for key in ("metrics", "final_state", "task", "saved"):
        if trace.get(key) is not None and not isinstance(trace[key], dict):
            raise error(f"not a trace: '{key}' must be an object")
    gid = trace.get("game_id")
    if not isinstance(gid, str) or not gid.strip():
        raise error("not a trace: 'game_id' is missing or not a string")
    if not trusted:  # ids are capped where they come in (issue 24 item 11)
        check_id(gid, "not a trace: its 'game_id'", error=error)
        tid = (trace.get("config") or {}).get("task_id") if isinstance(trace.get("config"), dict) else None
        if tid is not None:
            check_id(str(tid), "not a trace: its config's 'task_id'", error=error)
    events = trace.get("events")
    if not isinstance(events, list):
        raise error("not a trace: 'events' is missing or not a list")
    if "config" in trace and not isinstance(trace["config"], dict):
        raise error("not a trace: 'config' must be an object")
    if trusted:
        return
    _check_events(events, error)


def _check_events(events: list[Any], error: type[Exception]) -> None:
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or not isinstance(ev.get("type"), str) or not isinstance(ev.get("data"), dict):
            raise error(f"not a trace: event {i} needs a 'type' string and a 'data' object")
        ts = ev.get("timestamp")
        if ts is not None and not isinstance(ts, (str, int, float)):
            raise error(f"not a trace: event {i} has a {type(ts).__name__} as its timestamp")
    seqs = [ev.get("seq", i) for i, ev in enumerate(events)]
    bad = [s for s in seqs if not isinstance(s, int) or isinstance(s, bool)]
    if bad:
        raise error(f"not a trace: an event 'seq' must be an integer, got {bad[0]!r}")
    if len(set(seqs)) != len(seqs):
        raise error("not a trace: two events share one 'seq'")
