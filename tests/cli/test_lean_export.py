"""Lean, compressed stored traces: `calbench export` writes what it wrote when every event had its row.

A game saved before migration 5 keeps one row per event; a game saved now keeps one lean
blob.  Both must export to the same bytes, for a scripted game and for an LLM game (whose
trace holds prompts), and the blob must be much smaller.
"""

from __future__ import annotations

import json
import shutil
import sqlite3

import orjson
import pytest

from calbench_cli.cli import main
from saves.codec import _event_row, decode_events


@pytest.fixture
def mock_url(threaded_mock):
    """The loopback mock served from its own thread, so the CLI can run its own event loop."""
    return threaded_mock(policy="cooperative")[0]


def as_rows(db: str, game_id: str) -> None:
    """Store one game the way migration 2 did: its blob becomes one row per event."""
    con = sqlite3.connect(db)
    codec, blob, row = con.execute("SELECT b.codec, b.data, g.task_row FROM event_blobs b JOIN games g "
                                   "USING (game_id) WHERE game_id = ?", (game_id,)).fetchone()
    events = decode_events(codec, blob, orjson.loads(row))
    con.executemany("INSERT INTO events (game_id, seq, type, timestamp, round, agent_id, data) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)", [_event_row(game_id, e, e["seq"]) for e in events])
    con.execute("DELETE FROM event_blobs WHERE game_id = ?", (game_id,))
    con.commit()
    con.close()


def export(db: str, game_id: str, out) -> str:
    assert main(["export", game_id, "--db", db, "-o", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def check_same_export(tmp_path, db: str) -> dict:
    con = sqlite3.connect(db)
    (gid, codec, n), = con.execute("SELECT game_id, codec, events FROM event_blobs").fetchall()
    assert con.execute("SELECT COUNT(*) FROM events").fetchone() == (0,)
    blob_bytes = con.execute("SELECT LENGTH(data) FROM event_blobs").fetchone()[0]
    con.close()
    assert codec == "lean-zstd"
    new = export(db, gid, tmp_path / "new.json")
    old_db = str(tmp_path / "old.db")
    shutil.copy(db, old_db)
    as_rows(old_db, gid)
    old = export(old_db, gid, tmp_path / "old.json")
    assert new == old  # byte for byte
    trace = json.loads(new)
    assert len(trace["events"]) == n
    row_bytes = sum(len(orjson.dumps(e["data"])) for e in trace["events"])
    assert blob_bytes * 10 < row_bytes  # lean and compressed: over ten times smaller than the rows' JSON
    return trace


def test_scripted_game_exports_the_same(tmp_path, capsys):
    db = str(tmp_path / "s.db")
    assert main(["run", "--tasks", "canonical:3", "--agents", "dsm-private", "--deterministic", "--db", db,
                 "--json"]) == 0
    trace = check_same_export(tmp_path, db)
    assert any("calendar_render" in e["data"] for e in trace["events"] if e["type"] == "turn_start")


def test_llm_game_with_prompts_exports_the_same(tmp_path, capsys, monkeypatch, mock_url):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    db = str(tmp_path / "l.db")
    assert main(["run", "--tasks", "canonical:0", "--agents", "llm:m,imap,llm:m,imap,imap", "--base-url", mock_url,
                 "--max-turns", "4", "--deterministic", "--db", db, "--json"]) == 0
    trace = check_same_export(tmp_path, db)
    prompts = [e["data"].get("prompt_sent") for e in trace["events"] if e["type"] == "turn_start"]
    assert any(isinstance(p, str) and p for p in prompts)  # the LLM seats' prompts are in the trace
