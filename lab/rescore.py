"""Score stored games again with today's scorers (``calbench rescore``; issue 23 step 2).

After an estimator fix (a scorer's version goes up in ``engine/scoring.py``) the games
already saved still carry the metrics the old code computed.  :func:`rescore_games`
loads each finished game, scores its events again (``engine.verify.rescore_trace``: the
batches refolded, every scorer run), and reports per game what changed, old → new, with
the scorer versions it was scored with and today's.  Unless it is a dry run, a game whose
figures or versions changed gets the new ``metrics``, ``final_state``, seat rows and
``scoring`` versions; the old value of every figure that changed is kept in the game's
``rescored`` list (``{"at", "from", "to", "changed": {path: [old, new]}}``), so nothing is
lost.  Events are never rewritten: the ``game_end`` event keeps the metrics as they were
scored when the game ended.

Only completed games of ours (a task row) are scored again.  A game a person is still
playing is never touched (``saves.guard``); nor is a running, stopped or failed game.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from engine.verify import diff_scores  # the one diff and tolerance, shared with verification

__all__ = ["RescoreRefused", "Rescored", "diff_scores", "rescore_db", "rescore_games"]


class RescoreRefused(Exception):
    """A game named on the command line that cannot be scored again (one line)."""


@dataclass
class Rescored:
    game_id: str
    status: str  # changed | unchanged | skipped
    reason: str = ""  # why skipped
    old_versions: dict[str, int] | None = None
    new_versions: dict[str, int] = field(default_factory=dict)
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # path -> (old, new)
    written: bool = False


def _refusal(trace: dict[str, Any]) -> str | None:
    """Why a stored game is not scored again (None: it is)."""
    from saves.guard import game_in_play, skip_line

    status = (trace.get("saved") or {}).get("status")
    if game_in_play(trace):
        return skip_line(trace, "rescore", flag=False).split(": ", 1)[1]
    if status != "completed":
        return f"it is {status}: only completed games are scored"
    if not isinstance(trace.get("task"), dict) or not isinstance(trace.get("metrics"), dict):
        return "it has no task row or no metrics (an imported trace of the paper's authors): nothing to score"
    return None


async def _rescore_one(gid: str, trace: dict[str, Any]) -> tuple[Rescored, dict[str, Any] | None]:
    """The game scored again: what changed, and the trace to write (None when nothing did).

    Its record is checked first (``lab.replaycheck.check_record``: the fold against what the
    trace recorded, the seats, the game played again): a game whose record does not verify
    is not scored again — new figures from an edited record would be filed as the truth."""
    from engine.verify import rescore_trace

    from .replaycheck import check_record

    reason = _refusal(trace)
    if reason is None:
        problems = await check_record(trace)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            reason = f"its record does not verify: {problems[0]}{more}"
    scored = rescore_trace(trace) if reason is None else None
    if isinstance(scored, str):
        reason = scored
    if reason is not None:
        return Rescored(gid, "skipped", reason), None
    old_versions = trace.get("scoring") if isinstance(trace.get("scoring"), dict) else None
    changes: dict[str, tuple[Any, Any]] = {}
    diff_scores("metrics", trace.get("metrics"), scored.metrics, changes)
    fs_old = trace.get("final_state") if isinstance(trace.get("final_state"), dict) else {}
    diff_scores("final_state", {k: fs_old.get(k) for k in scored.final_state if k in fs_old},
                {k: v for k, v in scored.final_state.items() if k in fs_old}, changes)
    if not changes and old_versions == scored.versions:
        return Rescored(gid, "unchanged", old_versions=old_versions, new_versions=dict(scored.versions)), None
    rec = Rescored(gid, "changed", old_versions=old_versions, new_versions=dict(scored.versions), changes=changes)
    return rec, {**trace, "metrics": scored.metrics, "final_state": {**fs_old, **scored.final_state},
                 "scoring": dict(scored.versions)}


async def rescore_games(store: Any, game_ids: list[str] | None = None, *, dry_run: bool = False) -> list[Rescored]:
    """Score the named games (id prefixes; every game when None) again; write unless ``dry_run``.

    A named game that cannot be scored again raises :class:`RescoreRefused` (one line,
    before anything is written); an unknown id raises the store's ``GameNotFound``.  When
    all games are asked for, those that cannot be are reported ``skipped`` with the reason.
    """
    named = game_ids is not None
    if named:
        ids = [await store.resolve_game_id(g) for g in game_ids]
    else:
        ids = [g["game_id"] for g in await store.list_games()]
    out: list[Rescored] = []
    todo: list[tuple[Rescored, dict[str, Any]]] = []
    for gid in dict.fromkeys(ids):
        rec, new = await _rescore_one(gid, await store.load_trace(gid))
        if named and rec.status == "skipped":
            raise RescoreRefused(f"game {gid[:8]} cannot be scored again: {rec.reason}")
        out.append(rec)
        if new is not None:
            todo.append((rec, new))
    if dry_run:
        return out
    at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    for rec, new in todo:
        history = [h for h in new.get("rescored") or [] if isinstance(h, dict)]
        history.append({"at": at, "from": rec.old_versions, "to": rec.new_versions,
                        "changed": {p: [a, b] for p, (a, b) in rec.changes.items()}})
        new["rescored"] = history
        new.pop("saved", None)
        await store.finish_game(rec.game_id, new, status="completed")
        rec.written = True
    return out


def rescore_db(db: str, game_ids: list[str] | None = None, *, dry_run: bool = False) -> list[Rescored]:
    """:func:`rescore_games` over the save database at ``db`` (opened and closed here).

    An empty id among ``game_ids`` raises :class:`RescoreRefused` before the database is
    opened; the store's one-line errors (an unknown id, ...) are its ``StoreError``.
    """
    if game_ids is not None and any(not g.strip() for g in game_ids):
        raise RescoreRefused("--games: an empty game id")
    from lab.archive import with_store

    return with_store(db, lambda store: rescore_games(store, game_ids, dry_run=dry_run))
