"""``calbench serve``: a table whose human seats are played from other terminals or browsers.

    calbench serve --agents human,imap,human,imap,imap --task canonical:3
    calbench-play --join ws://127.0.0.1:8700/table --code CODE      # a participant's terminal
    open http://127.0.0.1:8700/?code=CODE                            # or a browser

The game runs here, through the same game session as every other game, and is saved as it
goes.  Each human seat gets a random join code; the server prints one line per seat (with
``--json``, the first stdout line is ``{"url", "web", "game_id", "seats": [{"seat", "code"}]}``).
It binds 127.0.0.1 unless ``--host`` says otherwise; ctrl+c stops it with the game saved
(a game in play is marked stopped).
"""

from __future__ import annotations

import argparse
import json
import sys

from calbench_tui.safe_text import plain
from engine import protocols

from . import UserError, add_db_option, db_path, game_options


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="serve a table: human seats played from other terminals or browsers",
        description="Run one game whose 'human' seats are played remotely: from another terminal with "
                    "'calbench-play --join URL --code CODE', or from a browser at the web address. "
                    "Only each seat's own view ever crosses the network.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  calbench serve --agents human,imap,human,imap,imap --task canonical:3\n"
               "  calbench serve --agents human,human,imap,imap,imap --task seed:7 --host 0.0.0.0 --json\n"
               "  calbench serve --study study.toml --participants P01,P02,P03 --db study.db\n",
    )
    p.add_argument("--agents", metavar="SPEC",
                   help="one persona per seat; 'human' seats are served remotely (at least one), e.g. "
                        "human,imap,human,imap,imap")
    p.add_argument("--task", metavar="REF", help="one task: canonical:3, seed:7, FILE.jsonl:ID")
    p.add_argument("--resume", metavar="GAME",
                   help="continue a served game that was stopped or whose server died (an id or a unique prefix): "
                        "the same seats from its last complete round, with new join codes")
    p.add_argument("--study", metavar="PATH",
                   help="serve a study's participants instead: each gets a private link to their whole session "
                        "(consent to completion code) in a browser; needs --participants, or [pool] "
                        "max_participants in the study file for one public link that admits an online pool's ids")
    p.add_argument("--participants", metavar="IDS|N",
                   help="with --study: the participant ids to serve (P01,P02,...) or a count N (P001..PNNN); "
                        "optional when the study has a public link ([pool] max_participants)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1, this machine only; 0.0.0.0 opens it to the network)")
    p.add_argument("--port", type=int, default=8700, help="port (default 8700; 0 picks a free one)")
    p.add_argument("--channel", default="dm", metavar="dm|participant|all|...",
                   help="message channels, combined with commas (default dm)")
    p.add_argument("--max-turns", type=int, default=15, metavar="N", help="CHEAP_TALK sweeps per round (default 15)")
    p.add_argument("--hold", type=float, default=120.0, metavar="SECONDS",
                   help="how long a dropped participant's seat is held before the timeout rule applies (default 120)")
    p.add_argument("--send-timeout", type=float, default=15.0, metavar="SECONDS",
                   help="a participant's terminal or browser that does not take a frame within this long (it "
                        "stopped reading) is dropped: its seat is held (--hold), then the timeout rule applies; "
                        "the table never waits for it (default 15)")
    p.add_argument("--turn-seconds", type=float, default=0.0, metavar="SECONDS",
                   help="a human seat's time for one talk turn or decision, connected or not; then its timeout "
                        "rule applies (the turn ends with nothing said, a decision is no move; recorded as "
                        "seat_timeout), as a study's timing does. A participant who never answers cannot stall "
                        "the table (default 0: no limit)")
    p.add_argument("--lobby-wait", type=float, default=600.0, metavar="SECONDS",
                   help="how long to wait for every human seat to be taken (default 600)")
    fill = protocols.default_seat()
    p.add_argument("--lobby-fill", default=fill, metavar="PERSONA|cancel",
                   help=f"after the wait, give empty seats to this persona, or 'cancel' the table (default {fill})")
    p.add_argument("--linger", type=float, default=300.0, metavar="SECONDS",
                   help="after the game, keep serving until every participant has left, at most this long "
                        "(default 300), so they can read the end screen")
    p.add_argument("--no-web", action="store_true", help="serve terminals only (no browser page)")
    p.add_argument("--public-url", metavar="URL",
                   help="the address participants' browsers use when a reverse proxy is in front, e.g. "
                        "https://lab.example.org/ (links, the page's script and its wss:// websocket follow "
                        "it; without it the proxy's X-Forwarded-Proto / X-Forwarded-Host headers are used)")
    p.add_argument("--max-sessions-per-address", type=int, default=None, metavar="N",
                   help="browser sessions (each runs an app process) one client address may have open at "
                        "once (default 8 for a table; a study has no such cap: each participant link opens one "
                        "session, whatever the address — a lab behind one NAT address works)")
    p.add_argument("--trusted-proxy", action="append", default=[], metavar="ADDR[,ADDR]",
                   help="a reverse proxy's address or network (e.g. 127.0.0.1): only requests from it have "
                        "their X-Forwarded-For / -Proto / -Host headers believed (default: none — nobody can "
                        "forge an address to get round the per-address cap)")
    p.add_argument("--json", action="store_true", help="print the join information as one JSON line first")
    add_db_option(p)
    from .llm import add_llm_arguments

    add_llm_arguments(p)  # llm:MODEL seats at the table: --base-url, --api-key-env, --personas, ...
    p.set_defaults(handler=handle)


def _limits(args: argparse.Namespace):
    from lab.serving import ServeLimits

    return ServeLimits(host=args.host, port=args.port, public_url=args.public_url,
                       max_sessions_per_address=8 if args.max_sessions_per_address is None
                       else args.max_sessions_per_address, send_timeout=args.send_timeout,
                       hold=args.hold, lobby_wait=args.lobby_wait, linger=args.linger,
                       turn_seconds=args.turn_seconds)


def handle(args: argparse.Namespace) -> int:
    if args.study:
        return _handle_study(args)
    if args.participants:
        raise UserError("--participants goes with --study PATH")
    from lab.gamespec import SetupError
    from lab.serving import check_limits, plan_table, serve_table
    from personas.spec import AgentsSpec

    from .run import build_llm_settings

    try:
        limits = check_limits(_limits(args))
        db = db_path(args.db)
        plan = plan_table(agents=args.agents, task_ref=args.task, resume=args.resume, db=db,
                          fill=args.lobby_fill, channels=None if args.resume else game_options(args),
                          max_turns=args.max_turns)
        llm, per_seat = build_llm_settings(args, AgentsSpec.of_names(plan.names))  # (None, None) without llm seats
        result = serve_table(plan, db=db, limits=limits, llm=llm, per_seat=per_seat,
                             make_web=None if args.no_web else _web_front(limits, _proxies(args)),
                             on_ready=lambda server, table: _announce(args, limits, server, table),
                             on_takeover=_takeover, on_end=_ended, on_event=_console)
    except SetupError as exc:
        raise UserError(str(exc)) from None
    _stopped(result)
    return result.exit_code


def _web_front(limits, proxies):
    """The browser page's maker (``calbench_tui.web.WebFront``) for a table's join codes."""
    try:
        from calbench_tui.web import WebFront
    except ImportError:
        raise UserError("the browser page needs textual-serve (pip install textual-serve), or use --no-web") from None

    def make(table):
        web = WebFront(host=limits.host, port=limits.port, codes={c["code"] for c in table.codes()},
                       public_url=limits.public_url, max_per_client=limits.max_sessions_per_address,
                       trusted_proxies=proxies)
        web.events = _console
        return web

    return make


def _proxies(args: argparse.Namespace) -> list:
    """``--trusted-proxy`` checked (one line for a bad address)."""
    from calbench_tui.web import parse_proxies

    try:
        return parse_proxies(args.trusted_proxy)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _console(line: str) -> None:
    """One line on the host's console: who joined, left, took a seat over; when a game started."""
    print(plain(line), file=sys.stderr, flush=True)


def _takeover(seat: int, words: str) -> None:
    print(f"Note: {plain(words)}.", file=sys.stderr, flush=True)


def _ended(result) -> None:
    if result.status == "cancelled":
        print("The table was cancelled: not every seat was taken in time (recorded).", file=sys.stderr)
    else:
        print(f"Game {plain(result.game_id)} {result.status}"
              + (f": {plain(result.error)}" if result.error else "") + ". It is saved.", file=sys.stderr)


def _stopped(result) -> None:
    """What a signal stopped: the game (saved as stopped), the lingering after it, or the lobby."""
    if result.status != "interrupted":
        return
    if result.table_status == "stopped":
        print(f"Stopped. Game {plain(result.game_id)} is saved as stopped.", file=sys.stderr)
    elif result.table_status == "over":  # while lingering: the game's end was reported above
        print("Stopped.", file=sys.stderr)
    else:
        print("Stopped before the game started: nothing was played or saved.", file=sys.stderr)


def _handle_study(args: argparse.Namespace) -> int:
    """Serve a study: one private link per participant, each opening their whole session in a browser."""
    from pathlib import Path

    from lab.gamespec import SetupError
    from lab.serving import check_address, serve_until_stopped
    from lab.server import TableServer
    from lab.study.pool import served_links
    from lab.study.model import StudyFileError, load_study

    if args.agents or args.task:
        raise UserError("--study serves the study's own conditions; drop --agents / --task")
    if args.no_web:
        raise UserError("--study serves participants in the browser; drop --no-web "
                        "(or run 'calbench study run' at each terminal)")
    try:
        public_url = check_address(args.host, args.port, args.max_sessions_per_address, args.public_url)
        proxies = _proxies(args)
        study = load_study(args.study)
        study_path, db = str(Path(args.study).resolve()), str(Path(db_path(args.db)).resolve())
        links, door = served_links(study, args.participants, db)
        from calbench_tui.web import WebFront
    except (StudyFileError, OSError) as exc:
        raise UserError(str(exc).splitlines()[0]) from None
    except SetupError as exc:
        raise UserError(str(exc)) from None
    except ImportError:
        raise UserError("serving a study needs textual-serve (pip install textual-serve)") from None
    web = WebFront(host=args.host, port=args.port, study=(study_path, db), participants=links, public_url=public_url,
                   max_per_client=args.max_sessions_per_address, pool_param=study.pool.id_param,
                   trusted_proxies=proxies)
    web.pool_door = door  # the public link, if the study has one
    web.events = _console
    server = TableServer([], host=args.host, port=args.port, extra_routes=web.add_routes)
    try:
        code = serve_until_stopped(server, host=args.host, port=args.port,
                                   on_ready=lambda srv: _announce_study(args, public_url or srv.web_url, study_path,
                                                                        db, links, door, study))
    except SetupError as exc:
        raise UserError(str(exc)) from None
    if code == 130:
        print("Stopped. Every participant's progress is saved.", file=sys.stderr)
    return code


def _announce_study(args, base: str, study_path: str, db: str, links: dict[str, str], door=None,
                    study=None) -> None:
    rows = [{"participant": pid, "code": code, "link": f"{base}?code={code}"} for code, pid in links.items()]
    public = None
    if door is not None:
        # the pool fills in the id: Prolific's own placeholder, else ID stands for the pool's
        fill = "{{%PROLIFIC_PID%}}" if door.param == "PROLIFIC_PID" else "ID"
        public = f"{base}?code={door.code}&{door.param}={fill}"
    if args.json:
        print(json.dumps({"web": base, "study": study_path, "participants": rows, "public_link": public}),
              flush=True)
        return
    print(f"Serving study {plain(args.study)} on {base} (database {plain(db)})")
    if public is not None:
        print(f"  Public link for the pool (at most {study.pool.max_participants} participants; the pool puts "
              f"each one's id where {door.param}= is): {public}")
    for r in rows:
        print(f"  {plain(r['participant'])}: {r['link']}")
    print(("Give the pool the public link (each participant then gets a link of their own); " if public else
           "Give each participant their own link. ") + "'calbench study status' shows where everyone is; "
          "ctrl+c stops the server (each session resumes at its step when its link is opened again).",
          flush=True)


def _announce(args, limits, server, table) -> None:
    seats = table.codes()
    web = limits.public_url or server.web_url
    if args.json:
        print(json.dumps({"url": server.url, "web": None if args.no_web else web,
                          "game_id": table.game_id, "seats": seats}), flush=True)
        return
    print(f"Serving game {plain(table.game_id)} on {server.url}" + ("" if args.no_web else f" and {web}"))
    for s in seats:
        line = f"  seat {s['seat']}: calbench-play --join {server.url} --code={s['code']}"
        if not args.no_web:
            line += f"   or   {web}?code={s['code']}"
        print(line)
    print("Waiting for every seat to be taken; ctrl+c stops the server (the game stays saved).", flush=True)
