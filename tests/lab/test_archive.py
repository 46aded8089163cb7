"""``lab/archive.py`` called directly: the work behind ``calbench games | export | import |
trace`` and replay's loading, on a real save database in tmp_path (no command line)."""

from __future__ import annotations

import asyncio
import json

import pytest

from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from personas.registry import make_personas
from lab import archive
from lab.archive import ArchiveError
from saves.errors import GameNotFound
from saves.store import Store


def _save(db: str, seed: int = 3) -> dict:
    """A finished scripted game saved the way the runner saves one; its trace."""
    async def go():
        task = generate_scenario(seed)
        gid = f"game-{seed:04d}-abcdefgh"
        async with await Store.open(db) as store:
            await store.create_game(gid, task_row=task.to_row(), config={}, agents="imap,imap,imap,imap,imap",
                                    settings_key="s", started_at="2026-01-01T00:00:00+00:00")
            sink = store.sink(gid, durable=False)
            # the seats the label names: verification checks the label against the seats (issue 35 item 4)
            res = await run_game(task, make_personas("imap", task.num_agents),
                                 GameConfig(deterministic=True), sink, game_id=gid)
            await sink.aclose()
            await store.finish_game(gid, res.trace)
        return json.loads(json.dumps(res.trace))
    return asyncio.run(go())


def _human_game_started(db: str, gid: str = "human-game-0001") -> str:
    """A game with a human seat that has only started (``running``, no live process)."""
    async def go():
        async with await Store.open(db) as store:
            await store.create_game(gid, task_row=generate_scenario(5).to_row(), config={"human_seat": 0},
                                    agents="human,imap,imap,imap,imap", settings_key="s",
                                    started_at="2026-01-02T00:00:00+00:00")
    asyncio.run(go())
    return gid


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("archive") / "one.db")
    return db, _save(db)


def test_listing_a_missing_database_creates_none(tmp_path):
    db = tmp_path / "none.db"
    assert archive.list_games(str(db)) == []
    assert not db.exists()


def test_a_running_game_without_its_process_is_listed_abandoned(tmp_path):
    db = str(tmp_path / "g.db")
    _save(db)
    gid = _human_game_started(db)
    games = {g["game_id"]: g for g in archive.list_games(db)}
    assert games[gid]["status"] == "abandoned" and games[gid]["stored_status"] == "running"
    assert [g["game_id"] for g in archive.list_games(db, status="completed")] == ["game-0003-abcdefgh"]


def test_export_game_writes_the_trace_and_refuses_a_game_in_play(tmp_path, saved):
    db, trace = saved
    out = tmp_path / "sub" / "g.json"
    with pytest.raises(ArchiveError, match="does not exist"):  # issue 35: folders are never made for a file
        archive.export_game(db, "game-0003", output=str(out))
    assert not out.parent.exists()
    out.parent.mkdir()
    done = archive.export_game(db, "game-0003", output=str(out))
    assert done.game_id == trace["game_id"] and done.events == len(trace["events"])
    assert json.loads(out.read_text()) == json.loads(done.text)
    with pytest.raises(GameNotFound):
        archive.export_game(db, "no-such-game")
    db2 = str(tmp_path / "h.db")
    gid = _human_game_started(db2)
    with pytest.raises(ArchiveError, match="has a human seat and has not ended"):
        archive.export_game(db2, gid)
    assert archive.export_game(db2, gid, reveal=True).game_id == gid


def test_export_all_writes_one_file_per_game_and_says_which_were_left_out(tmp_path):
    db = str(tmp_path / "g.db")
    _save(db)
    _human_game_started(db)
    seen, skipped = [], []
    done = archive.export_all(db, str(tmp_path / "out"), progress=lambda i, n: seen.append((i, n)),
                              skipped=skipped.append)
    assert (done.written, done.skipped) == (1, 1)
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["calbench-game-0003-abcdefgh.json"]
    assert seen == [(1, 2)] and "a person is still playing it" in skipped[0]
    (tmp_path / "file").write_text("x")
    with pytest.raises(ArchiveError, match="is a file; --all needs a directory"):
        archive.export_all(db, str(tmp_path / "file"))


def test_file_stem_keeps_a_plain_id_and_never_leaves_the_folder():
    assert archive.file_stem("game-0003-abcdefgh") == "game-0003-abcdefgh"
    stem = archive.file_stem("../../etc/passwd")
    assert "/" not in stem and not stem.startswith(".")


def test_import_files_one_line_per_file(tmp_path, saved):
    db, trace = saved
    good = tmp_path / "t.json"
    good.write_text(json.dumps(trace))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    target = str(tmp_path / "two.db")
    lines = archive.import_files(target, [str(good), str(bad), str(good)])
    assert [(ln.where, ln.outcome) for ln in lines] == [(str(good), "imported"), (str(bad), "failed"),
                                                        (str(good), "duplicate")]
    assert "not valid JSON" in lines[1].detail and lines[0].detail == trace["game_id"]
    # a whole database merged: its game is a duplicate here; the database itself is refused
    lines = archive.import_files(target, [db, target])
    assert [ln.outcome for ln in lines] == ["duplicate", "failed"]
    assert lines[1].detail.endswith("is the database being imported into")


def test_a_trace_that_does_not_verify_is_refused_or_kept_marked(tmp_path, saved):
    _, trace = saved
    edited = json.loads(json.dumps(trace))
    edited["metrics"]["coordination_rate"] = 0.123
    f = tmp_path / "e.json"
    f.write_text(json.dumps(edited))
    [line] = archive.import_files(str(tmp_path / "a.db"), [str(f)])
    assert line.outcome == "failed" and "does not verify" in line.detail
    [line] = archive.import_files(str(tmp_path / "b.db"), [str(f)], keep_unverified=True)
    assert line.outcome == "unverified"


@pytest.mark.parametrize("content,words", [(b"\xff\xfe", "not a text file"), (b"[1, 2]", "not a game trace"),
                                           (b'{"a": 1', "not valid JSON")])
def test_read_trace_file_names_what_is_wrong(tmp_path, content, words):
    f = tmp_path / "x.json"
    f.write_bytes(content)
    with pytest.raises(ArchiveError, match=words):
        archive.read_trace_file(str(f))


def test_load_trace_reads_a_file_without_asking_for_the_database(tmp_path, saved):
    _, trace = saved
    f = tmp_path / "t.json"
    f.write_text(json.dumps(trace))

    def no_db():
        raise AssertionError("the database was asked for")

    assert archive.load_trace(str(f), no_db)["game_id"] == trace["game_id"]
    with pytest.raises(ArchiveError, match="is a directory"):
        archive.load_trace(str(tmp_path), no_db)
    with pytest.raises(ArchiveError, match="no such file"):
        archive.load_trace(str(tmp_path / "missing.json"), no_db)


def test_load_trace_of_a_saved_game_and_the_peek_guard(tmp_path, saved):
    db, trace = saved
    assert archive.load_trace("game-0003", lambda: db)["game_id"] == trace["game_id"]
    db2 = str(tmp_path / "h.db")
    gid = _human_game_started(db2)
    with pytest.raises(ArchiveError, match="replaying it now"):
        archive.load_trace(gid, lambda: db2, what="replaying")


def test_verify_and_fold_to_an_event(saved):
    _, trace = saved
    res, cals = archive.verify(trace, "t.json")
    assert res.verified and len(cals) == len(trace["task"]["calendars"])
    out = archive.trace_json(res, cals, None)
    assert out["verified"] is True and out["at"] is None and out["game_id"] == trace["game_id"]
    res0, cals0 = archive.verify(trace, "t.json", at=0)
    assert archive.trace_json(res0, cals0, 0)["at"] == 0
    last = len(trace["events"]) - 1
    with pytest.raises(ArchiveError, match=f"--at {last + 1}: this trace has events 0-{last}"):
        archive.verify(trace, "t.json", at=last + 1)


def test_check_replay_counts_seats_and_refuses_a_seat_the_game_has_not(saved):
    _, trace = saved
    assert archive.check_replay(trace, None, "t") == 5
    with pytest.raises(ArchiveError, match="--seat 5: this game has seats 0-4"):
        archive.check_replay(trace, 5, "t")
