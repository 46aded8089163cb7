"""``calbench report`` as a user runs it: JSON, CSV, the leaderboard, plot files and mistakes."""

from __future__ import annotations

import asyncio
import concurrent.futures
import csv
import io
import json

import pytest

from doubles import one_error_line
from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from personas.registry import make_personas
from saves.store import Store

from .test_reporting import GAMES


def run_sync(coro):
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        return ex.submit(asyncio.run, coro).result()




@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """The three hand-made games plus two real ones (IMAP on seed 3, SD-MAP on seed 4 varied)."""
    path = tmp_path_factory.mktemp("report") / "r.db"

    async def fill():
        store = await Store.open(path)
        for g in GAMES:
            await store.import_trace(json.loads(json.dumps(g)))
        for seed, spec, mode in ((3, "imap", "uniform"), (4, "sdmap", "varied")):
            res = await run_game(generate_scenario(seed, cost_mode=mode), make_personas(spec, 5),
                                 GameConfig(deterministic=True))
            await store.import_trace(dict(json.loads(json.dumps(res.trace)), saved={"agents": ",".join([spec] * 5)}))
        await store.close()

    run_sync(fill())
    return str(path)


def test_json_has_the_tables(cli, db):
    rc, out, err = cli("report", "--db", db, "--json")
    assert rc == 0, err
    rep = json.loads(out)
    assert {"table", "protocols", "regret", "first_speaker", "group_by", "games", "seats"} <= set(rep)
    assert "leaderboard" not in rep and not any(k.startswith("_") for k in rep)
    assert rep["games"] == 5 and rep["seats"] == 19
    for row in rep["table"]:
        assert {"persona", "cost_mode", "games", "coordination", "excess", "messages_per_meeting", "fairness",
                "vps"} <= set(row)
    a = next(r for r in rep["table"] if r["persona"] == "llm:a" and r["cost_mode"] == "uniform")
    assert (a["seats"], a["coordination"], a["excess"], a["messages_per_meeting"], a["fairness"], a["vps"]) == (
        4, 0.75, 0.75, 2.0, 1.25, 6.0)
    imap = next(r for r in rep["protocols"] if r["persona"] == "imap")
    assert imap["messages_per_meeting"] == pytest.approx(2.0) and imap["coordination"] == 1.0
    # The real games have five meetings of three participants each.
    assert sum(r["agent_meetings"] for r in rep["first_speaker"] if r["group"] in ("imap", "sdmap")) == 30


def test_group_by_and_tasks_filter(cli, db):
    rc, out, _ = cli("report", "--db", db, "--json", "--group-by", "cost_mode")
    assert rc == 0
    rep = json.loads(out)
    assert [(r["cost_mode"], r["seats"]) for r in rep["table"]] == [("uniform", 11), ("varied", 8)]
    rc, out, _ = cli("report", "--db", db, "--json", "--tasks", "seed:3")
    assert rc == 0
    rep = json.loads(out)
    assert rep["games"] == 1 and [r["persona"] for r in rep["table"]] == ["imap"]


def test_csv(cli, db):
    rc, out, _ = cli("report", "--db", db, "--csv")
    assert rc == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == ["persona", "cost_mode", "seats", "games", "meetings", "coordination", "excess",
                             "messages_per_meeting", "fairness", "vps"]
    a = next(r for r in rows if r["persona"] == "llm:a" and r["cost_mode"] == "uniform")
    assert (a["seats"], a["coordination"], a["fairness"]) == ("4", "0.75", "1.25")
    rc, out, _ = cli("report", "--db", db, "--csv", "--leaderboard")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["pool"], r["name"]) for r in rows if r["pool"] == "models"] and all(
        r["mmr"] for r in rows if r["pool"] == "models")
    assert {r["name"] for r in rows if r["pool"] == "protocols"} == {"imap", "sdmap"}


def test_leaderboard_is_identical_on_the_same_database(cli, db):
    rc, first, _ = cli("report", "--db", db, "--leaderboard")
    assert rc == 0 and "Leaderboard" in first and "Reference protocols" in first
    rc, second, _ = cli("report", "--db", db, "--leaderboard")
    assert first == second
    rc, j1, _ = cli("report", "--db", db, "--leaderboard", "--json")
    rc, j2, _ = cli("report", "--db", db, "--leaderboard", "--json")
    assert j1 == j2
    lb = json.loads(j1)["leaderboard"]
    assert [r["name"] for r in lb["models"]] and [r["rank"] for r in lb["protocols"]] == [1, 2]


def test_text_output_names_the_tables(cli, db):
    rc, out, _ = cli("report", "--db", db)
    assert rc == 0
    for title in ("Table 1", "Table 2", "Completion-conditioned regret", "First-speaker effect"):
        assert title in out
    assert "Uniform" in out and "Varied" in out and "…" not in out  # nothing squeezed when piped


def test_plot_files_are_real_images(cli, db, tmp_path):
    import matplotlib.image as mpimg

    target = tmp_path / "fig.png"
    rc, out, err = cli("report", "--db", db, "--plot", str(target))
    assert rc == 0, err
    files = [tmp_path / "fig.png", tmp_path / "fig-fairness.png", tmp_path / "fig-messages.png"]
    for f in files:
        assert f"wrote {f}" in out
        data = f.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        img = mpimg.imread(str(f))
        assert img.ndim == 3 and img.shape[0] > 200 and img.shape[1] > 300 and img.shape[2] in (3, 4)
        assert img.std() > 0.01  # not a blank canvas
    # The privacy-cost plane has one panel per cost setting: wider than tall.
    plane = mpimg.imread(str(files[0]))
    assert plane.shape[1] > 1.5 * plane.shape[0]
    rc, out, _ = cli("report", "--db", db, "--plot", str(tmp_path / "p.png"), "--json")
    assert json.loads(out)["plots"] == [str(tmp_path / "p.png"), str(tmp_path / "p-fairness.png"),
                                        str(tmp_path / "p-messages.png")]


def test_mistakes_are_one_line_and_exit_2(cli, db, tmp_path):
    rc, _, err = cli("report", "--db", str(tmp_path / "none.db"))
    assert rc == 2 and "no save database at" in one_error_line(err)
    assert not (tmp_path / "none.db").exists()
    rc, _, err = cli("report", "--db", db, "--group-by", "colour")
    assert rc == 2 and "--group-by must be one of persona, model, cost_mode" in one_error_line(err)
    rc, _, err = cli("report", "--db", db, "--json", "--csv")
    assert rc == 2 and "choose one of --json, --csv and --tui" in one_error_line(err)
    rc, _, err = cli("report", "--db", db, "--tui", "--json")
    assert rc == 2 and "choose one of --json, --csv and --tui" in one_error_line(err)
    rc, _, err = cli("report", "--db", db, "--tui")  # pytest captures stdout: no terminal
    assert rc == 2 and "needs an interactive terminal" in one_error_line(err)
    rc, _, err = cli("report", "--db", db, "--tasks", "canonical:999")
    assert rc == 2 and "canonical:999" in one_error_line(err)
    rc, _, err = cli("report", "--db", db, "--plot", str(tmp_path / "no" / "such" / "f.png"))
    assert rc == 2 and "does not exist" in one_error_line(err)
    rc, _, err = cli("report", "--db", db, "--plot", str(tmp_path / "f.xyz"))
    assert rc == 2 and "cannot write the plots" in one_error_line(err)
    for not_a_file in ("", str(tmp_path), str(tmp_path) + "/", str(tmp_path / ".png")):
        # a folder once wrote '.png.png' into it, or '/tmp-fairness.png' beside it
        rc, _, err = cli("report", "--db", db, "--plot", not_a_file)
        assert rc == 2 and "give a file name such as results.png" in one_error_line(err), not_a_file
    assert not list(tmp_path.glob("*.png")) and not list(tmp_path.parent.glob(tmp_path.name + "-*.png"))
    notdb = tmp_path / "text.db"
    notdb.write_text("this is not sqlite")
    rc, _, err = cli("report", "--db", str(notdb))
    assert rc == 2 and "not a usable CalBench database" in one_error_line(err)


def test_an_empty_database_reports_nothing_kindly(cli, tmp_path):
    path = tmp_path / "empty.db"

    async def make():
        s = await Store.open(path)
        await s.close()

    run_sync(make())
    rc, out, _ = cli("report", "--db", str(path), "--leaderboard")
    assert rc == 0 and "No completed games match" in out
    rc, out, _ = cli("report", "--db", str(path), "--json")
    assert json.loads(out)["table"] == []


def test_suites_from_calbench_run_are_reported_per_protocol(cli, tmp_path):
    """Games saved by `calbench run` are grouped by protocol name, not by persona kind."""
    db = str(tmp_path / "runs.db")
    for agents in ("imap", "sdmap", "imap,imap,sdmap,sdmap,dsm-welfare"):
        rc, _, err = cli("run", "--tasks", "canonical:0-1", "--agents", agents, "--db", db, "--concurrency", "1")
        assert rc == 0, err
    rc, out, err = cli("report", "--db", db, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    seats = {r["persona"]: r["games"] for r in doc["table"]}
    assert set(seats) == {"imap", "sdmap", "dsm-welfare"}
    # Table 2 holds only games where every seat plays the same protocol.
    assert {r["persona"]: r["games"] for r in doc["protocols"]} == {"imap": 2, "sdmap": 2}
