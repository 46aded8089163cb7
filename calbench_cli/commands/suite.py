"""``calbench suite generate|show``: build a custom suite from a grid; inspect a task file."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import UserError

_GENERATE_HELP = """\
CONFIG is a TOML file (ours) or the authors' taskgen YAML, unchanged. A TOML config:

  name = "my-study"          # in every row's suite_version
  seed = 5000                # cell c, candidate j uses seed + 1000*c + j
  candidates = 300           # scored per cell
  per_bucket = 4             # tasks kept per tertile (easy / medium / hard)
  scorer = "feasible_fraction"   # or "optimal_cost_per_participant_slot"

  [[grid]]                   # one or more; each key one value or a list
  agents = 5
  participants = 3
  slots = 16
  meetings = 5
  density = [0.6, 0.8, 1.0]
  blocked = 0                # blocked (immovable) errands per agent
  cost = "uniform"           # "uniform", "varied" or both
  cost_values = [1, 10, 100] # shown costs of varied cells

Every combination is a cell; each cell's candidates are scored (feasible fraction,
oracle, greedy), cut into tertiles and per_bucket tasks are kept from each. The same
config always gives the same file, byte for byte, on any number of workers.

The authors' taskgen YAML (setting_name, seed_base, candidates_per_config,
selected_per_bucket, configs: total_agents, subset_size(s), num_slots, num_meetings,
densities, pref_level(s), meeting_cost_level, errand_cost_level, errand_cost_values)
is read as it is. See docs/suites.md."""


def register(sub) -> None:
    p = sub.add_parser(
        "suite",
        help="build a custom task suite from a grid of settings, or inspect a suite file",
        description="Custom suites: 'generate' builds a balanced easy/medium/hard suite from a grid of "
                    "settings; 'show' summarises a task file (ours or the authors') and checks it.",
    )
    ssub = p.add_subparsers(dest="suite_command", metavar="ACTION")
    g = ssub.add_parser(
        "generate",
        help="build a suite from a TOML config or the authors' taskgen YAML",
        description="Build a task suite: expand the config's grid into cells, score the candidates\n"
                    "of each cell, cut them into difficulty tertiles and keep per_bucket of each.",
        epilog=_GENERATE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g.add_argument("config", metavar="CONFIG", help="suite config: FILE.toml (ours) or FILE.yaml (the authors' taskgen)")
    g.add_argument("-o", "--output", metavar="FILE.jsonl", default=None,
                   help="where to write the task rows (default: a taskgen YAML's `output`, relative to the "
                        "config file, with its `summary_output` as the summary)")
    g.add_argument("--summary", metavar="FILE.json", default=None,
                   help="also write the summary: per cell the score distributions, bucket edges, chosen tasks, time")
    g.add_argument("--workers", type=int, default=None, metavar="N",
                   help="processes to use (default: every core; 1 = this process only)")
    g.add_argument("--force", action="store_true",
                   help="replace the output and summary files if they exist (without it an existing file is "
                        "refused); a taskgen YAML's own output paths must stay inside the config's folder")
    g.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    g.set_defaults(handler=handle_generate)

    s = ssub.add_parser(
        "show",
        help="a suite file at a glance, with checks",
        description="Counts by cell and difficulty bucket, the distributions of the feasible fraction and "
                    "the oracle cost, and checks: the oracle agrees with every row's optimal cost, no task "
                    "id is used twice, every cell has equal buckets. Reads our files and the authors'. "
                    "Exits 1 when a check fails.",
    )
    s.add_argument("file", metavar="FILE.jsonl", help="a task file")
    s.add_argument("--workers", type=int, default=None, metavar="N",
                   help="processes for the oracle checks (default: every core)")
    s.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    s.set_defaults(handler=handle_show)
    p.set_defaults(handler=lambda _args: (p.print_help(), 0)[1])


# ---------------------------------------------------------------------------------
# Progress on stderr
# ---------------------------------------------------------------------------------
class _Bar:
    """A rich progress bar on stderr when it is a terminal; silent otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.progress = None
        self.tasks: dict[str, int] = {}

    def __enter__(self):
        if self.enabled:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self.progress = Progress(TextColumn("{task.description:<9}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), TimeRemainingColumn(), transient=True,
                                     console=Console(stderr=True))
            self.progress.__enter__()
        return self

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self.progress is None:
            return
        if phase not in self.tasks:
            self.tasks[phase] = self.progress.add_task(phase, total=total)
        self.progress.update(self.tasks[phase], completed=done, total=total)

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.__exit__(*exc)


# ---------------------------------------------------------------------------------
# generate
# ---------------------------------------------------------------------------------
def handle_generate(args) -> int:
    from engine.suitegen import SuiteConfigError, SuiteGenerationError
    from lab.suites import SuiteFileError, generate_suite_files

    try:
        with _Bar(sys.stderr.isatty()) as bar:
            summary, summary_path = generate_suite_files(args.config, output=args.output, summary=args.summary,
                                                         workers=args.workers, force=args.force, progress=bar)
    except (SuiteConfigError, SuiteGenerationError, SuiteFileError) as exc:
        raise UserError(str(exc)) from None
    if args.json:
        json.dump(summary, sys.stdout)
        sys.stdout.write("\n")
        return 0
    _print_generated(summary, summary_path)
    return 0


def _span(r, fmt: str = "{:.3g}") -> str:
    if not r:
        return "-"
    a, b = (fmt.format(x) if isinstance(x, float) else str(x) for x in r)
    return a if a == b else f"{a}–{b}"


def _print_generated(summary: dict, summary_path: Path | None) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console()
    cells = summary["cells"]
    con.print(f"[bold]{summary['name']}[/]: wrote {summary['tasks']} tasks to {summary['output']} "
              f"({len(cells)} cells × 3 buckets × {summary['config']['per_bucket']}) from "
              f"{summary['candidates']} candidates in {summary['seconds']:.2f} s "
              f"({summary['tasks_per_second']} tasks/s, {summary['candidates_per_second']} candidates/s, "
              f"{summary['workers']} worker{'s' if summary['workers'] != 1 else ''})", soft_wrap=True)
    con.print(f"suite_version {summary['suite_version']}, scorer {summary['config']['scorer']}", soft_wrap=True)
    t = Table(title="Cells: each bucket's range of the measure that decided it")
    for col in ("cell", "usable", "by", "easy", "medium", "hard", "s"):
        t.add_column(col, justify="left" if col in ("cell", "by") else "right", no_wrap=col == "cell")
    for c in cells:
        b = c["buckets"]
        by = c["edges_on"]
        if by == "feasible_fraction":
            spans = [_span(b[k][by], "{:.2g}") for k in ("easy", "medium", "hard")]
        else:  # shown as the oracle cost itself
            slots = c["meetings"] * c["participants"]
            spans = [_span([round(v * slots) for v in b[k][by]] if b[k][by] else None)
                     for k in ("easy", "medium", "hard")]
        t.add_row(c["cell"], f"{c['usable']}/{c['candidates']}", "d" if by == "feasible_fraction" else "oracle cost",
                  *spans, f"{c['seconds']:.1f}")
    con.print(t)
    if any(c["degenerate"] for c in cells):
        con.print("[yellow]note[/]: in some cells every candidate has the same "
                  f"{summary['config']['scorer'].replace('_', ' ')} (no blocked errands make every slot "
                  "clearable); the oracle cost decided their buckets. See docs/suites.md.")
    if summary_path is not None:
        con.print(f"summary: {summary_path}")


# ---------------------------------------------------------------------------------
# show
# ---------------------------------------------------------------------------------
def handle_show(args) -> int:
    from lab.suites import SuiteFileError, check_workers, inspect_suite, load_suite_file

    try:
        tasks = load_suite_file(args.file)
        with _Bar(sys.stderr.isatty() and len(tasks) >= 20) as bar:
            report = inspect_suite(tasks, workers=check_workers(args.workers), progress=bar)
    except SuiteFileError as exc:
        raise UserError(str(exc)) from None
    ok = all(report["checks"].values())
    if args.json:
        json.dump({"file": str(Path(args.file)), **report}, sys.stdout)
        sys.stdout.write("\n")
    else:
        _print_show(Path(args.file), report)
    return 0 if ok else 1


def _print_show(path: Path, report: dict) -> None:
    from rich.console import Console

    from engine.suitegen import text_histogram

    from calbench_tui.safe_text import cell as text_cell, markup, safe_table

    con = Console()
    cells = report["cells"]
    con.print(f"[bold]{markup(path)}[/]: {report['tasks']} tasks in {len(cells)} cells; "
              f"difficulty scorer: {', '.join(report['difficulty_scorer'])}", soft_wrap=True)
    extra = sorted({b for counts in cells.values() for b in counts} - {"easy", "medium", "hard"})
    t = safe_table(title="Tasks by cell and bucket")
    t.add_column("cell")
    for b in ("easy", "medium", "hard", *extra):
        t.add_column(text_cell(b), justify="right")
    t.add_column("total", justify="right")
    for cell, counts in cells.items():
        t.add_row(cell, *[str(counts.get(b, 0)) for b in ("easy", "medium", "hard", *extra)],
                  str(sum(counts.values())))
    con.print(t)
    for title, key, fmt in (("feasible fraction d (ours, recomputed)", "feasible_fraction", "{:.4g}"),
                            ("oracle cost (ours, recomputed)", "optimal_cost", "{:.3g}"),
                            ("the file's difficulty_score", "difficulty_score", "{:.3g}")):
        dist = report[key]
        if not dist.get("count"):
            continue
        con.print(f"\n[bold]{title}[/]: median {dist['median']:.4g}, range {dist['min']:.4g}–{dist['max']:.4g}",
                  soft_wrap=True)
        for line in text_histogram(dist, fmt=fmt):
            con.print(line, highlight=False, soft_wrap=True)
    con.print()
    checks = report["checks"]
    oracle = report["oracle"]
    n_explained = oracle.get("explained", 0)
    lines = [
        (checks["oracle_agrees"],
         f"oracle agrees with the file: {oracle.get('agree', 0)} agree"
         + (f", {n_explained} explained by the errand-capacity constraint" if n_explained else "")
         + (f", {oracle.get('unknown', 0)} without an optimal cost" if oracle.get("unknown") else "")
         + (f", {oracle.get('disagree', 0)} disagree" if oracle.get("disagree") else "")),
        (checks["unique_ids"], "task ids are unique" if checks["unique_ids"]
         else f"task ids used twice: {markup(', '.join(report['duplicate_ids'][:10]))}"),
        (checks["balanced_buckets"], "every cell has equal easy / medium / hard buckets" if checks["balanced_buckets"]
         else f"cells with unequal buckets: {markup(', '.join(report['unbalanced_cells'][:10]))}"),
    ]
    for good, text in lines:
        con.print(("[green]✓[/] " if good else "[red]✗[/] ") + text, highlight=False, soft_wrap=True)
    for d in report["disagreements"][:10]:
        con.print(f"    {markup(d['task_id'])}: {markup(d['reason'])}", highlight=False, soft_wrap=True)
    if len(report["disagreements"]) > 10:
        con.print(f"    ... and {len(report['disagreements']) - 10} more (see --json)")
