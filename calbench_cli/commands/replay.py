"""``calbench replay [GAME|TRACE.json]``: step through a saved game in the terminal.

The trace is folded (``engine.trace.fold_trace``) — no persona is ever called — and
shown on :class:`calbench_tui.screens.replay.ReplayScreen`.  GAME is a saved game id (a
unique prefix is enough) looked up in the save database; TRACE.json is a trace file,
ours or the paper authors'.  Without an argument the list of saved games opens, from
which any game can be replayed (and the report screen reached with ``r``).  The trace is
loaded and checked by :mod:`lab.archive` (one call), then shown.
"""

from __future__ import annotations

from ..lab_errors import one_line
from . import UserError, add_db_option, require_terminal


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


def handle_replay(args) -> int:
    from lab.archive import ArchiveError, check_replay, load_trace

    from calbench_tui.replay_app import ReplayApp

    if args.source is None:
        if args.seat is not None:
            raise UserError("--seat needs a GAME or TRACE.json to replay")
        app = ReplayApp(store_path=_existing_db(args.db), reveal_all_seats=args.reveal_all_seats)
    else:
        with one_line(ArchiveError):
            trace = load_trace(args.source, lambda: _existing_db(args.db), reveal=args.reveal_all_seats,
                               what="replaying")
            check_replay(trace, args.seat, args.source)
        app = ReplayApp(trace, seat=args.seat)
    require_terminal("calbench replay")
    app.run()
    return app.return_code or 0
