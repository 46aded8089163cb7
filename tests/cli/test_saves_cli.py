"""``calbench games | export | import | trace`` as a user runs them."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from calbench_cli.cli import main
from doubles import PlanPersona
from personas.registry import make_personas
from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from engine.oracle import solve
from saves.store import Store


def calbench(*args):
    """The real command line, in a subprocess."""
    return subprocess.run([sys.executable, "-m", "calbench_cli.cli", *args], capture_output=True, text=True)




def our_trace(seed=3):
    task = generate_scenario(seed)
    plan = solve(task).assignments
    res = asyncio.run(run_game(task, [PlanPersona(plan) for _ in range(task.num_agents)],
                               GameConfig(deterministic=True)))
    return json.loads(json.dumps(res.trace))


def save_game(db, seed=3, agents="imap,imap,dsm-welfare,imap,imap"):
    """A game saved the way the runner saves one: create, stream events, finish."""
    async def go():
        task = generate_scenario(seed)
        async with await Store.open(db) as store:
            gid = f"game-{seed:04d}-{'x' * 8}"
            await store.create_game(gid, task_row=task.to_row(), config={}, agents=agents, settings_key="s",
                                    started_at="2026-01-01T00:00:00+00:00")
            sink = store.sink(gid, durable=False)
            # the seats the label names: verification checks the label against the seats (issue 35 item 4)
            res = await run_game(task, make_personas(agents, task.num_agents),
                                 GameConfig(deterministic=True), sink, game_id=gid)
            await sink.aclose()
            await store.finish_game(gid, res.trace)
            return json.loads(json.dumps(res.trace))
    return asyncio.run(go())


def write(path, obj):
    path.write_text(json.dumps(obj))
    return str(path)


def test_export_import_round_trip(tmp_path, capsys):
    db1, db2 = str(tmp_path / "one.db"), str(tmp_path / "two.db")
    original = save_game(db1)
    gid = original["game_id"]
    out1 = tmp_path / "out1.json"
    assert main(["export", gid[:9], "--db", db1, "-o", str(out1)]) == 0
    exported = json.loads(out1.read_text())
    for key, value in original.items():
        assert exported[key] == value, key  # including the full task row
    assert exported["task"]["calendars"] and exported["saved"]["agents"] == "imap,imap,dsm-welfare,imap,imap"
    assert main(["import", str(out1), "--db", db2]) == 0
    out2 = tmp_path / "out2.json"
    assert main(["export", gid, "--db", db2, "-o", str(out2)]) == 0
    again = json.loads(out2.read_text())
    assert again["saved"].pop("verification") == "verified"  # the import folded and checked it
    assert again == exported
    capsys.readouterr()
    assert main(["games", "--db", db2, "--json"]) == 0
    games = json.loads(capsys.readouterr().out)["games"]
    assert [g["agents"] for g in games] == ["imap,imap,dsm-welfare,imap,imap"]


def test_authors_traces_import_and_fold(tmp_path, compat_dir, cli):
    db = str(tmp_path / "a.db")
    files = sorted(str(p) for p in compat_dir.glob("authors_trace_*.json"))
    proc = calbench("import", *files, "--db", db)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("imported ") == len(files)
    again = calbench("import", *files, "--db", db)
    assert again.returncode == 0
    assert again.stderr.count("is already saved") == len(files)
    assert f"0 imported, {len(files)} already saved, 0 failed" in again.stderr
    for f in files:
        trace = json.loads(Path(f).read_text())
        for source in (f, trace["game_id"][:8]):  # a file, then the saved game by id prefix
            rc, stdout, stderr = cli("trace", source, "--db", db, "--json")
            assert rc == 0, stderr
            out = json.loads(stdout)
            assert out["verified"] is True and out["problems"] == []
            assert out["final_calendars"] == trace["final_state"]["calendars"]
            assert out["game_id"] == trace["game_id"] and out["metrics"] == trace["metrics"]
    # the saved-games list and the report give one excess, in cost levels, for every one of
    # them (the varied trace's list showed their shown-unit burden, 160.40, beside the
    # report's 0.80: found by hand)
    listed = {g["game_id"]: g["excess_cost"] for g in json.loads(cli("games", "--db", db, "--json")[1])["games"]}
    rc, out, _ = cli("report", "--db", db, "--json")
    by_mode = {r["cost_mode"]: r for r in json.loads(out)["table"]}
    varied = [json.loads(Path(f).read_text())["game_id"] for f in files if "varied" in f]
    assert by_mode["varied"]["games"] == 1 and len(varied) == 1
    assert listed[varied[0]] == pytest.approx(by_mode["varied"]["excess"])
    assert listed[varied[0]] < 10  # levels (1/2/3), not the calendar's 1/10/100


def test_duplicates_skipped_and_a_broken_file_named(tmp_path):
    db = str(tmp_path / "d.db")
    good = write(tmp_path / "good.json", our_trace(3))
    broken = tmp_path / "broken.json"
    broken.write_text('{"game_id": "x", "events": [')
    not_trace = write(tmp_path / "list.json", [1, 2, 3])
    other = write(tmp_path / "other.json", our_trace(4))
    proc = calbench("import", good, str(broken), not_trace, good, other, "--db", db)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert f"could not import {broken}: not valid JSON" in proc.stderr
    assert f"could not import {not_trace}: not a game trace" in proc.stderr
    assert f"skipped {good}: game" in proc.stderr and "already saved" in proc.stderr
    assert "2 imported, 1 already saved, 2 failed" in proc.stderr
    games = json.loads(calbench("games", "--db", db, "--json").stdout)["games"]
    assert len(games) == 2  # the good files still loaded


def test_a_task_file_given_to_import_is_named_as_one(tmp_path, cli):
    """A task file (JSON Lines of task rows, ours or the authors') is not a trace: the refusal
    says what it is and how to play it; any other JSON Lines file is named as that."""
    from engine.generate import generate_scenario

    db = str(tmp_path / "i.db")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(generate_scenario(s).to_row()) + "\n" for s in (1, 2)))
    lines = tmp_path / "lines.jsonl"
    lines.write_text('{"a": 1}\n{"b": 2}\n')
    rc, _, err = cli("import", str(tasks), str(lines), "--db", db)
    assert rc != 0 and "Traceback" not in err
    assert (f"could not import {tasks}: a task file (one task row a line), not a game trace; play its tasks "
            f"with calbench run --tasks {tasks}") in err
    assert f"could not import {lines}: one JSON value a line (JSON Lines), not a game trace" in err


def test_games_json_shape(tmp_path, cli):
    db = str(tmp_path / "g.db")
    rc, _, err = cli("games", "--db", db, "--json")  # issue 35: a --db that is not there is one line
    assert rc == 2 and "no save database at" in err
    trace = save_game(db)
    out = json.loads(cli("games", "--db", db, "--json")[1])
    assert set(out) == {"games"} and len(out["games"]) == 1
    g = out["games"][0]
    assert {"game_id", "task_id", "agents", "status", "started_at", "coordination", "excess_cost"} <= set(g)
    assert g["game_id"] == trace["game_id"] and g["status"] == "completed"
    assert g["coordination"] == trace["metrics"]["coordination_rate"]
    assert g["excess_cost"] == trace["metrics"]["excess"] and g["task_id"] == trace["task"]["task_id"]
    rc, table, _ = cli("games", "--db", db)
    assert rc == 0 and trace["game_id"][:8] in table and "completed" in table
    # a filter that matches none of the saved games says so, not "No saved games" (found by hand)
    rc, out, _ = cli("games", "--db", db, "--status", "failed")
    assert rc == 0 and "No saved game with status failed" in out and "it holds others" in out
    rc, out, _ = cli("games", "--db", db, "--task", "nope")
    assert rc == 0 and "No saved game with task 'nope'" in out


def test_trace_json_shape_and_tampering(tmp_path, cli):
    trace = our_trace(5)
    path = write(tmp_path / "t.json", trace)
    rc, stdout, stderr = cli("trace", path, "--json")
    assert rc == 0, stderr
    out = json.loads(stdout)
    assert {"game_id", "verified", "rounds", "final_calendars", "metrics", "problems"} <= set(out)
    assert out["verified"] is True and len(out["rounds"]) == len(trace["task"]["meetings"])
    assert {"round", "meeting_id", "coordinated", "state_hash", "matches"} <= set(out["rounds"][0])
    assert out["final_calendars"] == trace["final_state"]["calendars"]
    assert out["metrics"] == trace["metrics"] and out["problems"] == []
    # --at: the calendars at an event
    first_batch = next(e for e in trace["events"] if e["type"] == "batch_applied")
    at = json.loads(cli("trace", path, "--json", "--at", str(first_batch["seq"]))[1])
    agent = first_batch["data"]["agent_id"]
    assert at["final_calendars"][agent] == first_batch["data"]["calendar_after"]
    # readable output, then a tampered trace: exit 1 and the problem in words
    rc, text, _ = cli("trace", path)
    assert rc == 0 and "Verified" in text
    res = next(e for e in trace["events"] if e["type"] == "resolution")
    res["data"]["calendars"][0][0], res["data"]["calendars"][0][1] = (res["data"]["calendars"][0][1],
                                                                      res["data"]["calendars"][0][0])
    bad = write(tmp_path / "bad.json", trace)
    proc = calbench("trace", bad)  # once as a real process: exit status and words on a terminal-less stdout
    assert proc.returncode == 1 and "Not verified" in proc.stdout
    assert "round 0: calendars after the round differ from the recorded state (agent 0 slot" in proc.stdout
    rc, stdout, _ = cli("trace", bad, "--json")
    assert rc == 1 and json.loads(stdout)["verified"] is False


@pytest.mark.parametrize("args, words", [
    (["trace", "no-such-game"], "no saved game matches 'no-such-game'"),
    (["export", "nope", "-o", "x.json"], "no saved game matches 'nope'"),
    (["trace", "runs/missing.json"], "runs/missing.json: no such file"),
    (["import", "missing.json"], "could not import missing.json: cannot read it"),
])
def test_unknown_game_is_one_clear_line(tmp_path, args, words, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, _, err = cli(*args, "--db", str(tmp_path / "e.db"))
    assert rc != 0 and words in err


def test_trace_of_a_file_that_is_not_a_trace(tmp_path, cli):
    path = write(tmp_path / "row.json", {"game_id": "x", "events": []})
    rc, _, err = cli("trace", path, "--db", str(tmp_path / "e.db"))
    assert rc == 2 and "nothing to fold" in err


def test_trace_at_outside_the_trace_is_one_line(cli, compat_dir):
    from doubles import one_error_line

    path = str(next(compat_dir.glob("authors_trace_*imap*.json")))
    rc, _, err = cli("trace", path, "--at", "-5")
    assert rc == 2 and "--at -5: this trace has events 0-" in one_error_line(err)


def test_a_binary_file_is_not_a_trace(cli, tmp_path):
    from doubles import one_error_line

    bad = tmp_path / "noise.json"
    bad.write_bytes(bytes(range(128, 256)))
    rc, _, err = cli("trace", str(bad))
    assert rc == 2 and "not a text file" in one_error_line(err)


def test_export_all_writes_every_game_to_a_directory(tmp_path, capsys):
    db = str(tmp_path / "all.db")
    a, b = save_game(db, seed=3), save_game(db, seed=4)
    out = tmp_path / "traces"
    assert main(["export", "--all", "--db", db, "-o", str(out)]) == 0
    files = sorted(out.glob("calbench-*.json"))
    assert [json.loads(f.read_text())["game_id"] for f in files] == sorted([a["game_id"], b["game_id"]])
    assert "wrote 2 game(s)" in capsys.readouterr().err
    # mistakes: one line, exit 2
    assert main(["export", "--db", db, "-o", str(out)]) == 2
    assert "--all" in capsys.readouterr().err
    assert main(["export", "--all", "--db", db, "-o", "-"]) == 2
    assert main(["export", "--all", "--db", db, "-o", str(files[0])]) == 2
    assert main(["export", "--all", "--status", "stopped", "--db", db, "-o", str(tmp_path / "none")]) == 0
    assert "no saved games to export" in capsys.readouterr().err


def test_play_lists_its_keys_with_readable_names(capsys):
    from calbench_cli.cli import play_main

    assert play_main(["--list-keys"]) == 0
    out = capsys.readouterr().out
    assert "thread_prev" in out and "question_mark" not in out
    line = next(x for x in out.splitlines() if x.startswith("thread_prev"))
    assert " [ " in f" {line} " and "left_square_bracket" not in line
    assert "end_turn" in out and "keys.toml" in out
