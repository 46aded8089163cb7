"""``calbench rescore``: score stored games again with today's scorers (``lab/rescore.py``)."""

from __future__ import annotations

from typing import Any

from ..lab_errors import one_line
from . import add_db_option, existing_db

MAX_LINES_PER_GAME = 12


def register(sub) -> None:
    p = sub.add_parser(
        "rescore", help="score stored games again with today's scorers (after an estimator fix)",
        description="Score finished games again from their stored events with today's scorers (outcome, vps, "
                    "leaks, reflection, judge; engine/scoring.py) and print, per game, every figure that changed "
                    "(old -> new) and the scorer versions it was scored with. Changed games get the new metrics; "
                    "the old value of each changed figure is kept in the game's 'rescored' history "
                    "(docs/metrics.md). Events are never rewritten. A game a person is still playing, and any "
                    "game that is not completed, is never touched.")
    add_db_option(p)
    p.add_argument("--games", nargs="+", metavar="ID", default=None,
                   help="only these games (id or unique prefix; default: every completed game)")
    p.add_argument("--dry-run", action="store_true", help="print what would change; write nothing")
    p.set_defaults(handler=handle_rescore)


def _v(versions: dict[str, int] | None) -> str:
    if not versions:
        return "not recorded"
    return ", ".join(f"{k} {v}" for k, v in versions.items())


def _val(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.6g}"
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def handle_rescore(args) -> int:
    from lab.rescore import RescoreRefused, rescore_db

    with one_line(RescoreRefused):
        results = rescore_db(existing_db(args.db), args.games, dry_run=args.dry_run)
    counts = {"changed": 0, "unchanged": 0, "skipped": 0}
    for r in results:
        counts[r.status] += 1
        _print_result(r, args.dry_run)
    tail = " (dry run: nothing written)" if args.dry_run else ""
    print(f"{len(results)} game(s): {counts['changed']} changed, {counts['unchanged']} unchanged, "
          f"{counts['skipped']} skipped{tail}")
    return 0


def _print_result(r, dry_run: bool) -> None:
    gid = r.game_id[:8]
    if r.status == "skipped":
        print(f"{gid}  skipped: {r.reason}")
        return
    versions = (f"scorers {_v(r.old_versions)}" if r.old_versions == r.new_versions
                else f"scorers {_v(r.old_versions)} -> {_v(r.new_versions)}")
    if r.status == "unchanged":
        print(f"{gid}  unchanged ({versions})")
        return
    verb = "would change" if dry_run else "rescored"
    what = f"{len(r.changes)} figure(s)" if r.changes else "no figure changed, versions recorded"
    print(f"{gid}  {verb}: {what} ({versions})")
    for i, (p, (old, new)) in enumerate(r.changes.items()):
        if i == MAX_LINES_PER_GAME:
            print(f"    ... and {len(r.changes) - i} more")
            break
        print(f"    {p}: {_val(old)} -> {_val(new)}")
