"""What a game's seats cost and how their calls failed, read from its events.

* :func:`failure_counts` — failed persona calls by whose fault:

  ``infra``          ``seat_timeout`` events: the seat could not answer — an LLM endpoint
                     unreachable, rate limited past its retries, failing with 5xx, or a
                     persona call that timed out.  The event's ``failure`` names the kind
                     (``unreachable``, ``rate_limited``, ``server_error``, ``endpoint_error``).
  ``configuration``  ``context_overflow`` events: the seat's conversation does not fit its
                     model's context window even after trimming — a setting to change
                     (a longer-context model, ``context_window``, ``max_tokens``).
  ``agent``          ``parse_error`` events: the seat answered but the reply was unreadable
                     or invalid (including undeliverable messages and actions in the wrong
                     phase); and ``batch_rejected`` events of a readable batch that broke
                     a rule of SPEC §4 (kind ``rejected_batch_rule_N``; an unreadable
                     DECISION reply is counted once, as its ``parse_error``).

* :func:`call_counts` — what an LLM seat's calls were, each named apart (issue 31):
  ``requests`` (HTTP requests sent: every attempt, format fallbacks, reflections),
  ``retries`` (of those, requests sent again after a timeout, 429, 5xx or connection
  error), ``capped_turns`` (CHEAP_TALK turns passed without a request: the per-round cap),
  ``rejected_batches`` (batches the rules refused; each is asked again while the game's
  decision retries last) and ``lost_decisions`` (DECISION calls whose endpoint failed;
  asked again without using a decision retry).

* :func:`token_usage` — prompt, completion and cached prompt tokens per seat and for the
  game, summed over every call that reports ``usage`` (game calls, reflections and, when
  an LLM judge ran, the judge's calls under ``judge``).  ``cached`` is what the endpoint
  says it served from its prefix cache (OpenAI's ``prompt_tokens_details.cached_tokens``,
  DeepSeek's ``prompt_cache_hit_tokens``, Anthropic-style ``cache_read_input_tokens``).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

__all__ = ["FAILURE_EVENTS", "failure_class", "failure_counts", "usage_tokens", "token_usage", "call_counts",
           "CALL_COUNT_KEYS"]

FAILURE_EVENTS = {"seat_timeout": "infra", "context_overflow": "configuration", "parse_error": "agent"}
#: every event type :func:`failure_class` may name a class for (any other: None)
_MAYBE_FAILURE = frozenset({*FAILURE_EVENTS, "batch_rejected"})


def failure_class(event: Mapping[str, Any]) -> str | None:
    """``infra`` / ``configuration`` / ``agent`` for a failure event, else None."""
    t = event.get("type")
    if t == "batch_rejected":  # rule 0: the reply itself was unusable, already a parse_error
        rule = (event.get("data") or {}).get("rule")
        return "agent" if isinstance(rule, int) and rule > 0 else None
    return FAILURE_EVENTS.get(t)


def failure_counts(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"infra", "configuration", "agent", "kinds": {kind: n}}`` for one game's events."""
    out: dict[str, Any] = {"infra": 0, "configuration": 0, "agent": 0, "kinds": {}}
    for e in events:
        t = e.get("type")
        if t not in _MAYBE_FAILURE:  # most events, passed over without a call
            continue
        cls = failure_class(e)
        if cls is None:
            continue
        out[cls] += 1
        d = e.get("data") or {}
        if t == "batch_rejected":
            kind = f"rejected_batch_rule_{d.get('rule')}"
        else:
            kind = d.get("failure") or (e["type"] if cls != "agent" else d.get("error") or "parse_error")
        out["kinds"][kind] = out["kinds"].get(kind, 0) + 1
    out["kinds"] = dict(sorted(out["kinds"].items()))
    return out


def usage_tokens(usage: Any) -> tuple[int, int, int] | None:
    """``(prompt, completion, cached)`` tokens of one ``usage`` object, or None."""
    if usage is None:  # every call of a scripted seat: before the (slower) Mapping check
        return None
    if not isinstance(usage, Mapping):
        return None
    p = usage.get("prompt_tokens", usage.get("input_tokens"))
    c = usage.get("completion_tokens", usage.get("output_tokens"))
    if not isinstance(p, (int, float)) and not isinstance(c, (int, float)):
        return None
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    if cached is None:
        cached = usage.get("prompt_cache_hit_tokens", usage.get("cache_read_input_tokens"))
    return int(p or 0), int(c or 0), int(cached or 0)


def _blank() -> dict[str, int]:
    return {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0}


def _add(acc: dict[str, int], t: tuple[int, int, int]) -> None:
    acc["calls"] += 1
    acc["prompt_tokens"] += t[0]
    acc["completion_tokens"] += t[1]
    acc["cached_tokens"] += t[2]


def token_usage(events: Iterable[Mapping[str, Any]], judge: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """``{"per_seat": {seat: {calls, prompt_tokens, completion_tokens, cached_tokens}}, "game": the
    seats' sum, "judge": the judge's sum (only when it ran), "total": both}`` — seats that never
    reported usage are left out; ``judge`` is the optional LLM judge's records (each with a
    ``usage``)."""
    per_seat: dict[int, dict[str, int]] = {}
    for e in events:
        if e.get("type") not in ("turn_end", "decide_end", "reflection"):
            continue
        d = e.get("data") or {}
        t = usage_tokens(d.get("usage"))
        seat = d.get("agent_id")
        if t is None or seat is None:
            continue
        _add(per_seat.setdefault(int(seat), _blank()), t)
    game = _blank()
    for acc in per_seat.values():
        for k in game:
            game[k] += acc[k]
    out: dict[str, Any] = {"per_seat": {str(k): v for k, v in sorted(per_seat.items())}, "game": game}
    j = _blank()
    for rec in judge:
        t = usage_tokens(rec.get("usage"))
        if t is not None:
            _add(j, t)
    if j["calls"]:
        out["judge"] = j
    out["total"] = {k: game[k] + j[k] for k in game}
    return out


#: The names :func:`call_counts` keeps apart, in the order screens print them.
CALL_COUNT_KEYS = ("requests", "retries", "capped_turns", "rejected_batches", "lost_decisions")


def call_counts(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"per_seat": {seat: {requests, retries, capped_turns, rejected_batches, lost_decisions}},
    "game": the sums}`` for the game's LLM seats (seats whose calls carry ``extra.counters``).

    ``requests`` and ``retries`` are the seat's own running counters as its last call
    recorded them (so every HTTP request counts, also a format fallback or a reflection),
    plus the reflections it answered after that call; ``capped_turns`` the calls marked
    ``extra.capped``; ``rejected_batches`` its ``batch_rejected`` events; ``lost_decisions``
    its DECISION ``decide_end`` events with status ``failed``.
    """
    last: dict[int, Mapping[str, Any]] = {}
    after: dict[int, int] = {}
    acc: dict[int, dict[str, int]] = {}
    rejected: dict[int, int] = {}
    for e in events:
        t = e.get("type")
        d = e.get("data") or {}
        seat = d.get("agent_id")
        if not isinstance(seat, int):
            continue
        if t in ("turn_end", "decide_end"):
            extra = d.get("extra")
            if not isinstance(extra, Mapping) or not isinstance(extra.get("counters"), Mapping):
                continue
            row = acc.setdefault(seat, dict.fromkeys(CALL_COUNT_KEYS, 0))
            last[seat], after[seat] = extra["counters"], 0
            if extra.get("capped") is not None:
                row["capped_turns"] += 1
            if t == "decide_end" and d.get("phase") == "DECISION" and d.get("status") == "failed":
                row["lost_decisions"] += 1
        elif t == "reflection" and seat in last and (d.get("usage") or d.get("error") == "infra_error"):
            after[seat] += 1
        elif t == "batch_rejected":
            rejected[seat] = rejected.get(seat, 0) + 1
    for seat, row in acc.items():
        c = last[seat]
        row["requests"] = int(c.get("requests") or 0) + after.get(seat, 0)
        row["retries"] = int(c.get("retries") or 0)
        row["rejected_batches"] = rejected.get(seat, 0)
    game = dict.fromkeys(CALL_COUNT_KEYS, 0)
    for row in acc.values():
        for k in game:
            game[k] += row[k]
    return {"per_seat": {str(k): v for k, v in sorted(acc.items())}, "game": game}
