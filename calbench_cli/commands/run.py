"""``calbench run``: play a suite headless, save every game, print the paper's Table 2.

    calbench run --tasks canonical --agents imap
    calbench run --tasks tasks.jsonl --agents imap,imap,dsm-welfare,imap,imap --json
    calbench run --tasks canonical --agents llm:gpt-4o-mini --base-url http://localhost:8000/v1 \\
                 --api-key-env OPENAI_API_KEY --concurrency 8

Progress goes to stderr; the table (or, with ``--json``, one JSON document) to stdout.
Exit status: 0; 2 for a usage mistake; 1 when some game had infrastructure failures
(``seat_timeout`` events: an LLM endpoint unreachable, rate limited or failing) or context
overflows (``context_overflow`` events: configuration) — the table and JSON are still
printed, with ``infra_failures`` / ``config_failures`` / ``agent_failures`` per game and per row.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from personas.spec import AgentsSpec

from calbench_tui.safe_text import cell, markup, plain
from . import UserError, add_db_option, db_path, game_options

def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="play a suite of tasks headless and print Table 2 (coordination, excess, messages, fairness, VPS)",
        description="Play every task of a suite with the given personas, save each game to the "
                    "database, and print a summary table split by cost setting.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  calbench run --tasks canonical --agents imap\n"
               "  calbench run --tasks canonical:0-9 --agents imap,imap,dsm-welfare,imap,imap --json\n"
               "  calbench run --tasks tasks.jsonl --agents sdmap --shard 1/2 --db part1.db\n"
               "  calbench run --tasks tasks.jsonl --agents llm:MODEL --executor ray --address auto\n",
    )
    p.add_argument("--tasks", required=True, metavar="REF",
                   help="task reference: canonical, canonical:0-9, seed:7, FILE.jsonl, FILE.jsonl:ROW_OR_ID, FILE.json")
    p.add_argument("--agents", required=True, metavar="SPEC",
                   help="one persona for every seat (imap) or a comma list with one per seat "
                        "(imap,imap,dsm-welfare,imap,imap)")
    p.add_argument("--concurrency", type=int, default=None, metavar="K",
                   help="games in flight at once. LLM seats: K games in one process (default 4). "
                        "Scripted suites are CPU-bound: K processes, at most one per CPU (default: one "
                        "per CPU for 16 tasks or more, else 1)")
    add_db_option(p)
    p.add_argument("--resume", action="store_true",
                   help="skip tasks already completed in the database with the same agents and settings "
                        "(the table and --json still cover the whole suite); rerun games a crash left "
                        "running, marking the old ones stopped")
    p.add_argument("--shard", metavar="I/N", default=None,
                   help="run only every N-th task starting at the I-th (1-based), to split a suite across machines")
    p.add_argument("--json", action="store_true", help="print games and summary as JSON on stdout")
    p.add_argument("--keep-going", action="store_true",
                   help="exit 0 even when some game failed (crashed and was saved as failed); by default a "
                        "failed game makes the run exit 1 after everything is saved and printed")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="where games are played: local (this machine: worker processes for scripted "
                        "suites, asyncio for LLM seats) or ray (Ray tasks on a cluster). Either way this "
                        "process is the only writer of the database. Ray is optional: pip install "
                        "'calbench[ray]'")
    p.add_argument("--address", metavar="auto|ray://HOST:PORT", default=None,
                   help="with --executor ray: the cluster to join (auto: the one this machine belongs to; "
                        "ray://HOST:PORT: through Ray Client). Default: start a Ray instance on this machine")

    g = p.add_argument_group("game settings")
    g.add_argument("--channel", default="dm", metavar="LIST",
                   help="message channels, combined with commas: dm (default), participant, all, or 'every'")
    g.add_argument("--max-turns", type=int, default=15, metavar="N", help="cheap-talk turns per round (default 15)")
    g.add_argument("--retries", type=int, default=3, metavar="N", help="decision retries after a rejected batch (default 3)")
    g.add_argument("--deterministic", action="store_true",
                   help="logical clock and game ids derived from the inputs (byte-identical traces)")
    g.add_argument("--fidelity", choices=("ours", "paper"), default=None,
                   help="how the DSM and SD-MAP bots play: ours (default) or paper — as the authors' code "
                        "does: DSM-Private announces a failed offer anyway and a seat that cannot take it books "
                        "another slot (a ghost meeting); DSM-Welfare makes one round of offers; SD-MAP decides "
                        "on what it read at its turns, so a short --max-turns leaves confirms unread. "
                        "A personas file may say fidelity = \"paper\" too. See docs/protocols-dsm.md and "
                        "docs/protocols.md")

    from .llm import add_llm_arguments

    add_llm_arguments(p)  # --base-url, --api-key-env, --personas, --temperature, ..., --llm-retries
    j = p.add_argument_group("LLM judge (paper I.2; optional, measurement only)")
    j.add_argument("--judge", metavar="MODEL", default=None,
                   help="after each game, have MODEL read every message and rate the sender's slots it reveals; "
                        "stored as judge_vps beside the VPS and the reflection VPS")
    j.add_argument("--judge-base-url", metavar="URL", default=None,
                   help="the judge's endpoint (default: --base-url, else $OPENAI_BASE_URL, else OpenAI)")
    j.add_argument("--judge-api-key-env", metavar="NAME", default=None,
                   help="environment variable holding the judge's key (default: --api-key-env's)")
    p.set_defaults(handler=handle)


# ---------------------------------------------------------------------------------------
def build_llm_settings(args, spec: AgentsSpec | str):
    """(LLMSettings, {seat: LLMSettings} from --personas or None) for a spec with LLM seats, else (None, None).

    The options are the shared ones of ``commands/llm.py`` (``add_llm_arguments``).
    """
    from .llm import given_llm_options, settings_from_args

    if not AgentsSpec.parse(spec).uses_llm:
        if given_llm_options(args) or args.personas:
            print("calbench: note: LLM options are ignored: no seat of --agents is an LLM", file=sys.stderr)
        return None, None
    base, per_seat = settings_from_args(args)
    return base, (per_seat or None)


def build_judge_settings(args, llm):
    """``LLMSettings`` of the ``--judge`` model (temperature 0), or None; its endpoint and key
    are checked at start-up like the seats'."""
    if getattr(args, "judge", None) is not None and not args.judge.strip():
        raise UserError("--judge '' names no model; give the judge's model name, e.g. --judge gpt-4o-mini, or leave "
                        "--judge out")
    if not getattr(args, "judge", None):
        if getattr(args, "judge_base_url", None) or getattr(args, "judge_api_key_env", None):
            raise UserError("--judge-base-url and --judge-api-key-env need --judge MODEL")
        return None
    from pydantic import ValidationError

    from personas.llm.settings import LLMConfigError, LLMSettings

    base_url = args.judge_base_url or args.base_url
    key_env = args.judge_api_key_env or args.api_key_env
    try:
        judge = LLMSettings(model=args.judge, temperature=0.0, max_tokens=400,
                            **({"base_url": base_url} if base_url else {}),
                            **({"api_key_env": key_env} if key_env else {}),
                            **({"concurrency": args.llm_concurrency} if args.llm_concurrency else {}))
        judge.check_base_url()
        judge.resolve_api_key()
    except ValidationError as exc:
        from .llm import validation_message

        raise UserError(validation_message(exc, {"judge_base_url": "base_url",
                                                 "judge_api_key_env": "api_key_env"})) from None
    except LLMConfigError as exc:
        raise UserError(f"--judge: {exc}") from None
    return judge


def handle(args) -> int:
    from lab.gamespec import SetupError
    from lab.runner import RunError
    from lab.runplan import plan_run, play_run

    from ..progress import progress_bar

    try:
        plan = plan_run(args.tasks, args.agents, channels=game_options(args), max_turns=args.max_turns,
                        retries=args.retries, deterministic=args.deterministic, concurrency=args.concurrency,
                        executor=args.executor, address=args.address, shard=args.shard)
        llm, per_seat = build_llm_settings(args, plan.spec)
        result = play_run(plan, db=db_path(args.db), llm=llm, personas=per_seat,
                          judge=build_judge_settings(args, llm), fidelity=getattr(args, "fidelity", None),
                          personas_file=getattr(args, "personas", None), resume=args.resume,
                          progress_bar=progress_bar, notice=lambda line: print(plain(line), file=sys.stderr))
    except (SetupError, RunError) as exc:
        raise UserError(str(exc)) from None
    _print_result(args, result)
    return result.exit_code(keep_going=getattr(args, "keep_going", False))


def _print_result(args, result) -> None:
    """The table (or the JSON document) on stdout; a line on stderr per kind of failure."""
    if args.json:
        from engine.redact import redact

        doc = {"games": [g.to_json() for g in result.games], "summary": result.summary}
        sys.stdout.write(redact(json.dumps(doc)) + "\n")
    else:
        print_table(result.summary, result.games)
        if result.fidelity != "ours":
            print(f"fidelity: {result.fidelity} — DSM and SD-MAP seats play the authors' rules "
                  "(docs/protocols-dsm.md, docs/protocols.md)")
    if result.failed:
        print(f"calbench: {result.failed} game(s) failed; list them with 'calbench games --status failed --db "
              f"{result.db}' and read the error with 'calbench export GAME -o -'", file=sys.stderr)
    if result.infra:  # an endpoint down or failing: the numbers measure the infrastructure, not the agents
        print(f"calbench: {result.infra} game(s) had infrastructure failures (the LLM endpoint was unreachable, "
              "rate limited or failing); their scores do not measure the agents", file=sys.stderr)
    if result.config:  # the thread did not fit even trimmed: a setting to change, not the agent's fault
        print(f"calbench: {result.config} game(s) had context overflows (a seat's conversation did not fit its "
              "model's context window even with earlier rounds digested); use a longer-context model or lower "
              "--max-tokens", file=sys.stderr)


def print_table(summary: list[dict[str, Any]], games) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not summary:
        console.print("No games were played (all tasks already completed? drop --resume to run them again).")
        return
    table = Table(title="CalBench suite", title_justify="left")
    table.add_column("Method")
    table.add_column("N", justify="right")
    table.add_column("Coord.", justify="right")
    table.add_column("Excess", justify="right")
    table.add_column("Msgs.", justify="right")
    table.add_column("Fair.", justify="right")
    table.add_column("VPS", justify="right")
    # Failure columns only when some row has failures (scripted suites never do).
    fail_cols = [(key, title) for key, title in (("infra_failures", "Infra fail."), ("config_failures", "Config fail."),
                                                 ("agent_failures", "Agent fail."))
                 if any(row.get(key) for row in summary)]
    for _, title in fail_cols:
        table.add_column(title, justify="right")
    blank = [""] * (6 + len(fail_cols))
    mode = None
    for row in summary:
        if row["cost_mode"] != mode:
            mode = row["cost_mode"]
            table.add_row(f"[bold]{markup(mode.capitalize())} Cost[/bold]", *blank, end_section=False)
        n = str(row["games"]) + (f" (+{row['failed']} failed)" if row.get("failed") else "")
        table.add_row(
            cell(f"  {row['persona']}"), n,
            _fmt(row["coordination"], 100, "{:.1f}"), _fmt(row["excess"], 1, "{:.2f}"),
            _fmt(row["messages_per_meeting"], 1, "{:.2f}"), _fmt(row["fairness"], 1, "{:.3f}"),
            _fmt(row["vps"], 1, "{:.2f}"),
            *(str(row.get(key) or 0) for key, _ in fail_cols),
        )
    console.print(table)
    toks = [g.tokens for g in games if getattr(g, "tokens", None)]
    if toks:
        p_, c_, k_ = (sum(t[k] for t in toks) for k in ("prompt_tokens", "completion_tokens", "cached_tokens"))
        console.print(f"LLM tokens: {p_:,} prompt ({k_:,} cached), {c_:,} completion over {len(toks)} game(s); "
                      "'calbench report --prices FILE.toml' turns them into money.", highlight=False)
    console.print("Coord. = % of meetings scheduled; Excess and Fair. in cost levels per seat; "
                  "Msgs. = messages per scheduled participant-meeting; VPS per game.", style="dim")
    if fail_cols:
        console.print("Infra fail. = seat calls the endpoint could not answer (unreachable, rate limited, server "
                      "errors: seat_timeout events); Config fail. = context overflows; Agent fail. = unreadable or "
                      "invalid replies (parse_error events).", style="dim")


def _fmt(v, scale, pattern) -> str:
    return "–" if v is None else pattern.format(v * scale)
