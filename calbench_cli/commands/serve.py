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
import asyncio
import json
import os
import signal
import sys

from calbench_tui.safe_text import plain
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
                        "(consent to completion code) in a browser; needs --participants")
    p.add_argument("--participants", metavar="IDS|N",
                   help="with --study: the participant ids to serve (P01,P02,...) or a count N (P001..PNNN)")
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
    p.add_argument("--lobby-wait", type=float, default=600.0, metavar="SECONDS",
                   help="how long to wait for every human seat to be taken (default 600)")
    p.add_argument("--lobby-fill", default="imap", metavar="PERSONA|cancel",
                   help="after the wait, give empty seats to this persona, or 'cancel' the table (default imap)")
    p.add_argument("--linger", type=float, default=300.0, metavar="SECONDS",
                   help="after the game, keep serving until every participant has left, at most this long "
                        "(default 300), so they can read the end screen")
    p.add_argument("--no-web", action="store_true", help="serve terminals only (no browser page)")
    p.add_argument("--public-url", metavar="URL",
                   help="the address participants' browsers use when a reverse proxy is in front, e.g. "
                        "https://lab.example.org/ (links, the page's script and its wss:// websocket follow "
                        "it; without it the proxy's X-Forwarded-Proto / X-Forwarded-Host headers are used)")
    p.add_argument("--max-sessions-per-address", type=int, default=8, metavar="N",
                   help="browser sessions (each runs an app process) one client address may have open at "
                        "once (default 8)")
    p.add_argument("--json", action="store_true", help="print the join information as one JSON line first")
    add_db_option(p)
    from .llm import add_llm_arguments

    add_llm_arguments(p)  # llm:MODEL seats at the table: --base-url, --api-key-env, --personas, ...
    p.set_defaults(handler=handle)


def _check_address(args: argparse.Namespace) -> None:
    if not args.host.strip():  # aiohttp would listen on every interface
        raise UserError("--host needs an address: 127.0.0.1 (this machine, the default) or 0.0.0.0 (the network)")
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port must be 0..65535, not {args.port}")
    if not 1 <= args.max_sessions_per_address <= 10000:
        raise UserError(f"--max-sessions-per-address must be 1..10000, not {args.max_sessions_per_address}")
    if args.public_url is not None:
        from urllib.parse import urlsplit

        parts = urlsplit(args.public_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise UserError(f"--public-url {args.public_url!r} is not a web address; e.g. https://lab.example.org/")
        args.public_url = args.public_url.strip().rstrip("/") + "/"


def _web_base(args: argparse.Namespace, server) -> str:
    """The browser address printed in links: --public-url, else the address served."""
    return args.public_url or server.web_url


def _checks(args: argparse.Namespace) -> None:
    _check_address(args)
    if not 0.1 <= args.send_timeout <= 3600:
        raise UserError(f"--send-timeout must be 0.1..3600 seconds, not {args.send_timeout:g}")
    for name in ("hold", "lobby_wait", "linger"):
        v = getattr(args, name)
        if not 0 <= v <= 86400:
            raise UserError(f"--{name.replace('_', '-')} must be 0..86400 seconds, not {v:g}")


def _lobby_fill(args: argparse.Namespace) -> str | None:
    from personas.spec import SeatSpec

    if args.lobby_fill.strip().lower() == "cancel":
        return None
    fill_seat = SeatSpec.parse(args.lobby_fill)
    if fill_seat.kind != "scripted":
        raise UserError("--lobby-fill takes a scripted persona (imap, sdmap, dsm-welfare, dsm-private, passive) "
                        "or 'cancel'")
    return fill_seat.name


def _resumed(args: argparse.Namespace):
    """A saved served game to continue: (task, seat names, config, fill, (game id, keep-up-to seq),
    {seat: the LLM settings it was saved with}).

    Only a game played at a table (``calbench serve``) is continued here, and only when no
    live process owns it (``lab.gamespec.load_resume``); its human seats get new join codes."""
    import asyncio as _asyncio

    from lab.gamespec import SetupError, load_resume
    from saves.store import Store, StoreError

    _checks(args)
    fill = _lobby_fill(args)
    path = db_path(args.db)
    if path != ":memory:" and not path.startswith("file:") and not os.path.exists(os.path.expanduser(path)):
        raise UserError(f"no save database at {path}; give --db PATH")

    async def load():
        try:
            store = await Store.open(path)
        except StoreError as exc:
            raise UserError(str(exc)) from None
        try:
            return await load_resume(store, args.resume, served=True)
        except SetupError as exc:
            raise UserError(str(exc)) from None
        finally:
            await store.close()

    r = _asyncio.run(load())
    if len(r.agents) != r.task.num_agents or "human" not in r.agents:
        raise UserError(f"game {r.game_id[:8]} has no human seat to serve")
    return r.task, r.agents, r.config, fill, (r.game_id, r.upto), r.llm


def _options(args: argparse.Namespace):
    from lab.gamespec import SetupError, resolve_task
    from personas.spec import AgentsSpec, PersonaSpecError, SeatSpec

    _checks(args)
    channels = game_options(args)
    try:
        task = resolve_task(args.task)
    except SetupError as exc:
        raise UserError(f"--task {exc}" if str(exc).startswith("'") else str(exc)) from None
    try:
        seats = AgentsSpec.parse(args.agents).for_seats(task.num_agents)
    except PersonaSpecError as exc:
        raise UserError(str(exc)) from None
    if not any(s.kind == "human" for s in seats):
        raise UserError("--agents has no 'human' seat to serve; e.g. human,imap,human,imap,imap")
    if any(s.bare_llm for s in seats):
        raise UserError("a bare 'llm' seat needs a model: name it llm:MODEL")
    fill = None
    if args.lobby_fill.strip().lower() != "cancel":
        fill_seat = SeatSpec.parse(args.lobby_fill)
        if fill_seat.kind != "scripted":
            raise UserError("--lobby-fill takes a scripted persona (imap, sdmap, dsm-welfare, dsm-private, passive) "
                            "or 'cancel'")
        fill = fill_seat.name
    return task, [s.name for s in seats], channels, fill


def handle(args: argparse.Namespace) -> int:
    if args.study:
        return _handle_study(args)
    if args.participants:
        raise UserError("--participants goes with --study PATH")
    resume, saved_llm = None, {}
    if args.resume:
        if args.agents or args.task:
            raise UserError("--resume continues a saved table with its own seats and task; drop --agents / --task")
        task, names, config, fill, resume, saved_llm = _resumed(args)
    elif not args.agents or not args.task:
        raise UserError("give --agents SPEC and --task REF (one table), or --study PATH (a study's participants)")
    else:
        task, names, channels, fill = _options(args)
    from engine.gameid import game_id
    from lab.gamespec import close_pools, game_config
    from lab.server import ServerLimits, TableServer
    from lab.table import Table
    from personas.registry import make_personas
    from saves.lease import LeaseHeld
    from saves.store import Store, StoreError

    from personas.spec import AgentsSpec

    from .run import build_llm_settings

    llm, per_seat = build_llm_settings(args, AgentsSpec.of_names(names))  # (None, None) without llm seats
    if resume is not None and saved_llm:  # each LLM seat of a resumed table: the settings it was saved with
        per_seat = {**(per_seat or {}), **saved_llm}

    def make_persona(name: str, seat: int):
        return make_personas(name, 1, llm=(per_seat or {}).get(seat, llm))[0]

    if resume is None:
        config = game_config(max_turns=args.max_turns, channels=channels)
    path = db_path(args.db)

    async def main() -> int:
        try:
            store = await Store.open(path)
        except StoreError as exc:
            raise UserError(str(exc)) from None
        def on_takeover(seat: int, words: str) -> None:
            print(f"Note: {plain(words)}; the first one was told, and the takeover is recorded in the game.",
                  file=sys.stderr, flush=True)

        gid = resume[0] if resume else game_id("calbench-serve", deterministic=False)
        table = Table(task, names, config, game_id=gid, store=store, resume_upto=resume[1] if resume else None,
                      hold_seconds=args.hold, lobby_wait=args.lobby_wait, lobby_fill=fill,
                      extra_config={"app": "calbench-serve"}, make_persona=make_persona, on_takeover=on_takeover,
                      send_timeout=args.send_timeout)
        web = None
        if not args.no_web:
            try:
                from calbench_tui.web import WebFront
            except ImportError:
                await store.close()
                raise UserError("the browser page needs textual-serve (pip install textual-serve), "
                                "or use --no-web") from None
            web = WebFront(host=args.host, port=args.port, codes={c["code"] for c in table.codes()},
                           public_url=args.public_url, max_per_client=args.max_sessions_per_address)
        server = TableServer([table], host=args.host, port=args.port,
                             limits=ServerLimits(send_timeout=args.send_timeout),
                             extra_routes=web.add_routes if web is not None else None)
        if web is not None:  # --linger waits for browser sessions too, not only the table's sockets
            server.extra_connections = lambda: web.sessions
        try:
            await server.start()
        except OSError as exc:
            await store.close()
            raise UserError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
        if web is not None:
            web.table_url = server.url  # known only now when --port 0 picked a free port
        _announce(args, server, table)
        me = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, me.cancel)
        try:
            try:
                outcome = await table.run()
            except LeaseHeld as exc:  # another live process plays this game: nothing was written
                raise UserError(f"cannot serve it: {exc}") from None
            if outcome is None:
                print("The table was cancelled: not every seat was taken in time (recorded).", file=sys.stderr)
            else:
                print(f"Game {plain(table.game_id)} {outcome.status}"
                      + (f": {plain(outcome.error)}" if outcome.error else "") + ". It is saved.", file=sys.stderr)
                await _linger(server, args.linger)
            return 0 if outcome is not None and outcome.status == "completed" else 1
        except asyncio.CancelledError:
            if table.status == "stopped":
                print(f"Stopped. Game {plain(table.game_id)} is saved as stopped.", file=sys.stderr)
            elif table.status == "over":  # while lingering: the game's end was reported above
                print("Stopped.", file=sys.stderr)
            else:
                print("Stopped before the game started: nothing was played or saved.", file=sys.stderr)
            return 130
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            await server.stop()
            await store.close()
            await close_pools(llm, *(per_seat or {}).values())

    return asyncio.run(main())


def _participant_ids(raw: str | None) -> list[str]:
    if not raw or not raw.strip():
        raise UserError("--study needs --participants: ids (P01,P02) or a count (12)")
    text = raw.strip()
    if text.isdigit():
        n = int(text)
        if not 1 <= n <= 1000:
            raise UserError(f"--participants {n}: serve 1 to 1000 participants at a time")
        return [f"P{i:03d}" for i in range(1, n + 1)]
    ids = [p.strip() for p in text.split(",")]
    from engine.inputs import MAX_ID_CHARS, printable

    bad = [p for p in ids if not p or not p.replace("-", "").replace("_", "").isalnum() or p.startswith("sim-")
           or len(p) > MAX_ID_CHARS]
    if bad:
        raise UserError(f"--participants: {printable(bad[0], 48)!r} is not an id; use letters, digits, '-' or '_', "
                        f"at most {MAX_ID_CHARS} (ids starting 'sim-' are for simulated participants)")
    if len(set(ids)) != len(ids):
        raise UserError("--participants names an id twice")
    return ids


def _handle_study(args: argparse.Namespace) -> int:
    """Serve a study: one private link per participant, each opening their whole session in a browser."""
    from pathlib import Path

    from lab.study.model import StudyFileError, load_study
    from lab.server import TableServer

    if args.agents or args.task:
        raise UserError("--study serves the study's own conditions; drop --agents / --task")
    if args.no_web:
        raise UserError("--study serves participants in the browser; drop --no-web "
                        "(or run 'calbench study run' at each terminal)")
    _check_address(args)
    try:
        study = load_study(args.study)
    except (StudyFileError, OSError) as exc:
        raise UserError(str(exc).splitlines()[0]) from None
    pool_param = study.pool.id_param
    ids = _participant_ids(args.participants)
    import re

    off = [p for p in ids if not re.fullmatch(study.study.participant_pattern, p)]
    if off:  # each link runs 'study run', which would refuse the id: say so now
        raise UserError(f"--participants: {off[0]!r} does not match the study's participant_pattern "
                        f"{study.study.participant_pattern!r}")
    try:
        from calbench_tui.web import WebFront
    except ImportError:
        raise UserError("serving a study needs textual-serve (pip install textual-serve)") from None
    study_path, db = str(Path(args.study).resolve()), str(Path(db_path(args.db)).resolve())
    key = _link_key(db)
    links = {study_link(key, study.name, pid): pid for pid in ids}  # the same links after a restart

    async def main() -> int:
        web = WebFront(host=args.host, port=args.port, study=(study_path, db), participants=links,
                       public_url=args.public_url, max_per_client=args.max_sessions_per_address,
                       pool_param=pool_param)
        server = TableServer([], host=args.host, port=args.port, extra_routes=web.add_routes)
        try:
            await server.start()
        except OSError as exc:
            raise UserError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
        base = _web_base(args, server)
        rows = [{"participant": pid, "code": code, "link": f"{base}?code={code}"}
                for code, pid in links.items()]
        if args.json:
            print(json.dumps({"web": base, "study": study_path, "participants": rows}), flush=True)
        else:
            print(f"Serving study {plain(args.study)} on {base} (database {plain(db)})")
            for r in rows:
                print(f"  {plain(r['participant'])}: {r['link']}")
            print("Give each participant their own link. 'calbench study status' shows where everyone is; "
                  "ctrl+c stops the server (each session resumes at its step when its link is opened again).",
                  flush=True)
        me = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, me.cancel)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            print("Stopped. Every participant's progress is saved.", file=sys.stderr)
            return 130
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            await server.stop()
        return 0

    return asyncio.run(main())


def _link_key(db: str) -> bytes:
    """The secret the study links are derived from, kept next to the database (``DB.links-key``,
    readable by its owner only); made on first use.  Without it nobody can work out a link
    from a study name and a participant id."""
    from pathlib import Path

    path = Path(db + ".links-key")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UserError(f"cannot create the study links' key {path}: {exc.strerror or exc}") from None
    else:
        with os.fdopen(fd, "w") as fh:
            fh.write(os.urandom(32).hex() + "\n")
    try:
        text = path.read_text(encoding="ascii").strip()
        key = bytes.fromhex(text)
    except (OSError, ValueError, UnicodeDecodeError):
        raise UserError(f"the study links' key {path} is unreadable; remove it to make a new one "
                        "(every participant's link then changes)") from None
    if len(key) < 16:
        raise UserError(f"the study links' key {path} is too short; remove it to make a new one")
    return key


def study_link(key: bytes, study: str, participant: str) -> str:
    """A participant's link code: derived from the study and the participant with a secret key
    (HMAC-SHA256), so it is the same every time the study is served, 17 URL-safe characters
    (about 101 bits), never starting with '-'."""
    import base64
    import hashlib
    import hmac
    import string

    digest = hmac.new(key, f"calbench-study-link\0{study}\0{participant}".encode(), hashlib.sha256).digest()
    first = (string.ascii_letters + string.digits)[digest[0] % 62]
    return first + base64.urlsafe_b64encode(digest[1:13]).decode()


async def _linger(server, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while server.connections > 0 and loop.time() < end:
        await asyncio.sleep(0.5)


def _announce(args, server, table) -> None:
    seats = table.codes()
    if args.json:
        print(json.dumps({"url": server.url, "web": None if args.no_web else _web_base(args, server),
                          "game_id": table.game_id, "seats": seats}), flush=True)
        return
    web = _web_base(args, server)
    print(f"Serving game {plain(table.game_id)} on {server.url}" + ("" if args.no_web else f" and {web}"))
    for s in seats:
        line = f"  seat {s['seat']}: calbench-play --join {server.url} --code={s['code']}"
        if not args.no_web:
            line += f"   or   {web}?code={s['code']}"
        print(line)
    print("Waiting for every seat to be taken; ctrl+c stops the server (the game stays saved).", flush=True)
