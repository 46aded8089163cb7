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

from engine import protocols

from . import ArgumentParser, UserError, add_db_option, db_path, game_options, require_terminal, seed_arg


def code_argv(argv: list[str]) -> list[str]:
    """``--code -AbC`` as ``--code=-AbC``: argparse reads a value starting with ``-`` as an option."""
    out = list(argv)
    for i, a in enumerate(out[:-1]):
        if a == "--code" and out[i + 1].startswith("-") and not out[i + 1].startswith("--"):
            out[i:i + 2] = [f"--code={out[i + 1]}"]
            break
    return out


def build_parser() -> argparse.ArgumentParser:
    from lab.launch import CODE_ENV  # the environment variable a join code may be given in

    p = ArgumentParser(
        prog="calbench-play",
        description="Play one seat of a CalBench game in the terminal: talk, propose, decide, and see how "
                    "you did against the oracle.",
        epilog="Example: 'calbench-play --seat 2' (IMAP bots on the other seats, DMs only). "
               "ctrl+q quits at any time and the game stays saved; '--resume GAME' continues it.",
    )
    p.add_argument("--seat", type=int, metavar="N", help="your seat (0..N-1); without it a setup screen opens")
    p.add_argument("--agents", metavar="SPEC",
                   help=f"personas for the other seats: one name for all "
                        f"({', '.join(protocols.seat_names(variants=False))}, llm:MODEL) or a comma list with one "
                        f"entry per seat (default: {protocols.default_seat()})")
    p.add_argument("--task", metavar="REF",
                   help="task reference: seed:7, canonical:12, FILE.jsonl[:ID] (default: a new generated scenario)")
    p.add_argument("--seed", type=seed_arg, metavar="N", help="seed of the generated scenario (default: random)")
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


def _handle_join(args: argparse.Namespace) -> int:
    from calbench_tui.app import make_app
    from calbench_tui.settings import Settings
    from lab.gamespec import SetupError
    from lab.launch import prepare_join

    local = [f"--{n.replace('_', '-')}" for n in ("seat", "agents", "task", "seed", "resume", "base_url")
             if getattr(args, n) is not None] + (["--setup"] if args.setup else [])
    try:
        join = prepare_join(args.join, local_options=local, code=args.code, code_file=args.code_file)
    except SetupError as exc:
        raise UserError(str(exc)) from None
    app = make_app(settings=Settings(join=join.url, code=join.code, keymap=_keymap(args),
                                     show_help=args.help_screen or not args.no_intro))
    _run_app(app)
    if app.error:  # the table ended the seat: opened elsewhere, cancelled, or stopped by the host
        print(f"The table closed your seat: {app.error}.")
    elif app.status in ("running", "stopped"):
        print(f"You left the table. Rejoin with: calbench-play --join {join.url} --code={app.settings.code or 'CODE'}")
    return 0


def _run_app(app) -> None:
    """Run the full-screen app (a terminal is needed); a mistake it found (code 2) is one line."""
    require_terminal("calbench-play")
    app.run()
    if app.error and app.return_code == 2:
        raise UserError(app.error)


def handle(args: argparse.Namespace) -> int:
    if args.list_keys:
        return _list_keys(args)
    if args.join is not None:
        return _handle_join(args)
    if args.code or args.code_file:
        raise UserError("--code goes with --join URL")

    from calbench_tui.app import make_app
    from lab.gamespec import SetupError
    from lab.launch import prepare_play

    settings = _settings(args)
    llm, per_seat, overrides = _llm_settings(args)  # used only by llm seats (also those of a resumed game)
    store_path = db_path(args.db)
    try:
        launch = prepare_play(seat=args.seat, task_ref=args.task, resume=args.resume, agents=args.agents,
                              db=store_path, llm=llm, per_seat=per_seat, overrides=overrides)
    except SetupError as exc:
        raise UserError(str(exc)) from None
    app = make_app(settings=settings, task=launch.task, llm=llm, store_path=store_path)
    app.resume_endpoints_checked = launch.resume_checked  # the app does not ask the endpoints a second time
    app.llm_per_seat = per_seat  # --personas: seats with their own model, endpoint and sampling
    app.llm_overrides = overrides  # --resume: LLM options given again replace the saved ones
    _run_app(app)
    if app.game_id and app.status in ("stopped", "running"):
        print(f"Game {app.game_id} saved as stopped. Continue it with: {resume_command(app.game_id, args.db)}")
    elif app.game_id and app.status == "completed":
        print(f"Game {app.game_id} saved. Replay it with: calbench replay {app.game_id[:8]}")
    return 0


def _keymap(args: argparse.Namespace):
    """The key bindings of --keys (or keys.toml), as a one-line error when the file is wrong."""
    from calbench_tui.app import binding_ids
    from calbench_tui.settings import SettingsError, load_keymap

    try:
        return _no_conflicts(load_keymap(args.keys, binding_ids()), args)
    except SettingsError as exc:
        raise UserError(str(exc)) from None


def _no_conflicts(keymap: dict[str, str], args: argparse.Namespace) -> dict[str, str]:
    """``keymap``, unless it gives one key to two actions of a screen (one line)."""
    from calbench_tui.app import keymap_conflicts

    clash = keymap_conflicts(keymap)
    if clash:
        from calbench_tui.settings import keys_path

        raise UserError(f"keys file {args.keys or keys_path()}: {clash[0]}; give one of them another key")
    return keymap


def _settings(args: argparse.Namespace):
    """The app's ``Settings`` from the options (channels and key bindings read as one-line errors)."""
    from calbench_tui.settings import Settings

    channels = game_options(args)
    return Settings(
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
        keymap=_keymap(args),
        llm_available=bool(args.base_url or os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")),
    )


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
        keymap = _no_conflicts(load_keymap(args.keys, [r[0] for r in rows]), args)
    except SettingsError as exc:
        raise UserError(str(exc)) from None
    from calbench_tui.keys import key_name

    print(f"{'id':<24} {'keys':<22} what it does")
    for ident, keys, desc in rows:
        shown = ", ".join(key_name(k) for k in keymap.get(ident, keys).split(","))
        print(f"{ident:<24} {shown:<22} {desc}")
    print("\nRemap in keys.toml ([keys] id = \"key,key\"), e.g.  end_turn = \"ctrl+t\"")
    return 0


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
