"""Benchmark: the dry run of a study — simulated participants end to end into SQLite.

Run:  .venv/bin/python benchmarks/study_dry_run.py [--cycles 3]

The example study (``calbench study init``) with both conditions scripted (IMAP partners;
the LLM partner replaced so no endpoint is needed), one counterbalancing cycle = 4
simulated participants × (practice + 2 games) and 11 steps each, into a fresh database.
Printed per cycle: wall seconds, participants/s, games/s, steps/s; then the export of
everything and the Table 2 report (2000 bootstrap resamples), each timed.  The per-event
durable writes of interactive games (every event committed) dominate a game's time.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.study.check import dry_run  # noqa: E402
from lab.study.example import EXAMPLE  # noqa: E402
from lab.study.export import export_study  # noqa: E402
from lab.study.model import parse_study  # noqa: E402
from lab.study.report import study_table  # noqa: E402
from saves.store import Store  # noqa: E402


async def main(cycles: int) -> None:
    study = parse_study(EXAMPLE.replace('partners = ["llm:mock-model", "imap", "imap", "imap"]', 'partners = "imap"'))
    with tempfile.TemporaryDirectory() as tmp:
        async with await Store.open(Path(tmp) / "bench.db") as store:
            for c in range(cycles):
                t0 = time.perf_counter()
                r = await dry_run(study, store)
                dt = time.perf_counter() - t0
                assert r["ok"], r["failures"]
                print(f"cycle {c + 1}: {dt:.2f} s — {r['participants'] / dt:.2f} participants/s, "
                      f"{r['games'] / dt:.2f} games/s, {r['steps'] / dt:.1f} steps/s "
                      f"({r['participants']} participants, {r['games']} games, {r['steps']} steps)")
            t0 = time.perf_counter()
            counts = await export_study(study, store, Path(tmp) / "out", include_simulated=True)
            print(f"export: {time.perf_counter() - t0:.2f} s for {sum(counts.values())} rows")
            t0 = time.perf_counter()
            await study_table(study, store, include_simulated=True)
            print(f"report --study: {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=3)
    asyncio.run(main(ap.parse_args().cycles))
