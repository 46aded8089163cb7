"""``calbench games | export | import | trace``: the save database and JSON traces.

* ``games``  lists saved games (``--json`` for scripts);
* ``export`` writes one game's trace (with its task row) to a JSON file;
* ``import`` loads trace files — ours and the paper authors' — skipping duplicates;
* ``trace``  replays a trace file or saved game by folding its batches over the initial
  calendars and says whether it verifies (exit 1 when it does not).

Each handler parses its arguments, makes one call to :mod:`lab.archive` (where the work
is) and prints the result.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from personas.spec import compact_label as compact_agents

from calbench_tui.safe_text import SHOW_ID_CHARS, markup, plain

from ..lab_errors import one_line
from . import UserError, add_db_option, db_path, existing_db, reading_db


def register(sub) -> None:
    p = sub.add_parser("games", help="list saved games",
                       description="List the games in the save database, oldest first.")
    add_db_option(p)
    p.add_argument("--status", choices=("running", "completed", "stopped", "failed"), help="only games with this status")
    p.add_argument("--task", metavar="TASK_ID", help="only games of this task")
    p.add_argument("--json", action="store_true", help='print {"games": [...]} as JSON')
    p.set_defaults(handler=handle_games)

    p = sub.add_parser("export", help="write saved games' traces to JSON files",
                       description="Write one saved game as a JSON trace (the authors' shape plus our keys, "
                                   "including the full task row; one numbering differs: a round's decision and "
                                   "resolution events carry the last sweep's index as their turn, theirs the "
                                   "number of sweeps, see docs/rules.md). A unique prefix of the game id is enough. "
                                   "With --all, every saved game (or those with --status) goes to a directory, "
                                   "one calbench-<id>.json per game.",
                       epilog="Examples: 'calbench export 3f2a -o game.json'; 'calbench export --all -o traces/'")
    p.add_argument("game", metavar="GAME", nargs="?", help="game id or a unique prefix of it")
    p.add_argument("--all", action="store_true", help="export every saved game into the directory given by -o")
    p.add_argument("--status", choices=("running", "completed", "stopped", "failed"),
                   help="with --all: only games with this status")
    p.add_argument("-o", "--output", metavar="FILE.json|DIR", required=True,
                   help="where to write ('-' for stdout); a directory with --all or --inspect")
    p.add_argument("--inspect", action="store_true",
                   help="write an Inspect AI .eval log (one sample per game, scored like 'calbench games') into "
                        "the directory given by -o; needs pip install 'calbench[inspect]'")
    add_db_option(p)
    add_reveal_option(p)
    p.set_defaults(handler=handle_export)

    p = sub.add_parser("import", help="load JSON traces (ours or the paper authors') or other save databases",
                       description="Load game traces into the save database, or merge whole save databases "
                                   "(e.g. the shards of a suite run with --shard, or the hosts of a study served "
                                   "on several machines). Games already saved are skipped; a file that cannot be "
                                   "read is reported and the others still load. A merged database's study rows "
                                   "come too (participants, steps, answers, belief grids, timings, drafts: one "
                                   "transaction per database), so 'study export', 'study status' and 'report "
                                   "--study' see every host's participants; a participant already saved with the "
                                   "same rows is skipped. A database is refused whole (exit 2, nothing of it "
                                   "written) when its study was run from another study file, or when one of its "
                                   "participants is already saved with other rows. Simulated participants (a "
                                   "dry run) and their games stay behind, and so does the links' key "
                                   "(DB.links-key): the merged database cannot make any host's links.",
                       epilog="Example: 'calbench import study-A.db study-B.db --db all.db'")
    p.add_argument("files", metavar="FILE.json|FILE.db", nargs="+", help="trace files or save databases")
    add_db_option(p)
    p.add_argument("--keep-unverified", action="store_true",
                   help="store traces that do not verify (a changed move, a bad state hash, edited metrics, "
                        "missing events) marked 'unverified' instead of refusing them; reports leave them out "
                        "unless given --include-unverified")
    add_reveal_option(p, "import")
    p.set_defaults(handler=handle_import)

    p = sub.add_parser("trace", help="replay a trace and verify it (no persona is called)",
                       description="Fold a trace's applied batches over the initial calendars and check each "
                                   "round against what the trace recorded. FILE is read if it exists; "
                                   "otherwise GAME is looked up in the database. The recorded metrics are "
                                   "recomputed from the folded trace and compared too. Exit status 1 when the "
                                   "trace does not verify.")
    p.add_argument("source", metavar="FILE.json|GAME", help="a trace file, or a saved game id (prefix)")
    add_db_option(p)
    p.add_argument("--at", metavar="SEQ", type=int, default=None,
                   help="fold only up to event SEQ (inclusive) and show the calendars there")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_reveal_option(p)
    p.set_defaults(handler=handle_trace)


# -- helpers ---------------------------------------------------------------------------------

def _db_holding(arg: str | None, game: str) -> str:
    """The database to look ``game`` up in; a missing database is 'no such game', never created."""
    try:
        return existing_db(arg)
    except UserError as exc:
        if str(exc).startswith("no save database"):
            raise UserError(f"no saved game matches {game.strip()!r} ({exc})") from None
        raise


def add_reveal_option(parser, verb: str = "show") -> None:
    parser.add_argument("--reveal-all-seats", action="store_true",
                        help=f"also {verb} a game a human is still playing (running or stopped): this reveals "
                             "every seat's calendar, costs and private labels mid-game")


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "—"
    if pct:
        return f"{v * 100:.0f}%"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


# -- games -----------------------------------------------------------------------------------

GAME_KEYS = ("game_id", "task_id", "agents", "status", "started_at", "ended_at", "coordination", "excess_cost",
             "cost_mode", "source", "verification")


def handle_games(args) -> int:
    from lab.archive import list_games, no_games_words

    with one_line():
        db = reading_db(args.db)
        games = list_games(db, status=args.status, task=args.task) if db else []
    if args.json:
        print(json.dumps({"games": [{**{k: g.get(k) for k in GAME_KEYS},
                                     **({"stored_status": g["stored_status"]} if "stored_status" in g else {})}
                                    for g in games]}, indent=2))
    elif not games:
        print(no_games_words(db, status=args.status, task=args.task))
    else:
        _print_games(games)
    return 0


def _print_games(games: list[dict[str, Any]]) -> None:
    from rich import box
    from rich.console import Console

    from calbench_tui.safe_text import safe_table

    table = safe_table(title=f"Saved games ({len(games)})", title_justify="left", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False, collapse_padding=True)
    fixed = {"no_wrap": True}
    for col, kw in (("game", fixed), ("task", {"overflow": "fold", "min_width": 14}),
                    ("agents", {"overflow": "fold", "min_width": 10}), ("status", fixed), ("started", fixed),
                    ("coord.", {"justify": "right", **fixed}), ("excess", {"justify": "right", **fixed})):
        table.add_column(col, **kw)
    for g in games:
        agents = compact_agents(g["agents"]) + (" (authors)" if g["source"] == "authors" else "")
        status = g["status"] + (" (unverified)" if g.get("verification") == "unverified" else "")
        table.add_row(plain(g["game_id"])[:8], plain(g["task_id"] or "—", SHOW_ID_CHARS), plain(agents, 80), status,
                      (g["started_at"] or "—")[5:16].replace("T", " "), _fmt(g["coordination"], pct=True),
                      _fmt(g["excess_cost"]))
    Console().print(table)


# -- export ----------------------------------------------------------------------------------

def handle_export(args) -> int:
    from lab.archive import ArchiveError, export_game

    if args.inspect:
        return _export_inspect(args)
    if args.all:
        return _export_all(args)
    if not args.game:
        raise UserError("name a game to export (an id or a unique prefix), or use --all -o DIR")
    if args.status:
        raise UserError("--status goes with --all")
    to_stdout = args.output == "-"
    with one_line(ArchiveError):
        done = export_game(_db_holding(args.db, args.game), args.game, output=None if to_stdout else args.output,
                           reveal=args.reveal_all_seats)
    if to_stdout:
        sys.stdout.write(done.text + "\n")
    else:
        print(f"wrote game {plain(done.game_id, SHOW_ID_CHARS)} ({done.events} events) to {plain(args.output)}",
              file=sys.stderr)
    return 0


def _export_all(args) -> int:
    """Every saved game (or those with --status) as one JSON file each, with progress on stderr."""
    from lab.archive import ArchiveError, export_all

    if args.game:
        raise UserError("--all exports every game: name no game with it")
    if args.output == "-":
        raise UserError("--all writes one file per game: give a directory with -o")

    def progress(i: int, total: int) -> None:
        if sys.stderr.isatty() or i == total:
            print(f"\rexported {i}/{total}", end="" if i < total else "\n", file=sys.stderr)

    def skipped(line: str) -> None:
        print(("\n" if sys.stderr.isatty() else "") + line, file=sys.stderr)

    with one_line(ArchiveError):
        db = reading_db(args.db)
        if db is None:
            print("no saved games to export", file=sys.stderr)
            return 0
        done = export_all(db, args.output, status=args.status, reveal=args.reveal_all_seats,
                          progress=progress, skipped=skipped)
    left = f" ({done.skipped} in play left out)" if done.skipped else ""
    print((f"wrote {done.written} game(s) to {args.output}" if done.written else "no saved games to export") + left,
          file=sys.stderr)
    return 0


def _export_inspect(args) -> int:
    """One game, or every saved game with --all, as an Inspect AI .eval log in the directory -o."""
    from lab.archive import ArchiveError, export_inspect

    if bool(args.game) == bool(args.all):
        raise UserError("--inspect exports one game (name it) or every game (--all)")
    if args.status and not args.all:
        raise UserError("--status goes with --all")
    if args.output == "-":
        raise UserError("--inspect writes a .eval log: give a directory with -o")

    def skipped(line: str) -> None:
        print(line, file=sys.stderr)

    with one_line(ArchiveError):
        db = _db_holding(args.db, args.game) if args.game else reading_db(args.db)
        if db is None:
            print("no saved games to export", file=sys.stderr)
            return 0
        done = export_inspect(db, args.output, game=args.game, status=args.status, reveal=args.reveal_all_seats,
                              skipped=skipped)
    left = f" ({done.skipped} left out)" if done.skipped else ""
    print((f"wrote {done.written} game(s) to {plain(done.path)}" if done.written else "no games to export") + left,
          file=sys.stderr)
    return 0


# -- import ----------------------------------------------------------------------------------

def handle_import(args) -> int:
    from lab.archive import OUTCOMES, import_files

    with one_line():
        lines = import_files(db_path(args.db), args.files, keep_unverified=args.keep_unverified,
                             reveal=args.reveal_all_seats)
    counts = dict.fromkeys(OUTCOMES, 0)
    for line in lines:
        counts[line.outcome] += 1
        _print_import_line(line)
    unverified = f", {counts['unverified']} imported unverified" if counts["unverified"] else ""
    in_play = f", {counts['in play']} in play left out" if counts["in play"] else ""
    refused = f", {counts['refused']} database(s) refused" if counts["refused"] else ""
    print(f"{counts['imported']} imported{unverified}, {counts['duplicate']} already saved{in_play}, "
          f"{counts['failed']} failed{refused}", file=sys.stderr)
    if counts["refused"]:
        return 2
    return 1 if counts["failed"] or counts["unverified"] else 0


def _print_import_line(line) -> None:
    # a game id is elided; a sentence (a failure, a game left out) is only made printable
    outcome = line.outcome
    path, detail = plain(line.where), plain(line.detail, SHOW_ID_CHARS if outcome in ("imported", "unverified",
                                                                                     "duplicate") else None)
    if outcome == "imported":
        print(f"imported {path} (game {detail})")
    elif outcome == "unverified":
        print(f"imported {path} marked unverified (game {detail}); reports leave it out "
              "unless given --include-unverified")
    elif outcome == "duplicate":
        print(f"skipped {path}: game {detail} is already saved", file=sys.stderr)
    elif outcome == "in play":
        print(f"{path}: {detail}", file=sys.stderr)
    elif outcome == "study":
        print(f"merged {path}: {detail}")
    elif outcome == "refused":
        print(f"calbench: error: {detail}", file=sys.stderr)
    else:
        print(f"calbench: error: could not import {detail}", file=sys.stderr)


# -- trace -----------------------------------------------------------------------------------

def handle_trace(args) -> int:
    from lab.archive import ArchiveError, load_trace, trace_json, verify

    with one_line(ArchiveError):
        trace = load_trace(args.source, lambda: _db_holding(args.db, args.source), reveal=args.reveal_all_seats)
        res, cals = verify(trace, args.source, args.at)
    if args.json:
        print(json.dumps(trace_json(res, cals, args.at), indent=2))
        return 0 if res.verified else 1
    _print_trace(res, cals, args.at)
    return 0 if res.verified else 1


def _cell(item) -> str:
    from engine.model import MeetingCopy

    if item is None:
        return "·"
    if isinstance(item, MeetingCopy):
        return f"M{item.meeting_id}"
    return f"{'B' if item.blocked else 'e'}{item.errand_id}"


def _print_trace(res, cals, at: int | None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    who = "the paper authors' harness" if res.source == "authors" else "CalBench"
    upto = f", up to event {at}" if at is not None else ""
    console.print(f"Game [bold]{markup(res.game_id, SHOW_ID_CHARS)}[/] (a trace from {markup(who)}{upto})")
    table = Table(show_edge=False)
    for col in ("round", "meeting", "outcome", "state hash", "matches the record"):
        table.add_column(col)
    for r in res.rounds:
        outcome = {True: "coordinated", False: "not coordinated"}.get(r["coordinated"], "—")
        match = {True: "[green]yes[/]", False: "[red]NO[/]", None: "not recorded"}[r["matches"]]
        rn = r["round"] + 1 if isinstance(r["round"], int) else r["round"]  # from 1, as the game and replay say
        table.add_row(str(rn), f"M{r['meeting_id']}", outcome, r["state_hash"], match)
    if res.rounds:
        console.print(table)
    else:
        console.print("No round was resolved in the folded events.")
    label = f"Calendars at event {at}" if at is not None else "Final calendars"
    console.print(f"\n{label} (· free, eN errand, BN blocked errand, MN meeting):")
    for a, cal in enumerate(cals):
        console.print(f"  a{a}: " + " ".join(f"{_cell(it):>3}" for it in cal), highlight=False, soft_wrap=True)
    console.print(f"  cost of the applied batches per agent: {res.costs}", highlight=False)
    if res.splits and res.splits.get("recorded") is not None:
        sp = res.splits
        kind = f" ({sp['kind']})" if sp.get("kind") else ""
        console.print(f"  oracle's per-agent split: recorded {sp['recorded']}{kind}; ours {sp['ours']}"
                      + ("; per-agent metrics use the recorded one" if res.source == "authors" else ""),
                      highlight=False, soft_wrap=True)
    if res.verified:
        checked = "" if at is not None else ", and the recorded metrics match the ones recomputed from it"
        console.print(f"\n[green]Verified[/]: every folded round matches what the trace recorded{checked}.")
        return
    console.print(f"\n[red]Not verified[/]: {len(res.problems)} problem(s):")
    for p in res.problems:
        console.print(f"  - {plain(p)}", highlight=False, markup=False, soft_wrap=True)
