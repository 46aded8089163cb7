"""Issue 24 (6): another program's SQLite file is refused without being written.

Before: ``games``, ``report`` and ``export`` given another program's database created a
``schema_version`` table in it and switched it to WAL before refusing it (or worse, went on
to add every CalBench table).  Now the file is read through a read-only connection first
and refused in one line; its bytes, journal mode and file set are unchanged.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3

import pytest


@pytest.fixture
def foreign(tmp_path):
    (tmp_path / "other").mkdir()
    path = tmp_path / "other" / "notes.sqlite"
    con = sqlite3.connect(path)
    con.executescript("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);"
                      "INSERT INTO notes (body) VALUES ('buy milk'), ('call Ana');"
                      "CREATE TABLE tags (note INTEGER, tag TEXT);")
    con.commit()
    con.close()
    return path


def _state(path):
    files = sorted(p.name for p in path.parent.iterdir())
    return hashlib.sha256(path.read_bytes()).hexdigest(), files


@pytest.mark.parametrize("argv", [
    ["games"], ["games", "--json"], ["report"], ["report", "--json"], ["export", "--all", "-o", "{tmp}/out"],
    ["export", "abcd", "-o", "{tmp}/x.json"], ["trace", "abcd"], ["run", "--tasks", "seed:1", "--agents", "imap"],
])
def test_reading_another_programs_database_writes_nothing(cli, foreign, tmp_path, argv):
    before = _state(foreign)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    rc, out, err = cli(*argv, "--db", str(foreign))
    assert rc == 2, (out, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "another program" in lines[0] and "notes" in lines[0], err
    assert _state(foreign) == before  # same bytes, no -wal / -shm / -journal left behind
    con = sqlite3.connect(f"file:{foreign}?mode=ro", uri=True)
    try:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert names == {"notes", "tags"}
    finally:
        con.close()


def test_merging_another_programs_database_leaves_it_alone(cli, foreign, tmp_path):
    before = _state(foreign)
    rc, out, err = cli("import", str(foreign), "--db", str(tmp_path / "mine.db"))
    assert rc == 1 and "another program" in err
    assert _state(foreign) == before


def test_our_own_databases_still_open(cli, tmp_path):
    db = tmp_path / "ours.db"
    rc, _, err = cli("run", "--tasks", "seed:1", "--agents", "imap", "--db", str(db))
    assert rc == 0, err
    rc, out, err = cli("games", "--db", str(db))
    assert rc == 0 and "seed" in out.lower() or "1" in out
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    # issue 35: a reading command refuses a 0-byte file in one line (it wrote its tables into it);
    # a writing command starts a database in it, as SQLite does
    rc, out, err = cli("games", "--db", str(empty))
    assert rc == 2 and "empty file (0 bytes)" in err and empty.stat().st_size == 0, err
    rc, _, err = cli("run", "--tasks", "seed:1", "--agents", "imap", "--db", str(empty))
    assert rc == 0, err
