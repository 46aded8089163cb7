"""``calbench study``: pilot studies from one TOML file (docs/study-guide.md).

    calbench study init PATH                      write an annotated example study file
    calbench study check PATH [--dry-run] [--json] validate, print the design; simulate one cycle
    calbench study run PATH --participant ID      one participant at this terminal
    calbench study status PATH [--json] [--watch] where every participant is
    calbench study export PATH --out DIR          tidy CSV files + codebook.md
    calbench study withdraw PATH --participant ID delete a participant's data everywhere

The logic lives in ``lab/study/`` (no Textual); this module parses and prints.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import UserError, add_db_option, db_path, with_store


def register(sub) -> None:
    p = sub.add_parser("study", help="pilot studies: design, simulate, run participants, monitor, export",
                       description="Pilot studies with people at the table: one TOML file describes conditions, "
                                   "tasks, counterbalancing, timing, consent, quiz, questionnaires and belief "
                                   "elicitation. Start with 'calbench study init study.toml'. "
                                   "See docs/study-guide.md.")
    ss = p.add_subparsers(dest="study_command", metavar="ACTION")
    p.set_defaults(handler=lambda a: (p.print_help(), 0)[1])

    q = ss.add_parser("init", help="write an annotated example study file",
                      description="Write an annotated example study (two conditions, a quiz, questionnaires, "
                                  "belief elicitation) to PATH for you to edit.")
    q.add_argument("path", metavar="PATH")
    q.add_argument("--force", action="store_true", help="overwrite PATH if it exists")
    q.set_defaults(handler=handle_init)

    q = ss.add_parser("check", help="validate a study file, print the design, optionally simulate one cycle",
                      description="Validate the study file and print its design: conditions × positions, "
                                  "participants per counterbalancing cycle, games and expected time per "
                                  "participant. --dry-run plays one full cycle of simulated participants "
                                  "(scripted humans) end to end into the database, marked simulated; the exit "
                                  "code is 0 only if every step completed.")
    q.add_argument("path", metavar="PATH")
    q.add_argument("--dry-run", action="store_true", help="simulate one counterbalancing cycle into the database")
    q.add_argument("--mock", action="store_true",
                   help="with --dry-run: start the project's loopback mock LLM for the dry run and point every "
                        "LLM condition at it (nothing else to start; the study file is not changed)")
    q.add_argument("--json", action="store_true", help="print the design (and dry run) as JSON")
    add_db_option(q)
    q.set_defaults(handler=handle_check)

    q = ss.add_parser("run", help="one participant at this terminal",
                      description="Walk one participant through consent, instructions, quiz, practice, the "
                                  "assigned games, questionnaires and belief grids, to a completion code. The "
                                  "next new id takes the next counterbalancing slot. Run it again with the same "
                                  "id after a crash or ctrl+q to resume at the same step.")
    q.add_argument("path", metavar="PATH")
    q.add_argument("--participant", required=True, metavar="ID",
                   help="a pseudonymous id (e.g. P001), never a name; it must match the study's "
                        "participant_pattern (default: letters and digits)")
    q.add_argument("--new-participant", action="store_true",
                   help="register ID as a new participant even though it looks like an existing participant's "
                        "id (p001, P0O1 with a letter O, or P0001 next to P001: the same once case, O/0, I/l/1 "
                        "and S/5 are folded, or one character apart); without it you are asked at a terminal, "
                        "and a run without a terminal (a script, CI) stops with exit 2")
    q.add_argument("--pool-id", metavar="ID", default=None,
                   help="the id an online pool (Prolific, MTurk, ...) gave this participant; kept with them and "
                        "usable in the study's [pool] return_url as {pool_id}")
    add_db_option(q)
    q.set_defaults(handler=handle_run)

    q = ss.add_parser("status", help="where every participant is",
                      description="Participants, their current step, game progress, time per step, stalls "
                                  "(no progress for 10 minutes) and completions.")
    q.add_argument("path", metavar="PATH")
    q.add_argument("--json", action="store_true")
    q.add_argument("--watch", type=float, metavar="SECONDS", default=None,
                   help="refresh every SECONDS until interrupted (a live monitor)")
    add_db_option(q)
    q.set_defaults(handler=handle_status)

    q = ss.add_parser("export", help="tidy CSV files and a codebook",
                      description="Write participants.csv, steps.csv, games.csv, messages.csv, beliefs.csv, "
                                  "questionnaires.csv, timings.csv, assignment.csv (the randomisation record), "
                                  "payments.csv (rows with [payment]), message_audit.csv, drafts.csv (what a "
                                  "participant wrote but had not sent when the session ended) and codebook.md to DIR. "
                                  "Every file has a simulated column; rows of simulated participants (a dry run "
                                  "into this database) are left out unless --include-simulated.")
    q.add_argument("path", metavar="PATH")
    q.add_argument("--out", required=True, metavar="DIR")
    q.add_argument("--include-simulated", action="store_true",
                   help="also write the simulated participants' rows (study check --dry-run), flagged simulated = 1")
    add_db_option(q)
    q.set_defaults(handler=handle_export)

    q = ss.add_parser("withdraw", help="delete one participant's data everywhere",
                      description="Delete the participant's games (with their events and results), steps, "
                                  "answers, beliefs and timings, and say what was removed. A participant in a "
                                  "live session is never withdrawn under it: see --wait.")
    q.add_argument("path", metavar="PATH")
    q.add_argument("--participant", required=True, metavar="ID")
    q.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                   help="if the participant is in a live session (a game in play), wait up to SECONDS for it "
                        "to end (the participant finishes or quits) before removing anything; without it such "
                        "a withdraw is refused and nothing is removed")
    add_db_option(q)
    q.set_defaults(handler=handle_withdraw)


def _load(path: str):
    from lab.study.model import StudyFileError, load_study

    try:
        study = load_study(path)
    except StudyFileError as exc:
        raise UserError(str(exc)) from None
    for w in study.warnings:  # accepted, but the file should be fixed (e.g. rounds counted from 0)
        print(f"calbench: warning: {w}", file=sys.stderr)
    return study


def handle_init(args) -> int:
    from lab.study.example import write_example
    from lab.study.model import load_study

    try:
        p = write_example(args.path, force=args.force)
    except FileExistsError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"cannot write {args.path}: {exc.strerror}") from None
    study = load_study(p)  # the example must always validate
    print(f"Wrote {p}. Edit it, then: calbench study check {p} --dry-run"
          + (" --mock" if any(c.uses_llm for c in study.conditions) else ""))
    if any(c.uses_llm for c in study.conditions):
        print("  --mock starts the loopback mock LLM that the example's LLM condition talks to; without it, "
              "start 'calbench mock-llm &' first (it listens on http://127.0.0.1:8765/v1), or put your endpoint "
              "in [conditions.llm] base_url.")
    return 0


def handle_check(args) -> int:
    from lab.study.check import design, dry_run

    study = _load(args.path)
    d = design(study)
    result = None
    if args.mock and not args.dry_run:
        raise UserError("--mock goes with --dry-run (it starts the loopback mock LLM for the simulated participants)")
    if args.dry_run:
        if not args.json:
            print(f"Dry run: {d['participants_per_cycle']} simulated participants …", file=sys.stderr)
        result = with_store(db_path(args.db), lambda store: dry_run(study, store, base=Path(args.path).parent,
                                                                   progress=None if args.json else _progress,
                                                                   mock=args.mock))
    if args.json:
        print(json.dumps(_check_json(d, result), indent=2))
    else:
        print(_format_design(d))
        if result is not None:
            _print_dry_run(result)
    return 1 if result is not None and not result["ok"] else 0


def _progress(pid, results) -> None:
    """One line per simulated participant of a dry run, on stderr."""
    games = [r for r in results if r.name.startswith("game:")]
    ok = sum(r.status == "completed" and not r.data.get("partner_failures") for r in games)
    lost = sum(int(r.data.get("partner_failures") or 0) for r in games)
    print(f"  {pid}: {len(results)} steps, {ok}/{len(games)} games played without a problem"
          + (f" ({lost} partner call(s) unanswered)" if lost else ""), file=sys.stderr)


def _check_json(d, result) -> dict:
    out = {"conditions": d["conditions"], "participants_per_cycle": d["participants_per_cycle"],
           "games_per_participant": d["games_per_participant"], "practice": d["practice"],
           "expected_minutes": d["expected_minutes"], "method": d["method"], "cycle": d["cycle"],
           "order_design": d["order_design"], "unused_tasks": d["unused_tasks"]}
    if result is not None:
        out["dry_run"] = {"participants": result["participants"], "games": result["games"],
                          "completed": result["completed"], "steps": result["steps"],
                          "steps_completed": result["steps_completed"], "failures": result["failures"],
                          "fixes": result["fixes"], "mock": result.get("mock")}
    return out


def _print_dry_run(result) -> None:
    # failures first, then one verdict: never "12 completed" above a list of failures
    for f in result["failures"]:
        print(f"  FAILED {f}")
    replaced = (f" (replaced {result['replaced_simulated']} earlier simulated participants)"
                if result["replaced_simulated"] else "")
    mock = f"; LLM conditions on the loopback mock {result['mock']}" if result.get("mock") else ""
    if result["ok"]:
        print(f"Dry run: {result['participants']} simulated participants, {result['games']} games, "
              f"{result['completed']} completed, {result['steps_completed']}/{result['steps']} steps"
              f"{mock}{replaced}")
    else:
        unanswered = sum("partner call(s) failed" in f for f in result["failures"])
        print(f"Dry run FAILED ({len(result['failures'])} problem(s) above): {result['participants']} "
              f"simulated participants, {result['completed']} of {result['games']} games ended"
              + (f" ({unanswered} with partner calls unanswered)" if unanswered else "")
              + f", {result['steps_completed']}/{result['steps']} steps{mock}{replaced}; "
              "the study is not ready for people")
    for fix in result["fixes"]:
        print(f"  FIX {fix}")


#: What ``phrasebook`` in a condition does, as ``study check`` says it.
_WORDING = {"off": "messages read as the partners write them",
            "scripted": "scripted partners' messages and the quick actions in a person's words",
            "all": "every partner's messages in a person's words, LLM partners' typed only"}


#: How ``study check`` names the order design of ``latin`` assignment (lab.study.assign.order_design).
_DESIGNS = {"williams": "balanced Latin square (Williams design: every condition follows every other equally "
                        "often)",
            "cyclic": "cyclic Latin square (an odd number of conditions needs twice as many orders for a Williams "
                      "design: give an even number of seat positions in [assignment] seats for one)",
            "single": "one condition: one order"}


def _format_design(d) -> str:
    lines = [f"Study {d['study']}: {len(d['conditions'])} conditions, assignment {d['method']}, "
             f"{d['participants_per_cycle']} participants per counterbalancing cycle"]
    for c in d["conditions"]:
        partners = c["partners"] if isinstance(c["partners"], str) else ",".join(c["partners"])
        lines.append(f"  {c['name']:<14} partners {partners}; channels {','.join(c['channels'])}; "
                     f"{c['max_turns']} turns; seats {c['seats']}; positions {c['positions']}")
    if d["latin_square"]:
        lines.append(f"  order design: {_DESIGNS[d['order_design']]}")
        lines.append("  order rows: " + " / ".join(" → ".join(r) for r in d["latin_square"]))
    if d["unused_tasks"]:
        lines.append(f"  WARNING: {len(d['unused_tasks'])} pool task(s) no slot uses: "
                     f"{', '.join(d['unused_tasks'][:6])}{' …' if len(d['unused_tasks']) > 6 else ''} "
                     f"(each participant plays {len(d['conditions'])} condition(s) × games_per_condition from the "
                     "pool's first tasks; shorten the pool or raise games_per_condition)")
    lines.append("One cycle (participants in order of arrival; the next cycle repeats it):")
    for p, plan in enumerate(d["cycle"]):
        games = [f"{g['condition']}@seat{g['seat']}:{g['task_id']}" for g in plan if not g["practice"]]
        lines.append(f"  #{p + 1}: " + " → ".join(games))
    shown = [c["name"] for c in d["conditions"] if not c.get("blinded", True)]
    lines.append("Partners are blinded (Agent N) in every condition" if not shown else
                 f"Partners are named (reveal_partners) in: {', '.join(shown)}; blinded elsewhere")
    modes = sorted({c.get("phrasebook", "off") for c in d["conditions"]})
    lines.append(f"Phrasebook {modes[0]} in every condition: {_WORDING[modes[0]]}" if len(modes) == 1
                 else "Phrasebook: " + "; ".join(f"{c['name']} {c.get('phrasebook', 'off')}" for c in d["conditions"])
                 + " (" + "; ".join(f"{m}: {_WORDING[m]}" for m in ("off", "scripted", "all")) + ")")
    if d.get("payment"):
        p = d["payment"]
        cur = p["currency"]
        lines.append(f"Payment: {cur}{p['show_up']:.2f} for completing + {cur}{p['per_meeting']:.2f} per meeting"
                     + (f" − {cur}{p['per_cost']:.2f} per unit of cost" if p["per_cost"] else "")
                     + (f", bonus capped at {cur}{p['cap']:.2f}" if p["cap"] is not None else ""))
    if d.get("attention_checks"):
        lines.append(f"Attention checks: {d['attention_checks']} questionnaire item(s) with a right answer")
    if d.get("return_url"):
        lines.append(f"Completion screen links back to: {d['return_url']}")
    if d.get("beliefs"):
        b = d["beliefs"]
        lines.append(f"Belief grid after round{'s' if len(b['rounds']) > 1 else ''} "
                     f"{', '.join(map(str, b['rounds']))} of {b['of_rounds']} (rounds counted from 1)"
                     + ("; rounds the participant only watched too (watched_rounds)" if b.get("watched_rounds")
                        else "; only rounds whose meeting the participant is in ('last': their last)"))
    lines.append(f"Per participant: {d['games_per_participant']} games"
                 f"{' + 1 practice' if d['practice'] else ''}, {d['steps_per_participant']} steps, "
                 f"about {d['expected_minutes']} minutes")
    return "\n".join(lines)


def handle_run(args) -> int:
    from lab.study.admit import ParticipantError, admit

    from . import require_terminal

    study = _load(args.path)
    try:
        who = admit(study, args.participant, pool_id=args.pool_id, db=db_path(args.db),
                    new_participant=args.new_participant, ask=_ask if _interactive() else None)
    except ParticipantError as exc:
        raise UserError(str(exc)) from None
    from calbench_tui.study_app import make_study_app

    app = make_study_app(study, participant=who.participant, store_path=db_path(args.db), base=Path(args.path).parent,
                         pool_id=who.pool_id)
    require_terminal("calbench study run")
    app.run()
    if app.error:
        raise UserError(app.error)
    print(_farewell(app, who.participant))
    return 0


def _farewell(app, pid: str) -> str:
    if app.left == "declined":
        return (f"Participant {pid} declined consent; nothing more is asked and their slot is free for the next "
                "arrival.")
    if app.left == "screened_out":
        return f"Participant {pid} was screened out by the quiz (recorded); their slot is free for the next arrival."
    if app.left == "timed_out":
        return (f"Participant {pid} ran over the study's time limit ([pool] time_limit_minutes; recorded as "
                "timed_out); their slot is free for the next arrival.")
    if app.finished:
        return f"Participant {pid} has completed the study. Completion code: {app.code}"
    return f"Participant {pid} stopped at step {app.current_step!r}; run the same command to resume there."


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def _ask(question: str) -> bool:
    """A yes/no question at the terminal; anything but y / yes (or end of input) is no."""
    try:
        answer = input(question + " ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def handle_status(args) -> int:
    import time

    from engine.inputs import printable
    from lab.study.status import format_status, study_status

    study = _load(args.path)
    path = _existing(args.db)
    while True:
        st = with_store(path, lambda store: study_status(study, store))
        if args.json:
            print(json.dumps(st, indent=2))
        else:
            if args.watch:
                print("\033[2J\033[H", end="")
            print(printable(format_status(st), newlines=True))
        if not args.watch:
            return 0
        try:
            time.sleep(args.watch)
        except KeyboardInterrupt:
            return 0


def handle_export(args) -> int:
    from lab.study.export import export_study

    study = _load(args.path)
    path = _existing(args.db)
    skipped: list[str] = []
    try:
        counts = with_store(path, lambda store: export_study(study, store, args.out, skipped=skipped,
                                                             include_simulated=args.include_simulated))
    except OSError as exc:
        raise UserError(f"cannot write to {args.out}: {exc.strerror}") from None
    for line in skipped:  # games a participant is still playing: never written mid-game
        print(line, file=sys.stderr)
    for name, n in counts.items():
        print(f"{Path(args.out) / name}: {n} rows")
    print(f"{Path(args.out) / 'codebook.md'}: every column described")
    return 0


def handle_withdraw(args) -> int:
    from lab.study.withdraw import ParticipantBusy, withdraw_participant
    from saves.study import StudyStore

    study = _load(args.path)
    path = _existing(args.db)
    if args.wait < 0:
        raise UserError("--wait must be 0 or more seconds")

    async def go(store):
        db = StudyStore(store, study.name)
        if await db.participant(args.participant) is None:
            raise UserError(f"no participant {args.participant!r} in study {study.name}")
        try:  # never under a live session: it would crash and leave its game behind
            return await withdraw_participant(store, study.name, args.participant, wait=args.wait)
        except ParticipantBusy as exc:
            raise UserError(str(exc)) from None

    counts = with_store(path, go)
    parts = ", ".join(f"{n} {table}" for table, n in counts.items() if n)
    print(f"Withdrew {args.participant} from {study.name}: removed {parts or 'nothing'}.")
    return 0


def report_study(args) -> int:
    from lab.study.report import format_table, study_table

    from lab.study.report import StudyReportError, write_study_plot

    ignored = [opt for opt, given in (("--csv", args.csv), ("--tui", args.tui), ("--leaderboard", args.leaderboard),
                                      ("--tasks", args.tasks), ("--prices", args.prices),
                                      ("--group-by", args.group_by is not None)) if given]
    if ignored:  # never accepted and then silently left out
        raise UserError(f"{ignored[0]} does not apply to report --study (it takes --json, --plot FILE.png and "
                        "--include-simulated); for the data behind it use 'calbench study export'")
    if args.plot is not None:
        _check_plot_path(args.plot)
    study = _load(args.study)
    path = _existing(args.db)
    try:
        t = with_store(path, lambda store: study_table(study, store, include_simulated=args.include_simulated))
    except StudyReportError as exc:
        raise UserError(f"report --study: {exc}") from None
    if args.plot:
        try:
            t["plot"] = write_study_plot(t, args.plot)
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot write the plot to {args.plot}: {exc}") from None
    print(json.dumps(t, indent=2) if args.json else format_table(t))
    if args.plot and not args.json:
        print(f"Wrote {args.plot} (one panel per measure: mean and 95% bootstrap CI by condition and seat kind)")
    return 0


def _check_plot_path(plot: str) -> None:
    import os

    name = os.path.basename(os.path.normpath(plot)) if plot.strip() else ""
    if not name or os.path.isdir(plot) or plot.endswith(("/", os.sep)) or name.startswith("."):
        raise UserError(f"--plot {plot!r}: give a file name such as study.png")
    folder = os.path.dirname(os.path.abspath(plot))
    if not os.path.isdir(folder):
        raise UserError(f"cannot write {plot}: the folder {folder} does not exist")


def _existing(arg):
    """The database path, which must exist (reading a study never creates an empty database)."""
    import os

    path = db_path(arg)
    if not os.path.exists(path):
        where = "--db" if arg else ("$CALBENCH_DB" if os.environ.get("CALBENCH_DB") else "the default location")
        raise UserError(f"no save database at {path} ({where}); run 'calbench study check PATH --dry-run' or "
                        "'calbench study run' first, or pass --db PATH")
    if os.path.isdir(path):
        raise UserError(f"{path} is a directory, not a save database")
    return path
