"""``import calbench``: run a suite, read saved games, get rows and DataFrames (issue 32, item 1).

These need no extra (pandas is optional: ``to_pandas`` is tested when it is installed).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import calbench


def test_run_plays_like_calbench_run_and_returns_one_record_per_game(tmp_path, cli):
    db = str(tmp_path / "api.db")
    res = calbench.run(tasks="canonical:0-2", agents="imap", db=db, deterministic=True)
    assert res.db == db and len(res) == 3
    assert [r["task_id"] for r in res.records] == ["canonical-000", "canonical-001", "canonical-002"]
    # the same games as the command line's (deterministic ids: the same settings key and ids)
    rc, out, err = cli("run", "--tasks", "canonical:0-2", "--agents", "imap", "--deterministic", "--json",
                       "--db", str(tmp_path / "cli.db"))
    assert rc == 0, err
    cli_games = json.loads(out)["games"]
    keys = ("game_id", "task_id", "coordination", "excess_cost", "fairness", "vps", "messages_per_meeting")
    assert [{k: r[k] for k in keys} for r in res.records] == [{k: g[k] for k in keys} for g in cli_games]
    assert res.summary and res.summary[0]["games"] == 3


def test_load_games_lists_what_calbench_games_lists(tmp_path, cli):
    db = str(tmp_path / "api.db")
    calbench.run(tasks="canonical:0-1", agents="sdmap", db=db)
    games = calbench.load_games(db)
    rc, out, _err = cli("games", "--json", "--db", db)
    assert rc == 0
    assert games.records == json.loads(out)["games"]
    assert [g["status"] for g in calbench.load_games(db, status="completed")] == ["completed", "completed"]
    assert len(calbench.load_games(str(tmp_path / "none.db"))) == 0  # nothing saved: nothing listed, none made
    assert not (tmp_path / "none.db").exists()


def test_to_pandas_is_a_dataframe_of_the_records(tmp_path):
    pd = pytest.importorskip("pandas")
    res = calbench.run(tasks="canonical:0-1", agents="imap", db=str(tmp_path / "api.db"))
    df = res.to_pandas()
    assert isinstance(df, pd.DataFrame) and list(df["task_id"]) == [r["task_id"] for r in res.records]
    assert list(calbench.load_games(res.db).to_pandas()["game_id"]) == [r["game_id"] for r in res.records]


def test_a_mistake_is_one_line():
    from lab.gamespec import SetupError

    with pytest.raises(SetupError, match="unknown persona|valid"):
        calbench.run(tasks="canonical:0", agents="nobody")
    with pytest.raises(SetupError, match="--max-turns must be at least 1"):  # it was the engine's ValueError
        calbench.run(tasks="canonical:0", agents="imap", max_turns=0)


def test_import_calbench_loads_no_textual_and_no_extra():
    code = ("import sys, calbench; calbench.run; calbench.load_games; calbench.env; "
            "bad = [m for m in ('textual', 'inspect_ai', 'pettingzoo', 'gymnasium', 'pandas') if m in sys.modules]; "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_without_the_extras_each_door_says_what_to_install(tmp_path, cli, monkeypatch):
    db = str(tmp_path / "api.db")
    calbench.run(tasks="canonical:0", agents="imap", db=db)
    monkeypatch.setitem(sys.modules, "inspect_ai", None)  # as if Inspect AI were not installed
    monkeypatch.setitem(sys.modules, "pettingzoo", None)
    monkeypatch.delitem(sys.modules, "calbench.pettingzoo_env", raising=False)
    rc, _out, err = cli("export", "--all", "--inspect", "-o", str(tmp_path / "logs"), "--db", db)
    assert rc == 2 and "pip install 'calbench[inspect]'" in err and "Traceback" not in err
    assert not (tmp_path / "logs").exists()
    with pytest.raises(ImportError, match=r"pip install 'calbench\[pettingzoo\]'"):
        calbench.env(task="canonical:0")


def test_run_and_load_games_work_where_an_event_loop_runs(tmp_path):
    """A Jupyter notebook runs an event loop in the thread that calls calbench.run."""
    import asyncio

    async def cell():
        res = calbench.run(tasks="canonical:0", agents="imap", db=str(tmp_path / "nb.db"))
        return res, calbench.load_games(res.db)

    res, games = asyncio.run(cell())
    assert res.records[0]["status"] == "completed" and len(games) == 1
