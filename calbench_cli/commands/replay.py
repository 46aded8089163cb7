"""``calbench replay [GAME|TRACE.json]``: step through a saved game in the terminal.

The trace is folded (``engine.trace.fold_trace``) — no persona is ever called — and
shown on :class:`calbench_tui.screens.replay.ReplayScreen`.  GAME is a saved game id (a
unique prefix is enough) looked up in the save database; TRACE.json is a trace file,
ours or the paper authors'.  Without an argument the list of saved games opens, from
which any game can be replayed (and the report screen reached with ``r``).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from . import UserError, add_db_option, require_terminal, with_store


def register(sub) -> None:
    p = sub.add_parser(
        "replay", help="step through a saved game or a trace file (theirs or ours)",
        description="Replay a game event by event: all calendars side by side, one seat's view as it was "
                    "(calendar, inbox, prompt, reply, thinking), the messages and the belief/VPS movement "
                    "each caused. Keys: →/← one event, ]/[ one round, home/end, space autoplay (+/- speed), "
                    "c/s/m/b views, 0-9 seat, esc quit. Without GAME, the list of saved games opens.")
    p.add_argument("source", metavar="GAME|TRACE.json", nargs="?", default=None,
                   help="a saved game id (or a unique prefix), or a trace file")
    add_db_option(p)
    p.add_argument("--seat", metavar="N", type=int, default=None, help="open the seat view on seat N")
    from .saves import add_reveal_option

    add_reveal_option(p)
    p.set_defaults(handler=handle_replay)


def _existing_db(arg: str | None) -> str:
    from . import check_db, existing_db

    path = existing_db(arg)
    check_db(path)
    return path


def load_trace(source: str, db: str | None, reveal: bool = False) -> dict[str, Any]:
    """The trace named on the command line: a file if it exists, else a saved game
    (refused while a human is still playing it, unless ``reveal``)."""
    from .saves import read_trace_file, refuse_peeking

    if os.path.exists(source):
        if os.path.isdir(source):
            raise UserError(f"{source} is a directory; give a trace file or a game id")
        return read_trace_file(source)
    if source.lower().endswith(".json") or os.sep in source:
        raise UserError(f"{source}: no such file (and it does not look like a game id)")
    trace = with_store(_existing_db(db), lambda store: store.load_trace(source))
    refuse_peeking(trace, argparse.Namespace(reveal_all_seats=reveal), "replaying")
    return trace


def check_trace(trace: dict[str, Any], seat: int | None, source: str) -> None:
    """Fail early, in one line, on a trace that cannot be folded or a seat it does not have."""
    from engine.trace import TraceError, fold_trace

    try:
        res = fold_trace(trace)
    except TraceError as exc:
        raise UserError(f"{source}: {exc}") from None
    n = len(res.initial_calendars)
    if seat is not None and not 0 <= seat < n:
        raise UserError(f"--seat {seat}: this game has seats 0-{n - 1}")


def handle_replay(args) -> int:
    from calbench_tui.replay_app import ReplayApp

    if args.source is None:
        if args.seat is not None:
            raise UserError("--seat needs a GAME or TRACE.json to replay")
        app = ReplayApp(store_path=_existing_db(args.db), reveal_all_seats=args.reveal_all_seats)
        require_terminal("calbench replay")
        app.run()
        return app.return_code or 0
    trace = load_trace(args.source, args.db, args.reveal_all_seats)
    check_trace(trace, args.seat, args.source)
    app = ReplayApp(trace, seat=args.seat)
    require_terminal("calbench replay")
    app.run()
    return app.return_code or 0
