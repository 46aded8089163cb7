"""How LLM seats' calls went, grouped by the LLM settings (``calbench report``, issue 22 item 9).

One row per *LLM setting*: model, endpoint (without credentials), structured mode and
``max_tokens`` as the game's ``config.llm`` saved them for the seat — not per agents string,
so two tables that seat the same model the same way share a row, and one model behind two
endpoints or with two reply budgets gets two.  Per row:

* ``games``, ``seats`` (LLM seats of that setting), ``calls`` (game calls that went to the
  model: CHEAP_TALK turns, VOLUNTARY and DECISION answers; reflections are not game calls),
  and, named apart (``engine.usage.call_counts``, issue 31): ``requests`` (HTTP requests,
  every attempt), ``retries`` (requests sent again after a failure), ``capped_turns``
  (CHEAP_TALK turns passed without a request), ``rejected_batches`` (batches the rules
  refused) and ``lost_decisions`` (DECISION calls the endpoint lost, asked again without
  using a decision retry);
* ``latency_median_ms`` / ``latency_p95_ms``: per call, the whole call as the seat lived it
  (``extra.wall_ms``: queueing, every attempt and the waits between them), else the last
  request's ``latency_ms``; p95 is the nearest-rank percentile;
* ``failures``: counts by *kind* — ``timeout``, ``unreachable`` (connection), ``rate_limited``,
  ``server_error``, ``endpoint_error``, ``unreadable`` (a reply that could not be read),
  ``context_overflow``, ``length`` (a reply cut off by its token budget, read or not),
  and ``rejected:RULE`` for every DECISION/VOLUNTARY batch the rules refused (RULE is the
  rule's number; ``rejected:0`` is a reply that could not be used at all).

Everything comes from the saved events, so games played before this existed report what
they recorded (no ``wall_ms``: the request latency).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from engine.usage import CALL_COUNT_KEYS, call_counts

__all__ = ["llm_call_rows", "call_failure_kind", "percentile"]

_CALL_ENDS = ("turn_end", "decide_end")
_KIND_NAMES = {"timeout": "timeout", "connection": "unreachable", "rate_limit": "rate_limited",
               "server_error": "server_error", "http_error": "endpoint_error", "bad_response": "endpoint_error",
               "config_error": "endpoint_error", "parse_error": "unreadable", "context_overflow": "context_overflow",
               "context_length": "context_overflow"}


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of ``values``; None for none."""
    if not values:
        return None
    xs = sorted(values)
    k = max(1, math.ceil(q / 100 * len(xs)))
    return xs[min(k, len(xs)) - 1]


def call_failure_kind(extra: Mapping[str, Any]) -> str | None:
    """The kind of a failed call from its ``extra`` (None for a call that did not fail)."""
    failure = extra.get("failure")
    if not failure:
        return None
    return _KIND_NAMES.get(str(failure), str(failure))


def _setting_key(entry: Mapping[str, Any]) -> tuple:
    return (entry.get("model"), entry.get("base_url"), entry.get("structured", "auto"), entry.get("max_tokens"))


def llm_call_rows(traces: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows per LLM setting over the games' events (see the module docstring)."""
    acc: dict[tuple, dict[str, Any]] = {}
    for tr in traces:
        cfg = tr.get("config") or {}
        llm = cfg.get("llm") if isinstance(cfg.get("llm"), list) else []
        seats = {i: e for i, e in enumerate(llm) if isinstance(e, Mapping) and e.get("model")}
        if not seats:
            continue
        gid = tr.get("game_id")
        for seat, entry in seats.items():
            key = _setting_key(entry)
            row = acc.setdefault(key, {"model": key[0], "endpoint": key[1], "structured": key[2],
                                       "max_tokens": key[3], "games": set(), "seats": 0, "calls": 0,
                                       **dict.fromkeys(CALL_COUNT_KEYS, 0), "_lat": [], "failures": {}})
            row["games"].add(gid)
            row["seats"] += 1
        counted = call_counts(tr.get("events") or [])["per_seat"]
        for seat, entry in seats.items():
            row = acc[_setting_key(entry)]
            for k, n in (counted.get(str(seat)) or {}).items():
                row[k] += n
        for ev in tr.get("events") or []:
            if not isinstance(ev, Mapping):
                continue
            d = ev.get("data") or {}
            seat = d.get("agent_id", ev.get("agent_id"))
            if not isinstance(seat, int) or seat not in seats:
                continue
            row = acc[_setting_key(seats[seat])]
            t = ev.get("type")
            fails = row["failures"]
            if t in _CALL_ENDS:
                extra = d.get("extra") if isinstance(d.get("extra"), Mapping) else {}
                if extra.get("capped") is not None:
                    continue  # a turn passed without a request: capped_turns
                row["calls"] += 1
                lat = extra.get("wall_ms", d.get("latency_ms"))
                if isinstance(lat, (int, float)) and not isinstance(lat, bool) and math.isfinite(lat):
                    row["_lat"].append(float(lat))
                kind = call_failure_kind(extra)
                if kind:
                    fails[kind] = fails.get(kind, 0) + 1
                if extra.get("finish_reason") == "length":
                    fails["length"] = fails.get("length", 0) + 1
            elif t == "batch_rejected":
                k = f"rejected:{d.get('rule', '?')}"
                fails[k] = fails.get(k, 0) + 1
    out = []
    for key in sorted(acc, key=lambda k: tuple("" if x is None else str(x) for x in k)):
        row = acc[key]
        lat = row.pop("_lat")
        row["games"] = len(row["games"])
        row["latency_median_ms"] = percentile(lat, 50)
        row["latency_p95_ms"] = percentile(lat, 95)
        row["failures"] = dict(sorted(row["failures"].items()))
        out.append(row)
    return out
