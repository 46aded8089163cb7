"""Check: scripted games stay byte-identical across a change (a refactor's proof, not a speed test).

Run:  .venv/bin/python benchmarks/scripted_identity.py record OUT_DIR [--tasks canonical]
      .venv/bin/python benchmarks/scripted_identity.py compare BEFORE_DIR AFTER_DIR

``record`` plays ``calbench run --tasks T --agents P --deterministic --json`` for the four
protocols (imap, sdmap, dsm-welfare, dsm-private), each into a fresh database in OUT_DIR,
and ``calbench trace GAME --json`` for every game (per-round state hashes, verification,
final calendars), and a digest of every saved event row.  Record once on the commit before
a change (e.g. in ``git worktree add --detach /tmp/base COMMIT`` with its own venv) and
once after; ``compare`` prints, per protocol, whether the ``run --json`` output (per-game
metrics and the summary), the ``trace --json`` outputs and the saved events are
byte-identical, and how many round hashes were compared.  Exit status 1 on any difference.

The code recorded is the one installed in the interpreter that runs this script (each
worktree's own ``.venv/bin/python``), so one copy of the script records both sides.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

PROTOCOLS = ("imap", "sdmap", "dsm-welfare", "dsm-private")


def record(out: Path, tasks: str) -> None:
    from calbench_cli.cli import main

    out.mkdir(parents=True, exist_ok=True)
    for p in PROTOCOLS:
        db = out / f"{p}.db"
        for f in out.glob(f"{p}.db*"):
            f.unlink()
        run = subprocess.run([sys.executable, "-m", "calbench_cli.cli", "run", "--tasks", tasks, "--agents", p,
                              "--deterministic", "--json", "--db", str(db)], capture_output=True, check=True,
                             cwd=out)  # not the caller's tree: the interpreter's own install
        (out / f"run_{p}.json").write_bytes(run.stdout)
        traces = []
        for g in json.loads(run.stdout)["games"]:
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                rc = main(["trace", g["game_id"], "--json", "--db", str(db)])
            if rc != 0:
                raise SystemExit(f"{p}: calbench trace {g['game_id']} exited {rc}")
            traces.append(buf.getvalue())
        (out / f"trace_{p}.jsonl").write_text("".join(traces))
        (out / f"events_{p}.sha256").write_text(_events_digest(db) + "\n")
        print(f"{p}: {len(traces)} games recorded", file=sys.stderr)


def _events_digest(db: Path) -> str:
    """One digest of every saved event of every game, read back through the store (rows or blobs)."""
    import asyncio

    from saves.store import Store

    async def read() -> str:
        store = await Store.open(db)
        try:
            con = sqlite3.connect(db)
            ids = [r[0] for r in con.execute("SELECT game_id FROM games ORDER BY game_id")]
            con.close()
            h = hashlib.sha256()
            for gid in ids:
                for ev in await store.load_events(gid):
                    h.update(json.dumps([gid, ev], sort_keys=True, separators=(",", ":")).encode())
            return h.hexdigest()
        finally:
            await store.close()

    return asyncio.run(read())


def _hashes(text: str) -> list[str]:
    dec, i, out = json.JSONDecoder(), 0, []
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        doc, i = dec.raw_decode(text, i)
        out += [r["state_hash"] for r in doc["rounds"]]
    return out


def compare(a: Path, b: Path) -> int:
    ok = True
    for p in PROTOCOLS:
        ra, rb = (d / f"run_{p}.json" for d in (a, b))
        ta, tb = ((d / f"trace_{p}.jsonl").read_text() for d in (a, b))
        ea, eb = ((d / f"events_{p}.sha256") for d in (a, b))
        same_run = ra.read_bytes() == rb.read_bytes()
        same_trace = ta == tb
        ha, hb = _hashes(ta), _hashes(tb)
        same_events = ea.exists() and eb.exists() and ea.read_text() == eb.read_text()
        games = len(json.loads(ra.read_bytes())["games"])
        ok &= same_run and same_trace and ha == hb and same_events
        print(f"{p:<12} games {games:>3}  run --json identical: {same_run}  trace --json identical: {same_trace}  "
              f"round hashes {len(ha)} equal: {ha == hb}  saved events identical: {same_events}")
    print("all identical" if ok else "DIFFERENCES")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out", type=Path)
    r.add_argument("--tasks", default="canonical")
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = ap.parse_args()
    if args.cmd == "record":
        record(args.out, args.tasks)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
