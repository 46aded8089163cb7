"""A trace in, rows out, and back: the import/export side of the save database.

:func:`prepare_game` checks a JSON trace (ours or the paper authors') and turns it into
the ``games`` / ``event_blobs`` / ``events`` / ``seat_results`` rows that saving it writes
(:class:`PreparedGame`; made where the game was played, so the one writer only inserts);
:func:`trace_from_row` is the inverse, the SPEC §12 trace of one ``games`` row and its events."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import orjson

from engine.model import COST_MODES
from engine.trace import cost_mode as trace_cost_mode
from engine.trace import from_authors, headline, seat_results

from .checks import check_trace
from .codec import BLOB_STATUSES, _dumps, _event_row, _loads, _num, _text, encode_events
from .errors import StoreError, _damaged

STATUSES = ("running", "completed", "stopped", "failed")

# Top-level trace keys that have their own column; anything else goes to games.extra.
_KNOWN_KEYS = frozenset({"game_id", "config", "events", "final_state", "metrics", "started_at", "ended_at",
                         "stopped", "calbench_version", "task", "saved"})

_SEAT_COLUMNS = ("meetings_assigned", "meetings_scheduled", "success", "cost", "cost_shown", "oracle_cost",
                 "oracle_cost_shown", "excess", "excess_shown", "signed_excess", "signed_excess_shown",
                 "adjusted_cost", "fairness", "messages_sent", "messages_received", "messages_per_meeting", "vps")

_INSERT_GAME = ("INSERT INTO games (game_id, task_id, task_row, config, agents, settings_key, status, started_at, "
                "ended_at, final_state, metrics, cost_mode, source, calbench_version, coordination, excess_cost, "
                "extra, verification, verification_problems, failures) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "?, ?, ?, ?, ?, ?, ?, ?)")


def failures_json(trace: dict[str, Any], status: str) -> str | None:
    """``games.failures`` of a finished game of ours: its failed seat calls by class (migration
    10); None for another status or another program's trace (their events are not ours to class)."""
    if status != "completed" or "metrics" not in trace:
        return None
    from engine.usage import failure_counts

    f = failure_counts(trace.get("events") or [])
    return _dumps({"infra": f["infra"], "configuration": f["configuration"], "agent": f["agent"]})


def agents_of(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The seats of a trace's config, each a dict (the authors' traces may list plain names)."""
    agents = config.get("agents") if isinstance(config, dict) else None
    return [a if isinstance(a, dict) else {"type": str(a)} for a in agents] if isinstance(agents, list) else []


def _seat_rows(game_id: str, trace: dict[str, Any], agents_spec: str) -> list[tuple]:
    """seat_results rows: from metrics.per_seat (ours), else from final_state (the authors')."""
    config = trace.get("config") if isinstance(trace.get("config"), dict) else {}
    cfg_agents = agents_of(config)
    spec = [s.strip() for s in agents_spec.split(",")] if agents_spec else []
    seats = seat_results(trace)
    rows = []
    for i, s in enumerate(seats):
        a = s.get("agent_id", i)
        if not isinstance(a, int):
            a = i
        if len(spec) == len(seats) and 0 <= a < len(spec):
            persona = spec[a]
        elif len(spec) == 1 and spec[0]:  # one entry: every seat's persona (personas.spec.AgentsSpec)
            persona = spec[0]
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
                 problems: list[str] | None = None, task: Any = None, trusted: bool = False,
                 checked: bool = False) -> PreparedGame:
    """Check ``trace`` and turn it into the rows saving it writes (:class:`PreparedGame`).

    ``encoded``: its events already packed by :func:`encode_events`, with ``trace["events"]``
    empty.  Otherwise a finished game's events are packed here: ``task`` is its task when
    the caller has it (else it is read from the trace's row) and ``trusted`` says the
    events were just made by this engine (``engine.lean.slim_events``).  ``checked``: the
    caller has just run :func:`check_trace` on this very trace, unchanged since (the
    importer checks before it folds), so it is not walked again.  A value the store cannot
    hold is a :class:`StoreError`.
    """
    if not checked:
        check_trace(trace, trusted=trusted and encoded is None)
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
    source = saved.get("source") or ("authors" if from_authors(trace) else "calbench")
    agents = saved.get("agents")
    if not isinstance(agents, str):
        agents = ",".join(str(a.get("type")) for a in agents_of(config))
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
            verification, _dumps(problems) if problems else None, failures_json(trace, status))
    events = trace.get("events") or []
    blob, rows = None, []
    if encoded is not None:
        blob = (gid, *encoded)
    elif status in BLOB_STATUSES and events:
        blob = (gid, *encode_events(events, task, task=task_obj, trusted=trusted))
    else:
        rows = [_event_row(gid, ev, ev.get("seq", i)) for i, ev in enumerate(events)]
    return PreparedGame(game, blob, rows, _seat_rows(gid, trace, agents))


#: the ``games`` columns :func:`trace_from_row` reads, in its order
TRACE_COLUMNS = ("config", "final_state", "metrics", "started_at", "ended_at", "status", "calbench_version",
                 "task_row", "extra", "agents", "settings_key", "source", "cost_mode", "verification")


def check_row_text(gid: str, row: tuple) -> None:
    """The text cells of a ``games`` row (:data:`TRACE_COLUMNS`) are text, or a :class:`DamagedRow`."""
    for what, i in (("start time", 3), ("end time", 4), ("agents", 9), ("version", 6), ("settings key", 10)):
        v = row[i]
        if v is not None and not isinstance(v, str):
            raise _damaged(gid, what, f"is a {type(v).__name__}, not text")


def trace_from_row(gid: str, row: tuple, events: list[dict[str, Any]]) -> dict[str, Any]:
    """The trace (SPEC §12 shape) of one saved game: its ``games`` row (:data:`TRACE_COLUMNS`)
    and its events.  A damaged cell is a :class:`DamagedRow` naming it."""
    check_row_text(gid, row)
    (config, final_state, metrics, started_at, ended_at, status, version, task_row, extra, agents,
     settings_key, source, cost_mode, verification) = row
    trace: dict[str, Any] = {
        "game_id": gid,
        "config": _loads(config, gid, "config", dict) or {},
        "events": events,
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
