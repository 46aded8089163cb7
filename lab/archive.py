"""Saved games in and out of the save database: list, export, import, load and verify a trace.

The work behind ``calbench games | export | import | trace`` and the loading of
``calbench replay`` (``calbench_cli/commands/saves.py`` and ``replay.py`` parse the
arguments, make one call here and print).  Each function takes plain values (a database
path, file names, flags) and returns data; a mistake the user can fix raises
:class:`ArchiveError` (one line), a problem of the save database the store's
``StoreError`` (one line too).  Nothing here prints: progress and skipped games are
reported through the callbacks given.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, NamedTuple, TypeVar

__all__ = ["ArchiveError", "Exported", "ExportedAll", "ExportedInspect", "ImportLine", "check_replay", "export_all",
           "export_game", "export_inspect",
           "file_stem", "import_files", "import_verified", "is_sqlite_file", "list_games", "load_trace",
           "read_trace_file", "trace_json", "verify", "with_store"]

T = TypeVar("T")

#: the statuses a saved game can have (``calbench games --status``)
STATUSES = ("running", "completed", "stopped", "failed")


class ArchiveError(Exception):
    """A mistake the user can fix (a file that is not a trace, a game in play, ...): one line."""


def with_store(path: str, fn: Callable[[Any], Awaitable[T]]) -> T:
    """``await fn(store)`` on the database at ``path`` (``saves.store.on_store``); the store's
    own errors are ``saves.errors.StoreError``: one line, raised as they are."""
    from saves.store import on_store

    return on_store(path, fn)


def _is_file_db(path: str) -> bool:
    return not (path == ":memory:" or path.startswith("file:"))


def _refuse_peeking(trace: dict[str, Any], reveal: bool, what: str) -> None:
    """:class:`ArchiveError` for a saved game a person is still playing (the one guard)."""
    from saves.guard import PeekRefused, refuse

    try:
        refuse(trace, reveal=reveal, what=what)
    except PeekRefused as exc:
        raise ArchiveError(str(exc)) from None


# -- games -------------------------------------------------------------------------------------

def list_games(db: str, *, status: str | None = None, task: str | None = None) -> list[dict[str, Any]]:
    """The saved games, oldest first (none when there is no database: listing never creates one).

    A game stored ``running`` whose process is gone (no live lease) is reported
    ``abandoned``, with ``stored_status`` ``running``.
    """
    if _is_file_db(db) and not os.path.exists(os.path.expanduser(db)):
        return []

    async def go(store):
        games = await store.list_games(status=status, task_id=task)
        if any(g["status"] == "running" for g in games):
            live = {row["subject"] for row in await store.leases("game:") if row["alive"]}
            for g in games:
                if g["status"] == "running" and f"game:{g['game_id']}" not in live:
                    g["stored_status"], g["status"] = "running", "abandoned"
        return games

    return with_store(db, go)


def no_games_words(db: str | None, *, status: str | None = None, task: str | None = None) -> str:
    """What ``calbench games`` says when it lists nothing: that the filters matched none of the
    games saved (it said "No saved games" then too), else how to make some."""
    if db and (status or task) and list_games(db):
        asked = " and ".join(f for f in (f"status {status}" if status else "",
                                         f"task {task!r}" if task else "") if f)
        return f"No saved game with {asked} in {db} (it holds others: 'calbench games --db {db}' lists them)."
    return ("No saved games. Play one with 'calbench-play', run a suite with 'calbench run', "
            "or load traces with 'calbench import'.")


# -- export ------------------------------------------------------------------------------------

def check_output_folder(path: str, option: str) -> None:
    """One line unless the folder that is to hold ``path`` exists (a typo in a path is
    reported, never answered by creating folders)."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ArchiveError(f"{option} {path}: the folder {parent} does not exist; create it first or choose "
                           "another path")


def _output_folder(out_dir: str, why: str) -> str:
    """The absolute path of the folder ``-o`` names (made later by :func:`_make_folder`):
    not a file, and the folders above it must exist."""
    out = os.path.abspath(out_dir)
    if os.path.exists(out) and not os.path.isdir(out):
        raise ArchiveError(f"{out_dir} is a file; {why}")
    check_output_folder(out, "-o")  # the folder named is made; the ones above it must exist
    return out


def _make_folder(out: str, out_dir: str) -> None:
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise ArchiveError(f"cannot create {out_dir}: {exc.strerror or exc}") from None


@dataclass
class Exported:
    game_id: str
    events: int
    text: str  # the trace as JSON, keys redacted (no trailing newline)


def export_game(db: str, game: str, *, output: str | None = None, reveal: bool = False) -> Exported:
    """One saved game (``game``: an id or a unique prefix) as JSON text, written to ``output``
    when given (its folder must exist: CalBench never creates the folders above a file it
    writes — the rule of ``--db``, ``report --plot`` and ``suite generate -o``; issue 35)."""
    from engine.redact import redact

    trace = with_store(db, lambda store: store.load_trace(game))
    _refuse_peeking(trace, reveal, "exporting")
    text = redact(json.dumps(trace, indent=2, ensure_ascii=False))
    if output is not None:
        check_output_folder(output, "-o")
        try:
            with open(output, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
        except OSError as exc:
            raise ArchiveError(f"cannot write {output}: {exc.strerror or exc}") from None
    return Exported(trace["game_id"], len(trace["events"]), text)


@dataclass
class ExportedAll:
    written: int
    skipped: int  # games in play left out


def export_all(db: str, out_dir: str, *, status: str | None = None, reveal: bool = False,
               progress: Callable[[int, int], None] | None = None,
               skipped: Callable[[str], None] | None = None) -> ExportedAll:
    """Every saved game (or those with ``status``) as ``out_dir/calbench-<id>.json``.

    ``progress(done, total)`` is called after each game; ``skipped(line)`` for each game a
    person is still playing (left out unless ``reveal``)."""
    from saves.guard import admit, skip_line

    out = _output_folder(out_dir, "--all needs a directory")
    _make_folder(out, out_dir)
    done = ExportedAll(0, 0)

    async def go(store):
        games = await store.list_games(status=status)
        for i, g in enumerate(games, 1):
            trace = await store.load_trace(g["game_id"])
            if not admit(trace, reveal=reveal):  # the one guard: no peeking at a game in play
                done.skipped += 1
                if skipped:
                    skipped(skip_line(trace, "the export"))
                continue
            path = os.path.join(out, f"calbench-{file_stem(g['game_id'])}.json")
            try:
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(json.dumps(trace, indent=2, ensure_ascii=False) + "\n")
            except OSError as exc:
                raise ArchiveError(f"cannot write {path}: {exc.strerror or exc}") from None
            done.written += 1
            if progress:
                progress(i, len(games))

    with_store(db, go)
    return done


@dataclass
class ExportedInspect:
    path: str  # the .eval log written
    written: int  # games in it
    skipped: int  # games left out: in play, or without scores (not finished)


def export_inspect(db: str, out_dir: str, *, game: str | None = None, status: str | None = None,
                   reveal: bool = False, skipped: Callable[[str], None] | None = None) -> ExportedInspect:
    """Saved games as one Inspect AI ``.eval`` log in ``out_dir`` (``calbench export --inspect``):
    the game ``game`` (an id or a unique prefix), else every saved game (or those with ``status``).

    The one guard applies as to every export: a game a person is still playing is refused by
    name and left out of ``--all`` (``skipped(line)``), unless ``reveal``.  A game without
    scores (stopped or failed before its end) has nothing to score: refused by name, left out
    of ``--all`` with a line.  The log is ``lab.inspect_log.write_eval_log``'s."""
    from saves.guard import admit, skip_line

    from .inspect_log import INSPECT_MISSING, inspect_available, write_eval_log

    if not inspect_available():
        raise ArchiveError(INSPECT_MISSING)
    out = _output_folder(out_dir, "--inspect writes a .eval log into a directory")
    traces: list[dict[str, Any]] = []
    left = 0

    async def go(store):
        nonlocal left
        if game is not None:
            trace = await store.load_trace(game)
            _refuse_peeking(trace, reveal, "exporting")
            if not isinstance(trace.get("metrics"), dict):
                raise ArchiveError(f"game {str(trace['game_id'])[:8]} has no scores "
                                   f"({(trace.get('saved') or {}).get('status')}): only a finished game is a sample")
            traces.append(trace)
            return
        for g in await store.list_games(status=status):
            trace = await store.load_trace(g["game_id"])
            if not admit(trace, reveal=reveal):  # the one guard: no peeking at a game in play
                left += 1
                if skipped:
                    skipped(skip_line(trace, "the export"))
            elif not isinstance(trace.get("metrics"), dict):
                left += 1
                if skipped:
                    skipped(f"skipped game {str(trace['game_id'])[:8]}: it has no scores ({g['status']})")
            else:
                traces.append(trace)

    with_store(db, go)
    if not traces:
        return ExportedInspect("", 0, left)
    _make_folder(out, out_dir)
    return ExportedInspect(write_eval_log(traces, out), len(traces), left)


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


# -- import ------------------------------------------------------------------------------------

#: what became of one file (or one game of a merged database)
#: "study": a merged database's study rows (detail: one sentence); "refused": a merged database
#: whose study cannot join the target's (another design, a participant with other rows): nothing
#: of it was written, and the command exits 2
OUTCOMES = ("imported", "unverified", "duplicate", "failed", "in play", "study", "refused")


class ImportLine(NamedTuple):
    where: str    # the file, or FILE.db#<id> for a game of a merged database
    outcome: str  # one of OUTCOMES
    detail: str   # the game id (imported, unverified, duplicate), else a sentence


def read_trace_file(path: str) -> dict[str, Any]:
    """A trace from a JSON file, or an :class:`ArchiveError` naming the file and what is wrong."""
    from engine.inputs import MAX_DATA_BYTES, loads_json, read_bytes

    try:
        data = read_bytes(path, "trace file", limit=MAX_DATA_BYTES, error=ArchiveError)
    except OSError as exc:
        raise ArchiveError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArchiveError(f"{path}: not a text file (a JSON trace is UTF-8 text; byte {exc.start} is "
                           f"{data[exc.start:exc.start + 1]!r})") from None
    try:
        trace = loads_json(text, path, error=ArchiveError)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and exc.lineno > 1:
            raise ArchiveError(_lines_file(path, text)) from None
        raise ArchiveError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise ArchiveError(f"{path}: not a game trace (the JSON is nested far too deep)") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python reads
        raise ArchiveError(f"{path}: not a game trace ({str(exc).splitlines()[0]})") from None
    if not isinstance(trace, dict) or not isinstance(trace.get("events"), list) or "game_id" not in trace:
        raise ArchiveError(f"{path}: not a game trace (expected an object with 'game_id' and 'events')")
    return trace


def _lines_file(path: str, text: str) -> str:
    """What to say of a JSON Lines file given where one trace was expected: a task file (each
    line a task row, ours or the authors') is played, not imported."""
    try:
        first = json.loads(text.split("\n", 1)[0])
    except ValueError:
        first = None
    if isinstance(first, dict) and "calendars" in first and "meetings" in first:
        return (f"{path}: a task file (one task row a line), not a game trace; play its tasks with "
                f"calbench run --tasks {path}")
    return (f"{path}: one JSON value a line (JSON Lines), not a game trace (one JSON object with 'game_id' "
            f"and 'events')")


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


def _failure(where: str, exc: Exception, cut: int | None = None) -> ImportLine:
    text = str(exc)
    if cut is not None:
        detail = text[:cut]
    else:
        detail = text.splitlines()[0] if text else "no detail"
    return ImportLine(where, "failed", f"{where}: cannot be imported ({type(exc).__name__}: {detail})")


def import_files(db: str, files: list[str], *, keep_unverified: bool = False,
                 reveal: bool = False) -> list[ImportLine]:
    """Load trace files and merge save databases into ``db``, one line per file (per game of
    a merged database).  Games already saved are duplicates; a file that cannot be read is
    a failed line and the others still load."""
    from saves.errors import StoreError

    lines: list[ImportLine] = []
    origin: dict[tuple[str, str], str] = {}  # (study, participant) -> the file it came from in this run

    async def go(store):
        for path in files:
            try:
                if is_sqlite_file(path):  # another save database (a shard of a suite, a study host): merge it
                    lines.extend(await _merge_database(store, path, keep_unverified, reveal=reveal, origin=origin))
                    continue
                lines.append(await import_verified(store, read_trace_file(path), path, keep_unverified,
                                                   reveal=reveal))
            except (ArchiveError, StoreError) as exc:
                msg = str(exc)
                lines.append(ImportLine(path, "failed", msg if msg.startswith(path) else f"{path}: {msg}"))
            except Exception as exc:  # noqa: BLE001 - one bad file never aborts the others
                lines.append(_failure(path, exc))

    with_store(db, go)
    return lines


async def import_verified(store, trace: dict[str, Any], where: str, keep_unverified: bool, *,
                          reveal: bool = False) -> ImportLine:
    """Fold and check ``trace`` (``lab.replaycheck.verify_game``), then import it.

    A trace that verifies is stored ``verified``.  One that does not is refused — or, with
    ``keep_unverified``, stored marked ``unverified`` with its problems.  Returns one
    :class:`ImportLine` for the summary.  A game a person is still playing (saved
    mid-game) is left out unless ``reveal`` (the one guard, ``saves.guard``).
    """
    from engine.trace import TraceError
    from saves.checks import check_trace
    from saves.guard import admit, skip_line

    from .replaycheck import verify_game

    check_trace(trace)  # types and sizes first: the fold must not meet a value it cannot read
    if not admit(trace, reveal=reveal):
        return ImportLine(where, "in play", skip_line(trace, "the import"))
    try:
        problems = list((await verify_game(trace)).problems)
    except TraceError as exc:
        problems = [str(exc)]
    except (RecursionError, MemoryError):
        problems = ["the trace cannot be folded (it is too large or nested too deep)"]
    except Exception as exc:  # noqa: BLE001 - a malformed part the fold did not expect
        problems = [f"the trace cannot be folded ({type(exc).__name__}: {str(exc)[:200]})"]
    gid = trace["game_id"]
    if problems and not keep_unverified:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return ImportLine(where, "failed", f"{where}: game {gid} does not verify, not imported: {problems[0]}{more}; "
                                           "check it with 'calbench trace', or add --keep-unverified to store it "
                                           "marked unverified")
    added = await store.import_trace(trace, verification="unverified" if problems else "verified",
                                     problems=problems or None, checked=True)  # checked above
    if not added:
        return ImportLine(where, "duplicate", gid)
    return ImportLine(where, "unverified" if problems else "imported", gid)


async def _merge_database(store, path: str, keep_unverified: bool = False, *, reveal: bool = False,
                          origin: dict[tuple[str, str], str] | None = None) -> list[ImportLine]:
    """Import every game of another save database, one line per game, then its study rows
    (participants, steps, answers, beliefs, timings, drafts: ``saves.study.merge_study_rows``,
    one write transaction), one line per study.  A study that cannot join the target's (another
    design, a participant there with other rows) is one ``refused`` line, checked before any
    game is written: nothing of that database is merged.  Simulated participants (a dry run on
    that host) are left out, their games with them."""
    from saves.errors import StoreError
    from saves.store import Store
    from saves.study import StudyMergeRefused, check_study_merge, merge_study_rows, read_study_rows

    if os.path.realpath(path) == os.path.realpath(store.path):
        raise ArchiveError(f"{path} is the database being imported into")
    origin = {} if origin is None else origin
    lines: list[ImportLine] = []
    other = await Store.open(path)
    try:
        studies = await read_study_rows(other)
        try:
            await check_study_merge(store, studies, path, origin=origin)
        except StudyMergeRefused as exc:
            return [ImportLine(path, "refused", str(exc))]
        for g in await other.list_games():
            if g["game_id"] in studies.simulated_games:
                continue
            where = f"{path}#{g['game_id'][:8]}"
            try:
                trace = await other.load_trace(g["game_id"])
                lines.append(await import_verified(store, trace, where, keep_unverified, reveal=reveal))
            except StoreError as exc:
                lines.append(ImportLine(where, "failed", f"{where}: {exc}"))
            except Exception as exc:  # noqa: BLE001 - one bad game never aborts the others
                lines.append(_failure(where, exc, cut=200))
        if studies.studies():
            try:
                merged = await merge_study_rows(store, studies, path, origin=origin)
            except StudyMergeRefused as exc:  # another process wrote the same participant meanwhile
                return lines + [ImportLine(path, "refused", str(exc))]
            for sid, n in merged.items():
                sims = (f"; {n['simulated']} simulated (a dry run there) left out, with their games"
                        if n["simulated"] else "")
                lines.append(ImportLine(path, "study", f"study {sid!r}: {n['new']} participants merged, "
                                                       f"{n['already']} already saved{sims}"))
    finally:
        await other.close()
    return lines


# -- a trace named on the command line, and its fold -------------------------------------------

def load_trace(source: str, db: Callable[[], str], *, reveal: bool = False, what: str = "tracing") -> dict[str, Any]:
    """The trace ``source`` names: a trace file if it exists, else a saved game looked up in
    the database ``db()`` gives (called only then), refused while a person is still playing
    it unless ``reveal`` (``what`` names the refused act)."""
    if os.path.exists(source):
        if os.path.isdir(source):
            raise ArchiveError(f"{source} is a directory; give a trace file or a game id")
        from engine.trace import TraceError
        from engine.tracecheck import check_trace

        trace = read_trace_file(source)
        try:  # what `import` refuses, `trace` refuses in the same words (issue 35, 5): one checker
            check_trace(trace)
        except TraceError as exc:
            raise ArchiveError(f"{source}: {exc}") from None
        return trace
    if source.lower().endswith(".json") or os.sep in source:
        raise ArchiveError(f"{source}: no such file (and it does not look like a game id)")
    trace = with_store(db(), lambda store: store.load_trace(source))
    _refuse_peeking(trace, reveal, what)
    return trace


def verify(trace: dict[str, Any], source: str, at: int | None = None):
    """``(fold result, calendars)``: the trace verified (``lab.replaycheck.verify_game``, as
    ``import`` verifies), or folded up to event ``at`` only, with the calendars there."""
    import asyncio

    from engine.trace import TraceError, fold_trace

    from .replaycheck import verify_game

    last = len(trace.get("events") or []) - 1
    if at is not None and not 0 <= at <= max(last, 0):
        raise ArchiveError(f"--at {at}: this trace has events 0-{last}")
    try:
        res = fold_trace(trace, upto_seq=at) if at is not None else asyncio.run(verify_game(trace))
    except TraceError as exc:
        raise ArchiveError(f"{source}: {exc}") from None
    return res, (res.final_calendars if at is None else res.calendars_at(at))


def trace_json(res, calendars, at: int | None) -> dict[str, Any]:
    """What ``calbench trace --json`` prints for a fold result."""
    from engine.model import calendar_to_json

    out = {"game_id": res.game_id, "verified": res.verified, "rounds": res.rounds,
           "final_calendars": [calendar_to_json(c) for c in calendars], "metrics": res.metrics,
           "problems": res.problems, "source": res.source, "costs": res.costs, "at": at}
    if res.splits is not None:  # the authors' traces: their split and ours (issue 21)
        out["oracle_split"] = res.splits
    return out


def check_replay(trace: dict[str, Any], seat: int | None, source: str) -> int:
    """The number of seats of a trace about to be replayed; one line for a trace that cannot
    be folded or a seat it does not have."""
    from engine.trace import TraceError, fold_trace

    try:
        n = len(fold_trace(trace).initial_calendars)
    except TraceError as exc:
        raise ArchiveError(f"{source}: {exc}") from None
    if seat is not None and not 0 <= seat < n:
        raise ArchiveError(f"--seat {seat}: this game has seats 0-{n - 1}")
    return n
