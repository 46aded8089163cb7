"""Issue 35 (5): ``calbench trace FILE`` and ``calbench import`` check a trace with one checker
(``engine.tracecheck``).

Before: ``trace`` said "Verified" (exit 0) for traces ``import`` refuses — NaN or infinite
metrics, a ``seq`` of ``"5"``, a list as a timestamp, a number of 2^64, a game id of 100,000
characters.  Now both refuse them, in the same words, in one line.
"""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    from calbench_cli.cli import main

    tmp = tmp_path_factory.mktemp("t35")
    db = tmp / "g.db"
    assert main(["run", "--tasks", "seed:1", "--agents", "imap", "--db", str(db)]) == 0
    import sqlite3

    out = tmp / "t.json"
    gid = sqlite3.connect(db).execute("SELECT game_id FROM games").fetchone()[0]
    assert main(["export", gid, "-o", str(out), "--db", str(db)]) == 0
    return json.loads(out.read_text())


def _edits():
    def seq(t):
        t["events"][5]["seq"] = "5"

    def stamp(t):
        t["events"][3]["timestamp"] = ["2026", "01"]

    return {
        "metric-nan": lambda t: t["metrics"].update(coordination_rate=float("nan")),
        "metric-inf": lambda t: t["metrics"].update(vps=float("inf")),
        "seq-string": seq,
        "timestamp-list": stamp,
        "number-2^64": lambda t: t["config"].update(note=2 ** 64),
        "game-id-100k": lambda t: t.update(game_id="g" * 100_000),
    }


@pytest.mark.parametrize("name", list(_edits()))
def test_trace_refuses_what_import_refuses(name, trace, tmp_path, cli):
    t = json.loads(json.dumps(trace))
    _edits()[name](t)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(t))
    rc, out, err = cli("trace", str(path))
    assert rc != 0 and "Verified" not in out, (name, out[-300:])
    assert err.count("\n") == 1 and "not a trace" in err, err
    rc_i, _, err_i = cli("import", str(path), "--db", str(tmp_path / "i.db"))
    assert rc_i != 0
    said = err.split("not a trace: ", 1)[1].strip()
    assert said[:40] in err_i, (err, err_i)
    # the untouched trace still verifies
    path.write_text(json.dumps(trace))
    rc, out, _ = cli("trace", str(path))
    assert rc == 0 and "Verified" in out
