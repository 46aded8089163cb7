"""The canonical suite is read from its stored rows, and those rows are what the recipe builds.

``engine/suites/canonical-1.jsonl.zst`` saves a process building the 90 tasks (the oracle on
each); if the code that builds them changes, this test fails until
``python -m calbench_devtools.canonical_rows`` writes the file again (and SUITE_VERSION is
bumped when the tasks change).
"""

from __future__ import annotations

import orjson
import pytest
import zstandard

import engine.suite as suite
from engine.suite import CANONICAL_SIZE, STORED_ROWS, built_row, canonical_task


def _stored_lines() -> list[bytes]:
    return zstandard.ZstdDecompressor().decompress(STORED_ROWS.read_bytes()).splitlines()


def test_the_stored_rows_are_exactly_what_the_recipe_builds():
    stored = _stored_lines()
    assert len(stored) == CANONICAL_SIZE
    for i, line in enumerate(stored):
        assert line == built_row(i), (f"canonical task {i}: the stored row differs from the built one; "
                                      "run python -m calbench_devtools.canonical_rows")


def test_a_canonical_task_comes_from_the_stored_row():
    assert suite._stored_rows() is not None  # the file is there and reads
    t = canonical_task(17)
    assert orjson.dumps(t.row) == _stored_lines()[17]
    assert t.task_id == "canonical-017" and t.cache == {}
    assert canonical_task(17) is not t and canonical_task(17).row is not t.row  # fresh objects, as before


def test_a_damaged_row_is_built_instead(tmp_path, monkeypatch):
    lines = _stored_lines()
    lines[6] = b'{"task_id": "canonical-006", "calendars": [['  # cut short
    path = tmp_path / "rows.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(b"\n".join(lines)))
    monkeypatch.setattr(suite, "STORED_ROWS", path)
    suite._stored_rows.cache_clear()
    suite._annotated.cache_clear()
    try:
        assert orjson.dumps(canonical_task(6).row) == _stored_lines()[6]
    finally:
        suite._stored_rows.cache_clear()
        suite._annotated.cache_clear()


@pytest.mark.parametrize("content", [None, b"not zstd", b"short"])
def test_without_a_readable_file_the_rows_are_built_the_same(tmp_path, monkeypatch, content):
    path = tmp_path / "rows.jsonl.zst"
    if content == b"short":  # reads, but is not the whole suite
        content = zstandard.ZstdCompressor().compress(b"\n".join(_stored_lines()[:3]))
    if content is not None:
        path.write_bytes(content)
    monkeypatch.setattr(suite, "STORED_ROWS", path)
    suite._stored_rows.cache_clear()
    suite._annotated.cache_clear()
    try:
        assert suite._stored_rows() is None
        assert orjson.dumps(canonical_task(4).row) == _stored_lines()[4]
    finally:
        suite._stored_rows.cache_clear()
        suite._annotated.cache_clear()


def test_a_file_of_other_tasks_is_never_trusted(tmp_path, monkeypatch):
    lines = _stored_lines()
    path = tmp_path / "rows.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(b"\n".join(lines[1:] + lines[:1])))  # shifted by one
    monkeypatch.setattr(suite, "STORED_ROWS", path)
    suite._stored_rows.cache_clear()
    suite._annotated.cache_clear()
    try:
        assert canonical_task(5).task_id == "canonical-005"
        assert orjson.dumps(canonical_task(5).row) == lines[5]
    finally:
        suite._stored_rows.cache_clear()
        suite._annotated.cache_clear()
