"""Benchmark: CalBench next to the paper authors' own harness, alternating, per CPU second.

Run:  .venv/bin/python benchmarks/side_by_side.py HARNESS [--rounds 3] [--rows 1000] [--rounds-rows 1]
                                                 [--protocols imap,sdmap,dsm-welfare,dsm-private]
                                                 [--tasks FILE.jsonl] [--cache warm|cold]

HARNESS is the folder of an installed copy of the authors' public harness: it holds
``games/calendar/run.py`` and its own virtual environment in ``.venv`` (``--python`` names
another interpreter).  Nothing of it is in this repository; this script only starts it.

For each protocol, each round runs their harness (``run.py EXPERIMENT --max-parallelism 1
--results-dir TMP``) and ours (``calbench run --tasks FILE --agents P --concurrency 1 --json``
into a fresh database) one after the other, the order swapped every round, and prints the
medians: CPU seconds of the whole process (user + system, its children included, from
``getrusage(RUSAGE_CHILDREN)``), wall seconds, and the ratios theirs / ours.  Their
experiment file is written here for the task file: one entry per task row, every seat the
protocol (their agent types ``imap``, ``sd``, ``private_dsm``; for DSM-Welfare ``paper_dsm``
at the welfare end of their own interpolation script), on the defaults of their
``uniform_full_dsm.yaml`` read from HARNESS.

Two suites: the task file (default: the authors' 108 uniform rows) and, unless ``--rows 0``,
a file of ``--rows`` rows (the first file's rows in order, again and again, each copy with
its own id ``ID~k``; their harness reads the task file from the top for every game, so a
long file costs it more per game).  Per game after start-up is the CPU the longer suite
costs more than the shorter one, divided by the games it has more: start-up (imports,
reading the file, the database) cancels out.

Fairness: both run from the same environment less ``PYTHONDONTWRITEBYTECODE`` (each side's
modules compiled once, as on an ordinary install), one untimed warm-up each first.  Our
oracle answers come from a cache primed by an untimed run (``--cache warm``, the default:
their harness reads the oracle cost stored in each task row; ``--cache cold`` solves them
in every timed run).  The machine may be shared: CPU seconds move less than wall time under
load, and the rounds alternate so that a busy spell hits both sides.

``--instructions``: count instructions instead of timing (``valgrind --tool=callgrind``,
children followed, ``PYTHONHASHSEED=0``): the same count for the same run whatever the
machine is doing, so one round gives a ratio a shared machine cannot move (each run is
~50x slower under valgrind: minutes per protocol for their harness).  "CPU" in the table
then reads G instructions, and per game after start-up M instructions.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.suite import AUTHORS_FILE, repeated_suite  # noqa: E402

PROTOCOLS = ("imap", "sdmap", "dsm-welfare", "dsm-private")
LABEL = {"imap": "IMAP", "sdmap": "SD-MAP", "dsm-welfare": "DSM-Welfare", "dsm-private": "DSM-Private"}
# Their agent type per protocol, and the settings it is played with (beside their defaults).
THEIR_AGENT = {"imap": "imap", "sdmap": "sd", "dsm-welfare": "paper_dsm", "dsm-private": "private_dsm"}
# The welfare end (alpha 0) of their DSM privacy/welfare interpolation.
WELFARE_END = {"dsm_lmin": 1, "dsm_lmax": 12, "dsm_beta": 0.0, "dsm_theta": 0.0,
               "dsm_social_welfare_weight": 10.0, "dsm_privacy_unit_cost": 0.0,
               "dsm_initial_budget": 1_000_000, "dsm_cascade_depth": 2}
THEIR_SETTINGS = {"dsm-welfare": WELFARE_END}
RUN_PY = Path("games") / "calendar" / "run.py"
DEFAULTS_FILE = Path("games") / "calendar" / "experiments" / "uniform_full_dsm.yaml"


class NotTheHarness(Exception):
    """HARNESS is not an installed copy of the authors' harness (one line for the user)."""


def check_harness(path: Path, python: Path | None) -> tuple[Path, dict]:
    """The harness's interpreter and the defaults of its experiment file, or :class:`NotTheHarness`."""
    if not path.is_dir():
        raise NotTheHarness(f"{path} is not a folder")
    if not (path / RUN_PY).is_file() or not (path / DEFAULTS_FILE).is_file():
        raise NotTheHarness(f"{path} has no {RUN_PY} and {DEFAULTS_FILE}")
    py = python or path / ".venv" / "bin" / "python"
    if not py.is_file():
        raise NotTheHarness(f"{path} has no interpreter at {py} (give one with --python)")
    probe = ("import json, sys, yaml, calendar_game, expt_runner; "
             "print(json.dumps(yaml.safe_load(open(sys.argv[1], encoding='utf-8'))['defaults']))")
    proc = subprocess.run([str(py), "-c", probe, str(path / DEFAULTS_FILE)], capture_output=True, text=True,
                          cwd=path / "games" / "calendar")
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise NotTheHarness(f"{py} cannot load the harness (calendar_game, expt_runner): {last}")
    try:
        defaults = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise NotTheHarness(f"{path / DEFAULTS_FILE} has no readable defaults ({exc})") from None
    if not isinstance(defaults, dict):
        raise NotTheHarness(f"{path / DEFAULTS_FILE} has no defaults mapping")
    return py, defaults


def their_experiment(tasks: Path, protocol: str, defaults: dict, out: Path) -> Path:
    """Their experiment file for ``tasks``: one entry per row, every seat ``protocol``.

    Written as JSON, which their YAML reader reads as it is."""
    batches = []
    for line in tasks.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        p = row.get("params") or {}
        n = int(p.get("total_agents") or len(row["calendars"]))
        batches.append({"label": row["task_id"], "count": 1, "config": {
            "seed": row.get("seed"), "task_path": str(tasks.resolve()), "task_id": row["task_id"],
            "num_agents": n, "num_slots": int(p.get("num_slots") or len(row["calendars"][0])),
            "density": p.get("density"), "pref_level": p.get("pref_level"),
            "num_meetings": int(p.get("num_meetings") or len(row["meetings"])),
            "num_participants": p.get("subset_size"),
            "agents": [{"type": THEIR_AGENT[protocol]} for _ in range(n)]}})
    doc = {"name": f"side_by_side_{protocol}_{tasks.stem}".replace("-", "_"),
           "description": "CalBench side-by-side benchmark (written by benchmarks/side_by_side.py)",
           "defaults": {**defaults, **THEIR_SETTINGS.get(protocol, {})}, "batches": batches}
    path = out / f"{doc['name']}.yaml"
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


#: ``--instructions``: every measured command runs under this (its processes' counts are summed)
CALLGRIND = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", "--trace-children=yes"]
_COLLECTED = re.compile(r"Collected : (\d+)")


def timed(cmd: list[str], cwd: Path, env: dict,
          count: bool = False) -> tuple[float, float, subprocess.CompletedProcess]:
    """CPU seconds (user + system, children included) and wall seconds of one process; with
    ``count``, G instructions (callgrind, every process of the run) in place of CPU seconds."""
    if count:
        cmd, env = CALLGRIND + cmd, {**env, "PYTHONHASHSEED": "0"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if count:
        cpu = sum(int(n) for n in _COLLECTED.findall(proc.stderr)) / 1e9
        proc.stderr = "\n".join(x for x in proc.stderr.splitlines() if not x.startswith("=="))
    return cpu, wall, proc


class Sides:
    def __init__(self, harness: Path, python: Path, defaults: dict, work: Path, cache: str,
                 ours: Path | None = None, count: bool = False) -> None:
        self.harness, self.python, self.defaults, self.work, self.cache = harness, python, defaults, work, cache
        self.count = count  # instructions (callgrind) in place of CPU seconds
        self.unit = "G-instr" if count else "CPU-s"
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        # --ours TREE: that source tree of CalBench instead of the installed one (a before/after)
        self.ours_env = {**self.env, "PYTHONPATH": str(ours)} if ours else self.env
        self.runs = 0

    def theirs(self, tasks: Path, protocol: str, games: int) -> tuple[float, float]:
        exp = their_experiment(tasks, protocol, self.defaults, self.work)
        self.runs += 1
        results = self.work / f"their-results-{self.runs}"
        cpu, wall, proc = timed([str(self.python), str(RUN_PY.name), str(exp), "--max-parallelism", "1",
                                 "--results-dir", str(results), "--log-level", "WARNING"],
                                self.harness / RUN_PY.parent, self.env, self.count)
        if proc.returncode != 0:
            raise SystemExit(f"their harness failed on {protocol} ({proc.returncode}): "
                             f"{(proc.stderr.strip().splitlines() or ['no output'])[-1]}")
        traces = [f for f in results.rglob("*.json") if f.name != "metadata.json"] if results.exists() else []
        if len(traces) < games:
            raise SystemExit(f"their harness wrote {len(traces)} traces for {games} games ({protocol})")
        return cpu, wall

    def ours(self, tasks: Path, protocol: str, games: int, cache: str | None = None) -> tuple[float, float]:
        self.runs += 1
        db = self.work / f"ours-{self.runs}.db"
        cache = cache or (self.cache if self.cache != "cold" else str(self.work / f"cache-{self.runs}"))
        cpu, wall, proc = timed([sys.executable, "-m", "calbench_cli.cli", "run", "--tasks", str(tasks),
                                 "--agents", protocol, "--concurrency", "1", "--db", str(db), "--json"],
                                self.work, {**self.ours_env, "CALBENCH_CACHE": cache}, self.count)
        if proc.returncode != 0:
            raise SystemExit(f"calbench run failed on {protocol} ({proc.returncode}): "
                             f"{(proc.stderr.strip().splitlines() or ['no output'])[-1]}")
        played = len(json.loads(proc.stdout)["games"])
        if played != games:
            raise SystemExit(f"calbench run played {played} games of {games} ({protocol})")
        for f in self.work.glob(f"ours-{self.runs}.db*"):
            f.unlink()
        return cpu, wall


def rows_of(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def suite(sides: Sides, tasks: Path, protocols: list[str], rounds: int) -> dict[str, dict[str, float]]:
    """Per protocol: median CPU and wall of theirs and ours over ``rounds`` alternated rounds."""
    games = rows_of(tasks)
    out = {}
    print(f"\n{tasks.name}: {games} games, {rounds} round(s), their --max-parallelism 1, our --concurrency 1")
    u = sides.unit
    print(f"{'protocol':<12} {'theirs ' + u:>14} {'ours ' + u:>12} {'ratio':>9} "
          f"{'theirs wall':>11} {'ours wall':>9} {'wall ratio':>10}")
    for p in protocols:
        t_cpu, t_wall, o_cpu, o_wall = [], [], [], []
        for k in range(rounds):
            order = ("theirs", "ours") if k % 2 == 0 else ("ours", "theirs")
            for side in order:
                if side == "theirs":
                    c, w = sides.theirs(tasks, p, games)
                    t_cpu.append(c), t_wall.append(w)
                else:
                    c, w = sides.ours(tasks, p, games)
                    o_cpu.append(c), o_wall.append(w)
        m = {"theirs_cpu": statistics.median(t_cpu), "ours_cpu": statistics.median(o_cpu),
             "theirs_wall": statistics.median(t_wall), "ours_wall": statistics.median(o_wall), "games": games}
        out[p] = m
        print(f"{LABEL[p]:<12} {m['theirs_cpu']:>14.2f} {m['ours_cpu']:>12.2f} "
              f"{m['theirs_cpu'] / m['ours_cpu']:>8.1f}x {m['theirs_wall']:>11.2f} {m['ours_wall']:>9.2f} "
              f"{m['theirs_wall'] / m['ours_wall']:>9.1f}x"
              + (f"   ({u} theirs {', '.join(f'{x:.2f}' for x in t_cpu)}; ours {', '.join(f'{x:.2f}' for x in o_cpu)})"
                 if rounds > 1 else ""), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="HARNESS: the folder of an installed copy of the authors' harness "
                                        "(games/calendar/run.py, .venv/bin/python).")
    ap.add_argument("harness", type=Path, help="folder of the authors' installed harness")
    ap.add_argument("--python", type=Path, default=None, help="its interpreter (default: HARNESS/.venv/bin/python)")
    ap.add_argument("--tasks", type=Path, default=AUTHORS_FILE, help="task file (default: the authors' 108 rows)")
    ap.add_argument("--protocols", default=",".join(PROTOCOLS), help="comma list of " + ", ".join(PROTOCOLS))
    ap.add_argument("--rounds", type=int, default=3, help="alternated rounds on the task file (median)")
    ap.add_argument("--rows", type=int, default=1000, help="rows of the long file (0: skip it)")
    ap.add_argument("--rounds-rows", type=int, default=1, help="alternated rounds on the long file")
    ap.add_argument("--rows-protocols", default="imap", help="protocols played on the long file")
    ap.add_argument("--cache", choices=("warm", "cold"), default="warm", help="our oracle cache (see the notes)")
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions with valgrind (callgrind) instead of CPU seconds: one round is enough")
    ap.add_argument("--ours", type=Path, default=None,
                    help="play a CalBench source tree (e.g. an earlier commit unpacked) instead of the installed one")
    args = ap.parse_args(argv)
    try:
        python, defaults = check_harness(args.harness.resolve(), args.python)
    except NotTheHarness as exc:
        print(f"side_by_side: not the authors' harness: {exc}", file=sys.stderr)
        return 2
    if args.instructions and shutil.which("valgrind") is None:
        print("side_by_side: --instructions needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    long_protocols = [p.strip() for p in args.rows_protocols.split(",") if p.strip()]
    bad = [p for p in protocols + long_protocols if p not in PROTOCOLS]
    if bad:
        print(f"side_by_side: unknown protocol(s) {', '.join(bad)}; choose from {', '.join(PROTOCOLS)}",
              file=sys.stderr)
        return 2
    if not args.tasks.is_file():
        print(f"side_by_side: task file {args.tasks} not found", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="calbench-side-by-side-") as tmp:
        work = Path(tmp)
        cache = str(work / "cache") if args.cache == "warm" else "cold"
        sides = Sides(args.harness.resolve(), python, defaults, work, cache,
                      args.ours.resolve() if args.ours else None, args.instructions)
        tasks = work / args.tasks.name
        tasks.write_bytes(args.tasks.read_bytes())
        long = repeated_suite(tasks, args.rows, work / f"rows-{args.rows}.jsonl") if args.rows else None
        print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; our oracle cache {args.cache}; "
              f"their harness {args.harness}" + (f"; ours from {args.ours}" if args.ours else ""))
        # untimed: each side's modules compiled and read once; our cache primed with every file's tasks
        warm = work / "warm.jsonl"
        warm.write_text("".join(tasks.read_text(encoding="utf-8").splitlines(keepends=True)[:2]), encoding="utf-8")
        sides.theirs(warm, protocols[0], 2)
        for f in ([tasks] + ([long] if long else [])):
            sides.ours(f, protocols[0], rows_of(f), cache=cache if args.cache == "warm" else str(work / "prime"))
        short = suite(sides, tasks, protocols, args.rounds)
        if long:
            longer = suite(sides, long, long_protocols, args.rounds_rows)
            per = "M instructions" if args.instructions else "CPU ms"
            print(f"\nper game after start-up, {per} (({sides.unit} of {rows_of(long)} games - of "
                  f"{rows_of(tasks)}) / the games more):")
            for p in long_protocols:
                base = short.get(p) or suite(sides, tasks, [p], 1)[p]
                extra = longer[p]["games"] - base["games"]
                theirs = (longer[p]["theirs_cpu"] - base["theirs_cpu"]) / extra * 1000
                ours = (longer[p]["ours_cpu"] - base["ours_cpu"]) / extra * 1000
                unit = "M" if args.instructions else "ms"
                print(f"{LABEL[p]:<12} theirs {theirs:6.1f} {unit}  ours {ours:6.2f} {unit}  ratio {theirs / ours:5.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
