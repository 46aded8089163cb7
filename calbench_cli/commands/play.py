"""``calbench-play``: play one seat of a game in the terminal.

``calbench-play --seat 2`` starts at once with the defaults a first-time player can follow:
a freshly generated 5-seat scenario (``--seed`` or a random one; ``--cost uniform`` unless
told otherwise), IMAP bots on the other seats, DMs only.  Without ``--seat`` a setup
screen asks for the task, the seat, a persona per seat and the channels.

Wired by ``calbench_cli.cli.play_main``; Textual and the engine are imported inside
:func:`handle`, so ``calbench-play --help`` answers at once.
"""

from __future__ import annotations

import argparse
import os

from . import ArgumentParser, UserError, add_db_option, check_db, db_path, game_options, require_terminal


#: The environment variable a join code may be given in (the browser page's app processes
#: get their code this way, so it never shows in the process list).
CODE_ENV = "CALBENCH_JOIN_CODE"


def code_argv(argv: list[str]) -> list[str]:
    """``--code -AbC`` as ``--code=-AbC``: argparse reads a value starting with ``-`` as an option."""
    out = list(argv)
    for i, a in enumerate(out[:-1]):
        if a == "--code" and out[i + 1].startswith("-") and not out[i + 1].startswith("--"):
            out[i:i + 2] = [f"--code={out[i + 1]}"]
            break
    return out


def _join_code(args: argparse.Namespace) -> str | None:
    """The code from --code, --code-file or the environment (in that order); None to ask on screen."""
    if args.code:
        return args.code.strip() or None
    if args.code_file:
        try:
            with open(args.code_file, encoding="utf-8") as fh:
                text = fh.read(4096)
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"--code-file {args.code_file}: cannot read it ({getattr(exc, 'strerror', None) or exc})")
        lines = text.strip().splitlines()
        if not lines:
            raise UserError(f"--code-file {args.code_file} is empty")
        return lines[0].strip()
    env = os.environ.get(CODE_ENV, "").strip()
    return env or None


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="calbench-play",
        description="Play one seat of a CalBench game in the terminal: talk, propose, decide, and see how "
                    "you did against the oracle.",
        epilog="Example: 'calbench-play --seat 2' (IMAP bots on the other seats, DMs only). "
               "ctrl+q quits at any time and the game stays saved; '--resume GAME' continues it.",
    )
    p.add_argument("--seat", type=int, metavar="N", help="your seat (0..N-1); without it a setup screen opens")
    p.add_argument("--agents", metavar="SPEC",
                   help="personas for the other seats: one name for all (imap, sdmap, dsm-welfare, dsm-private, "
                        "llm:MODEL) or a comma list with one entry per seat (default: imap)")
    p.add_argument("--task", metavar="REF",
                   help="task reference: seed:7, canonical:12, FILE.jsonl[:ID] (default: a new generated scenario)")
    p.add_argument("--seed", type=int, metavar="N", help="seed of the generated scenario (default: random)")
    p.add_argument("--cost", choices=("uniform", "varied"), default="uniform",
                   help="costs of a generated scenario (default: uniform)")
    p.add_argument("--channel", default="dm", metavar="dm|participant|all|...",
                   help="message channels, combined with commas: dm (default), participant, all, or 'every'")
    p.add_argument("--resume", metavar="GAME", help="continue a stopped game (an id or a unique prefix)")
    p.add_argument("--setup", action="store_true", help="open the setup screen even when --seat is given")
    p.add_argument("--max-turns", type=int, default=15, metavar="N", help="talk turns per round: every speaker once per turn (default 15)")
    p.add_argument("--keys", metavar="PATH", help="key bindings file (default: calbench/keys.toml in your config dir)")
    p.add_argument("--no-intro", action="store_true",
                   help="don't open the instructions at the start of every game (they open by default: in a "
                        "study every participant gets them; ? shows them at any time)")
    p.add_argument("--help-screen", action="store_true", help=argparse.SUPPRESS)  # (the default now)
    p.add_argument("--list-keys", action="store_true",
                   help="print every key binding (id, keys, what it does) for a keys.toml, and exit")
    p.add_argument("--join", metavar="URL",
                   help="play a seat of a table served elsewhere ('calbench serve'): ws://HOST:PORT/table "
                        "(http://HOST:PORT works too)")
    p.add_argument("--code", metavar="CODE",
                   help="the join code of your seat (asked for on screen if missing); --code=CODE works for "
                        "any code. To keep it out of the process list, use --code-file or the environment "
                        f"variable {CODE_ENV}")
    p.add_argument("--code-file", metavar="PATH", help="read the join code from this file (its first line)")
    add_db_option(p)
    from .llm import add_llm_arguments

    add_llm_arguments(p)  # the same LLM options as 'calbench run' and 'calbench serve' (one parser)
    return p


def join_url(raw: str) -> str:
    """``ws://HOST:PORT/table`` from what a participant may paste (http links, a bare host:port)."""
    from urllib.parse import urlsplit, urlunsplit

    text = raw.strip()
    if "://" not in text:
        text = "ws://" + text
    parts = urlsplit(text)
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme.lower())
    if scheme is None or not parts.hostname:
        raise UserError(f"--join {raw!r} is not a table address; expected ws://HOST:PORT/table")
    try:
        parts.port
    except ValueError:
        raise UserError(f"--join {raw!r} has a bad port") from None
    path = parts.path if parts.path not in ("", "/") else "/table"
    return urlunsplit((scheme, parts.netloc, path, "", ""))


def _handle_join(args: argparse.Namespace) -> int:
    from calbench_tui.app import binding_ids, make_app
    from calbench_tui.settings import Settings, SettingsError, load_keymap

    url = join_url(args.join)
    local = [f"--{n.replace('_', '-')}" for n in ("seat", "agents", "task", "seed", "resume", "base_url")
             if getattr(args, n) is not None] + (["--setup"] if args.setup else [])
    if local:
        raise UserError(f"{', '.join(local)} set up a game on this machine; with --join the table decides "
                        "(leave them out)")
    code = _join_code(args)
    try:
        keymap = load_keymap(args.keys, binding_ids())
    except SettingsError as exc:
        raise UserError(str(exc)) from None
    app = make_app(settings=Settings(join=url, code=code, keymap=keymap,
                                     show_help=args.help_screen or not args.no_intro))
    require_terminal("calbench-play")
    app.run()
    if app.error and app.return_code == 2:
        raise UserError(app.error)
    if app.error:  # the table ended the seat: opened elsewhere, cancelled, or stopped by the host
        print(f"The table closed your seat: {app.error}.")
    elif app.status in ("running", "stopped"):
        print(f"You left the table. Rejoin with: calbench-play --join {url} --code={app.settings.code or 'CODE'}")
    return 0


def handle(args: argparse.Namespace) -> int:
    from calbench_tui.settings import Settings, SettingsError, load_keymap, seed_of_ref

    if args.list_keys:
        return _list_keys(args)

    if args.join is not None:
        return _handle_join(args)
    if args.code or args.code_file:
        raise UserError("--code goes with --join URL")

    if args.seat is not None and args.seat < 0:
        raise UserError(f"--seat must be 0 or more, not {args.seat}")
    channels = game_options(args)

    from calbench_tui.app import binding_ids, make_app

    try:
        keymap = load_keymap(args.keys, binding_ids())
    except SettingsError as exc:
        raise UserError(str(exc)) from None

    task = None
    if args.task and seed_of_ref(args.task) is not None and not args.resume:
        if args.seat is not None and args.seat >= 5:  # a generated scenario (with --cost), built by the app
            raise UserError(f"--seat {args.seat} does not exist: a generated scenario has seats 0-4")
    elif args.task and not args.resume:
        from engine.model import TaskError
        from engine.taskref import TaskRefError, hydrate_labels, resolve_tasks

        try:
            tasks = resolve_tasks(args.task)
        except (TaskRefError, TaskError, OSError) as exc:
            raise UserError(str(exc)) from None
        if len(tasks) != 1:
            raise UserError(f"--task {args.task!r} names {len(tasks)} tasks; name one (e.g. canonical:7)")
        task = hydrate_labels(tasks[0])
        if args.seat is not None and args.seat >= task.num_agents:
            raise UserError(f"--seat {args.seat} does not exist: the task has seats 0-{task.num_agents - 1}")
    elif args.seat is not None and args.seat >= 5 and not args.resume:
        raise UserError(f"--seat {args.seat} does not exist: a generated scenario has seats 0-4")

    llm_available = bool(args.base_url or os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))
    llm, per_seat, overrides = _llm_settings(args)  # used only by llm seats (also those of a resumed game)
    if args.agents and _spec_uses_llm(args.agents):
        _check_llm_key(llm)  # an llm seat without a key: one line now, not a failure at every turn
        for st in per_seat.values():
            _check_llm_key(st)

    settings = Settings(
        seat=args.seat,
        agents=args.agents,
        task=args.task,
        seed=args.seed,
        cost=args.cost,
        channels=channels,
        db=args.db,
        base_url=args.base_url,
        resume=args.resume,
        max_turns_per_round=args.max_turns,
        show_help=args.help_screen or not args.no_intro,
        setup=args.setup or (args.seat is None and not args.resume),
        keymap=keymap,
        llm_available=llm_available,
    )
    store_path = db_path(args.db)
    check_db(store_path)  # a bad --db is one line here, not a traceback from inside the app
    checked = False
    if args.resume:  # before the screen opens: an LLM endpoint of the saved game that does not answer is one line
        checked = check_resume_endpoints(args.resume, store_path, llm, overrides)
    app = make_app(settings=settings, task=task, llm=llm, store_path=store_path)
    app.resume_endpoints_checked = checked  # the app does not ask the endpoints a second time
    app.llm_per_seat = per_seat  # --personas: seats with their own model, endpoint and sampling
    app.llm_overrides = overrides  # --resume: LLM options given again replace the saved ones
    require_terminal("calbench-play")
    app.run()
    if app.error and app.return_code == 2:
        raise UserError(app.error)
    if app.game_id and app.status in ("stopped", "running"):
        print(f"Game {app.game_id} saved as stopped. Continue it with: {resume_command(app.game_id, args.db)}")
    elif app.game_id and app.status == "completed":
        print(f"Game {app.game_id} saved. Replay it with: calbench replay {app.game_id[:8]}")
    return 0


def check_resume_endpoints(game: str, db: str, llm, overrides: dict | None = None) -> bool:
    """Refuse (UserError, one line) to resume a game another process plays, one served to
    remote players, or one whose LLM seats' endpoints do not answer (``lab.gamespec.load_resume``);
    True when the game was found and checked.

    An unknown id is left to the app, which says so in its own words."""
    from lab.gamespec import SetupError, load_resume

    from . import with_store

    async def main(store):
        try:
            await store.load_trace(game)
        except Exception:
            return False
        try:
            await load_resume(store, game, llm=llm, overrides=overrides, served=False, db=db or None)
        except SetupError as exc:
            raise UserError(str(exc)) from None
        return True

    if db != ":memory:" and not db.startswith("file:") and not os.path.exists(db):
        return False
    return bool(with_store(db, main))


def resume_command(game_id: str, db: str | None = None) -> str:
    """The full command that continues a stopped game: its id and, when one was given, the
    database.  LLM seats need nothing more: their endpoints, models and settings are saved
    with the game (never a key: that stays in its environment variable)."""
    import shlex

    parts = ["calbench-play", "--resume", game_id[:8]]
    if db:
        parts += ["--db", db]
    return shlex.join(parts)


def _list_keys(args: argparse.Namespace) -> int:
    """Every binding id with its keys (as remapped by --keys / keys.toml) and what it does."""
    from calbench_tui.app import binding_table
    from calbench_tui.settings import SettingsError, load_keymap

    rows = binding_table()
    try:
        keymap = load_keymap(args.keys, [r[0] for r in rows])
    except SettingsError as exc:
        raise UserError(str(exc)) from None
    from calbench_tui.keys import key_name

    print(f"{'id':<24} {'keys':<22} what it does")
    for ident, keys, desc in rows:
        shown = ", ".join(key_name(k) for k in keymap.get(ident, keys).split(","))
        print(f"{ident:<24} {shown:<22} {desc}")
    print("\nRemap in keys.toml ([keys] id = \"key,key\"), e.g.  end_turn = \"ctrl+t\"")
    return 0


def _spec_uses_llm(spec: str) -> bool:
    from personas.spec import AgentsSpec, PersonaSpecError

    try:
        return AgentsSpec.parse(spec).uses_llm
    except PersonaSpecError:  # an empty spec: the app says so
        return False


def _check_llm_key(llm) -> None:
    """The same start-up checks as ``calbench run``: a usable endpoint URL and a key (or a local endpoint)."""
    from personas.llm.settings import LLMConfigError

    try:
        llm.check_base_url()
        llm.resolve_api_key()
    except LLMConfigError as exc:
        raise UserError(str(exc)) from None


def _llm_settings(args: argparse.Namespace):
    """``(settings for llm seats, {seat: settings} from --personas, options given)``: the shared
    LLM options of ``commands/llm.py`` (the same parser as ``calbench run`` and ``serve``).
    The key is read from the environment when a seat first calls, never stored.  A malformed
    option (``--base-url``, ``--timeout``, a personas file) is refused here, whatever the seats."""
    try:
        from personas.llm.settings import LLMSettings  # noqa: F401
    except ImportError:
        raise UserError("llm seats are not available in this build") from None
    from .llm import given_llm_options, settings_from_args

    given = given_llm_options(args)
    base, per_seat = settings_from_args(args, check_keys=False)
    # at --resume, what the person typed again replaces the saved settings (a moved endpoint, a
    # longer --timeout for a slow model); the model of each seat stays the saved one
    overrides = {k: v for k, v in given.items() if k not in ("concurrency", "model", "variant")}
    return base, per_seat or {}, overrides
