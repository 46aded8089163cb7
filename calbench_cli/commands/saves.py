"""``calbench games | export | import | trace``: the save database and JSON traces.

* ``games``  lists saved games (``--json`` for scripts);
* ``export`` writes one game's trace (with its task row) to a JSON file;
* ``import`` loads trace files — ours and the paper authors' — skipping duplicates;
* ``trace``  replays a trace file or saved game by folding its batches over the initial
  calendars and says whether it verifies (exit 1 when it does not).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from personas.spec import compact_label as compact_agents

from calbench_tui.safe_text import SHOW_ID_CHARS, markup, plain

from . import UserError, add_db_option, db_path, existing_db, with_store


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
                                   "including the full task row). A unique prefix of the game id is enough. "
                                   "With --all, every saved game (or those with --status) goes to a directory, "
                                   "one calbench-<id>.json per game.",
                       epilog="Examples: 'calbench export 3f2a -o game.json'; 'calbench export --all -o traces/'")
    p.add_argument("game", metavar="GAME", nargs="?", help="game id or a unique prefix of it")
    p.add_argument("--all", action="store_true", help="export every saved game into the directory given by -o")
    p.add_argument("--status", choices=("running", "completed", "stopped", "failed"),
                   help="with --all: only games with this status")
    p.add_argument("-o", "--output", metavar="FILE.json|DIR", required=True,
                   help="where to write ('-' for stdout); a directory with --all")
    add_db_option(p)
    add_reveal_option(p)
    p.set_defaults(handler=handle_export)

    p = sub.add_parser("import", help="load JSON traces (ours or the paper authors') or other save databases",
                       description="Load game traces into the save database, or merge whole save databases "
                                   "(e.g. the shards of a suite run with --shard). Games already saved are "
                                   "skipped; a file that cannot be read is reported and the others still load.")
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


def refuse_peeking(trace: dict[str, Any], args, what: str) -> None:
    """One line, exit 2, for a saved game a human is still playing (unless --reveal-all-seats)."""
    from saves.guard import PeekRefused, refuse

    try:
        refuse(trace, reveal=getattr(args, "reveal_all_seats", False), what=what)
    except PeekRefused as exc:
        raise UserError(str(exc)) from None


def read_trace_file(path: str) -> dict[str, Any]:
    """A trace from a JSON file, or a UserError naming the file and what is wrong."""
    from engine.inputs import MAX_DATA_BYTES, loads_json, read_bytes

    try:
        data = read_bytes(path, "trace file", limit=MAX_DATA_BYTES, error=UserError)
    except OSError as exc:
        raise UserError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not a text file (a JSON trace is UTF-8 text; byte {exc.start} is "
                        f"{data[exc.start:exc.start + 1]!r})") from None
    try:
        trace = loads_json(text, path, error=UserError)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise UserError(f"{path}: not a game trace (the JSON is nested far too deep)") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python reads
        raise UserError(f"{path}: not a game trace ({str(exc).splitlines()[0]})") from None
    if not isinstance(trace, dict) or not isinstance(trace.get("events"), list) or "game_id" not in trace:
        raise UserError(f"{path}: not a game trace (expected an object with 'game_id' and 'events')")
    return trace


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "—"
    if pct:
        return f"{v * 100:.0f}%"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


# -- games -----------------------------------------------------------------------------------

def handle_games(args) -> int:
    async def go(store):
        games = await store.list_games(status=args.status, task_id=args.task)
        if any(g["status"] == "running" for g in games):
            # a game 'running' with no live owner (its process was killed) is abandoned
            live = {row["subject"] for row in await store.leases("game:") if row["alive"]}
            for g in games:
                if g["status"] == "running" and f"game:{g['game_id']}" not in live:
                    g["stored_status"], g["status"] = "running", "abandoned"
        return games

    path = db_path(args.db)
    exists = path == ":memory:" or path.startswith("file:") or os.path.exists(os.path.expanduser(path))
    games = with_store(path, go) if exists else []  # listing never creates a database
    if args.json:
        keys = ("game_id", "task_id", "agents", "status", "started_at", "ended_at", "coordination", "excess_cost",
                "cost_mode", "source", "verification")
        print(json.dumps({"games": [{**{k: g.get(k) for k in keys},
                                     **({"stored_status": g["stored_status"]} if "stored_status" in g else {})}
                                    for g in games]}, indent=2))
        return 0
    if not games:
        print("No saved games. Play one with 'calbench-play', run a suite with 'calbench run', "
              "or load traces with 'calbench import'.")
        return 0
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
    return 0


# -- export ----------------------------------------------------------------------------------

def handle_export(args) -> int:
    if args.all:
        return _export_all(args)
    if not args.game:
        raise UserError("name a game to export (an id or a unique prefix), or use --all -o DIR")
    if args.status:
        raise UserError("--status goes with --all")

    async def go(store):
        return await store.load_trace(args.game)

    from engine.redact import redact

    trace = with_store(_db_holding(args.db, args.game), go)
    refuse_peeking(trace, args, "exporting")
    text = redact(json.dumps(trace, indent=2, ensure_ascii=False))
    if args.output == "-":
        sys.stdout.write(text + "\n")
        return 0
    try:
        parent = os.path.dirname(os.path.abspath(args.output))
        os.makedirs(parent, exist_ok=True)
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    except OSError as exc:
        raise UserError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"wrote game {plain(trace['game_id'], SHOW_ID_CHARS)} ({len(trace['events'])} events) to "
          f"{plain(args.output)}", file=sys.stderr)
    return 0


def _export_all(args) -> int:
    """Every saved game (or those with --status) as one JSON file each, with progress on stderr."""
    if args.game:
        raise UserError("--all exports every game: name no game with it")
    if args.output == "-":
        raise UserError("--all writes one file per game: give a directory with -o")
    out = os.path.abspath(args.output)
    if os.path.exists(out) and not os.path.isdir(out):
        raise UserError(f"{args.output} is a file; --all needs a directory")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {args.output}: {exc.strerror or exc}") from None

    from saves.guard import admit, skip_line

    skipped = 0

    async def go(store):
        nonlocal skipped
        games = await store.list_games(status=args.status)
        written = 0
        for i, g in enumerate(games, 1):
            trace = await store.load_trace(g["game_id"])
            if not admit(trace, reveal=args.reveal_all_seats):  # the one guard: no peeking at a game in play
                print(("\n" if sys.stderr.isatty() else "") + skip_line(trace, "the export"), file=sys.stderr)
                skipped += 1
                continue
            path = os.path.join(out, f"calbench-{file_stem(g['game_id'])}.json")
            try:
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(json.dumps(trace, indent=2, ensure_ascii=False) + "\n")
            except OSError as exc:
                raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
            written += 1
            if sys.stderr.isatty() or i == len(games):
                print(f"\rexported {i}/{len(games)}", end="" if i < len(games) else "\n", file=sys.stderr)
        return written

    n = with_store(db_path(args.db), go)
    left = f" ({skipped} in play left out)" if skipped else ""
    print((f"wrote {n} game(s) to {args.output}" if n else "no saved games to export") + left, file=sys.stderr)
    return 0


def file_stem(game_id: str) -> str:
    """A file name for a game id: the id itself when it is a plain one (ours are uuids);
    otherwise its letters, digits, '-', '_' and '.', cut to 80, and a hash of the whole id,
    so an id holding '/', '..' or control characters never names a path outside the folder."""
    import hashlib
    import re

    if re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}", game_id):
        return game_id
    kept = re.sub(r"[^A-Za-z0-9_.-]+", "-", game_id).strip("-.")[:80]
    return f"{kept}-{hashlib.sha256(game_id.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}".lstrip("-")


# -- import ----------------------------------------------------------------------------------

def handle_import(args) -> int:
    from saves.store import StoreError

    results: list[tuple[str, str, str]] = []  # (file, outcome, detail)

    async def go(store):
        for path in args.files:
            try:
                if is_sqlite_file(path):  # another save database (e.g. a shard of a suite): merge it
                    await _merge_database(store, path, results, args.keep_unverified, reveal=args.reveal_all_seats)
                    continue
                trace = read_trace_file(path)
                results.append(await import_verified(store, trace, path, args.keep_unverified,
                                                     reveal=args.reveal_all_seats))
            except (UserError, StoreError) as exc:
                msg = str(exc)
                results.append((path, "failed", msg if msg.startswith(path) else f"{path}: {msg}"))
            except Exception as exc:  # noqa: BLE001 - one bad file never aborts the others
                results.append((path, "failed", f"{path}: cannot be imported ({type(exc).__name__}: "
                                                 f"{str(exc).splitlines()[0] if str(exc) else 'no detail'})"))

    with_store(db_path(args.db), go)
    counts = {"imported": 0, "unverified": 0, "duplicate": 0, "failed": 0, "in play": 0}
    for path, outcome, detail in results:
        counts[outcome] += 1
        # a game id is elided; a sentence (a failure, a game left out) is only made printable
        path, detail = plain(path), plain(detail, SHOW_ID_CHARS if outcome in ("imported", "unverified",
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
        else:
            print(f"calbench: error: could not import {detail}", file=sys.stderr)
    unverified = f", {counts['unverified']} imported unverified" if counts["unverified"] else ""
    in_play = f", {counts['in play']} in play left out" if counts["in play"] else ""
    print(f"{counts['imported']} imported{unverified}, {counts['duplicate']} already saved{in_play}, "
          f"{counts['failed']} failed", file=sys.stderr)
    return 1 if counts["failed"] or counts["unverified"] else 0


async def import_verified(store, trace: dict[str, Any], where: str, keep_unverified: bool, *,
                          reveal: bool = False) -> tuple[str, str, str]:
    """Fold and check ``trace`` (``engine.verify.verify_trace``), then import it.

    A trace that verifies is stored ``verified``.  One that does not is refused — or, with
    ``keep_unverified``, stored marked ``unverified`` with its problems.  Returns one
    ``(where, outcome, detail)`` line for the summary.  A game a person is still playing
    (saved mid-game) is left out unless ``reveal`` (the one guard, ``saves.guard``).
    """
    from engine.trace import TraceError
    from engine.verify import verify_trace
    from saves.guard import admit, skip_line
    from saves.checks import check_trace

    check_trace(trace)  # types and sizes first: the fold must not meet a value it cannot read
    if not admit(trace, reveal=reveal):
        return where, "in play", skip_line(trace, "the import")
    try:
        res = verify_trace(trace)
        problems = list(res.problems)
    except TraceError as exc:
        problems = [str(exc)]
    except (RecursionError, MemoryError):
        problems = ["the trace cannot be folded (it is too large or nested too deep)"]
    except Exception as exc:  # noqa: BLE001 - a malformed part the fold did not expect
        problems = [f"the trace cannot be folded ({type(exc).__name__}: {str(exc)[:200]})"]
    gid = trace["game_id"]
    if problems and not keep_unverified:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return (where, "failed", f"{where}: game {gid} does not verify, not imported: {problems[0]}{more}; "
                                 "check it with 'calbench trace', or add --keep-unverified to store it marked "
                                 "unverified")
    added = await store.import_trace(trace, verification="unverified" if problems else "verified",
                                     problems=problems or None)
    if not added:
        return where, "duplicate", gid
    return where, "unverified" if problems else "imported", gid


def is_sqlite_file(path: str) -> bool:
    """Whether ``path`` is a regular file that starts like an SQLite database (a FIFO or a
    device is not opened here: opening a FIFO blocks until someone writes to it)."""
    import stat

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


async def _merge_database(store, path: str, results: list, keep_unverified: bool = False, *,
                          reveal: bool = False) -> None:
    """Import every game of another save database, one result line per game."""
    from saves.store import Store, StoreError

    if os.path.realpath(path) == os.path.realpath(store.path):
        raise UserError(f"{path} is the database being imported into")
    other = await Store.open(path)
    try:
        for g in await other.list_games():
            where = f"{path}#{g['game_id'][:8]}"
            try:
                trace = await other.load_trace(g["game_id"])
                results.append(await import_verified(store, trace, where, keep_unverified, reveal=reveal))
            except StoreError as exc:
                results.append((where, "failed", f"{where}: {exc}"))
            except Exception as exc:  # noqa: BLE001 - one bad game never aborts the others
                results.append((where, "failed", f"{where}: cannot be imported ({type(exc).__name__}: "
                                                 f"{str(exc)[:200]})"))
    finally:
        await other.close()


# -- trace -----------------------------------------------------------------------------------

def _load_for_trace(args) -> dict[str, Any]:
    if os.path.exists(args.source):
        if os.path.isdir(args.source):
            raise UserError(f"{args.source} is a directory; give a trace file or a game id")
        return read_trace_file(args.source)
    if args.source.lower().endswith(".json") or os.sep in args.source:
        raise UserError(f"{args.source}: no such file (and it does not look like a game id)")

    async def go(store):
        return await store.load_trace(args.source)

    trace = with_store(_db_holding(args.db, args.source), go)
    refuse_peeking(trace, args, "tracing")
    return trace


def _cell(item) -> str:
    from engine.model import MeetingCopy

    if item is None:
        return "·"
    if isinstance(item, MeetingCopy):
        return f"M{item.meeting_id}"
    return f"{'B' if item.blocked else 'e'}{item.errand_id}"


def handle_trace(args) -> int:
    from engine.model import calendar_to_json
    from engine.trace import TraceError, fold_trace
    from engine.verify import verify_trace

    trace = _load_for_trace(args)
    last = len(trace.get("events") or []) - 1
    if args.at is not None and not 0 <= args.at <= max(last, 0):
        raise UserError(f"--at {args.at}: this trace has events 0-{last}")
    try:
        res = fold_trace(trace, upto_seq=args.at) if args.at is not None else verify_trace(trace)
    except TraceError as exc:
        raise UserError(f"{args.source}: {exc}") from None
    cals = res.final_calendars if args.at is None else res.calendars_at(args.at)
    if args.json:
        out = {
            "game_id": res.game_id,
            "verified": res.verified,
            "rounds": res.rounds,
            "final_calendars": [calendar_to_json(c) for c in cals],
            "metrics": res.metrics,
            "problems": res.problems,
            "source": res.source,
            "costs": res.costs,
            "at": args.at,
        }
        if res.splits is not None:  # the authors' traces: their split and ours (issue 21)
            out["oracle_split"] = res.splits
        print(json.dumps(out, indent=2))
        return 0 if res.verified else 1

    from rich.console import Console
    from rich.table import Table

    console = Console()
    who = "the paper authors' harness" if res.source == "authors" else "CalBench"
    upto = f", up to event {args.at}" if args.at is not None else ""
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
    label = f"Calendars at event {args.at}" if args.at is not None else "Final calendars"
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
        checked = "" if args.at is not None else ", and the recorded metrics match the ones recomputed from it"
        console.print(f"\n[green]Verified[/]: every folded round matches what the trace recorded{checked}.")
        return 0
    console.print(f"\n[red]Not verified[/]: {len(res.problems)} problem(s):")
    for p in res.problems:
        console.print(f"  - {plain(p)}", highlight=False, markup=False, soft_wrap=True)
    return 1
