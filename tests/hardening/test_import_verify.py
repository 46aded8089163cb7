"""Issue 15 (4) and (6): import verifies what it imports, one bad file never aborts the
others, and odd values are one line each; ``calbench trace`` checks the metrics."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from saves.store import Store

from .helpers import our_trace, run_async


def calbench(*args):
    return subprocess.run([sys.executable, "-m", "calbench_cli.cli", *args], capture_output=True, text=True,
                          timeout=300)


def tamper(trace, how):
    t = copy.deepcopy(trace)
    t["game_id"] = f"{trace['game_id']}-{how}"
    ev = t["events"]
    if how == "move":  # a scheduled slot moved by one
        for e in ev:
            acts = e["data"].get("actions") if e["type"] == "batch_applied" else None
            sched = [a for a in acts or [] if a.get("type") == "schedule"]
            if sched:
                sched[0]["slot"] = (sched[0]["slot"] + 1) % len(t["task"]["calendars"][0])
                break
    elif how == "batch":  # a batch deleted
        del ev[[i for i, e in enumerate(ev) if e["type"] == "batch_applied"][1]]
    elif how == "hash":
        next(e for e in ev if e["type"] == "resolution")["data"]["state_hash"] = "0" * 16
    elif how == "noevents":
        t["events"] = []
    elif how == "half":
        t["events"] = ev[: len(ev) // 2]
    elif how == "metrics":
        t["metrics"]["coordination_rate"] = 0.1
        t["metrics"]["excess"] = 99
    elif how == "seatmetrics":
        t["metrics"]["per_seat"][2]["excess"] = 7
    return t


KINDS = ("move", "batch", "hash", "noevents", "half", "metrics", "seatmetrics")


@pytest.mark.parametrize("how", KINDS)
def test_a_tampered_trace_is_refused_and_named(tmp_path, cli, how):
    db = str(tmp_path / "v.db")
    bad = tmp_path / f"{how}.json"
    bad.write_text(json.dumps(tamper(our_trace(3), how)))
    rc, _, err = cli("import", str(bad), "--db", db)
    assert rc == 1 and "does not verify, not imported" in err and "Traceback" not in err
    assert json.loads(cli("games", "--db", db, "--json")[1])["games"] == []


def test_unverified_kept_on_request_and_left_out_of_reports(tmp_path, cli):
    db = str(tmp_path / "v.db")
    good, bad = our_trace(3), tamper(our_trace(3), "metrics")
    (tmp_path / "good.json").write_text(json.dumps(good))
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    rc, out, err = cli("import", str(tmp_path / "good.json"), str(tmp_path / "bad.json"), "--db", db,
                       "--keep-unverified")
    assert rc == 1 and "marked unverified" in out and "1 imported, 1 imported unverified" in err
    games = {g["game_id"]: g for g in json.loads(cli("games", "--db", db, "--json")[1])["games"]}
    assert games[good["game_id"]]["verification"] == "verified"
    assert games[bad["game_id"]]["verification"] == "unverified"
    report = json.loads(cli("report", "--db", db, "--json")[1])
    assert sum(r["games"] for r in report["table"] if r.get("persona") != "(all)") == 1
    report = json.loads(cli("report", "--db", db, "--json", "--include-unverified")[1])
    assert sum(r["games"] for r in report["table"] if r.get("persona") != "(all)") == 2

    async def rows(store):
        return (len(await store.game_results()), len(await store.game_results(include_unverified=True)))

    async def go():
        async with await Store.open(db) as store:
            return await rows(store)
    n, m = run_async(go())
    assert m == 2 * n > 0


def test_trace_checks_recorded_metrics(tmp_path, cli):
    """Before: a trace whose metrics were edited (coordination 0.1, excess 99) passed as 'Verified'."""
    f = tmp_path / "m.json"
    f.write_text(json.dumps(tamper(our_trace(3), "metrics")))
    rc, out, _ = cli("trace", str(f))
    assert rc == 1 and "Not verified" in out and "coordination_rate records 0.1" in out.replace("\n", " ")
    rc, out, _ = cli("trace", str(f), "--json")
    probs = json.loads(out)["problems"]
    assert rc == 1 and any("metrics.excess records 99" in p for p in probs)
    f.write_text(json.dumps(our_trace(3)))
    assert cli("trace", str(f))[0] == 0


def test_odd_values_are_one_line_each_and_the_rest_still_loads(tmp_path):
    """Before: an integer >= 2**64, a list as a timestamp or 100k-deep JSON raised a
    traceback and aborted the import: the other games of the same command were not loaded."""
    db = str(tmp_path / "o.db")
    base = our_trace(3)
    files = []
    big = copy.deepcopy(base)
    big["game_id"] = "big"
    big["events"][0]["data"]["x"] = 2 ** 64
    ts = copy.deepcopy(base)
    ts["game_id"] = "ts"
    ts["events"][0]["timestamp"] = [1, 2]
    for name, obj in (("big", big), ("ts", ts)):
        (tmp_path / f"{name}.json").write_text(json.dumps(obj))
        files.append(str(tmp_path / f"{name}.json"))
    deep = tmp_path / "deep.json"
    deep.write_text('{"game_id": "d", "events": [], "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    digits = tmp_path / "digits.json"
    digits.write_text('{"game_id": "g", "events": [], "x": ' + "9" * 5000 + "}")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(base))
    proc = calbench("import", *files, str(deep), str(digits), str(good), "--db", db)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "1 imported, 0 already saved, 4 failed" in proc.stderr
    assert sum(1 for line in proc.stderr.splitlines() if line.startswith("calbench: error:")) == 4
    assert "too large to store" in proc.stderr and "list as its timestamp" in proc.stderr
    assert "more than 64 levels deep (the limit)" in proc.stderr  # engine.inputs.MAX_NESTING
    games = json.loads(calbench("games", "--db", db, "--json").stdout)["games"]
    assert [g["game_id"] for g in games] == [base["game_id"]]


def test_one_bad_game_in_a_merged_database_does_not_abort_the_others(tmp_path):
    import sqlite3

    shard = str(tmp_path / "shard.db")
    # bad is saved stopped so its events keep one row each (a finished game's are one blob)
    good, bad = our_trace(3), {**our_trace(4), "stopped": True}

    async def fill():
        async with await Store.open(shard) as store:
            assert await store.import_trace(good) and await store.import_trace(bad)
    run_async(fill())
    con = sqlite3.connect(shard)  # a value no importer can store, written behind the store's back
    con.execute("UPDATE events SET data = ? WHERE game_id = ? AND seq = 0",
                ('{"round": -1, "x": ' + "9" * 30 + "}", bad["game_id"]))
    con.commit()
    con.close()
    proc = calbench("import", shard, "--db", str(tmp_path / "main.db"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "1 imported, 0 already saved, 1 failed" in proc.stderr and "too large to store" in proc.stderr
    games = json.loads(calbench("games", "--db", str(tmp_path / "main.db"), "--json").stdout)["games"]
    assert [g["game_id"] for g in games] == [good["game_id"]]
