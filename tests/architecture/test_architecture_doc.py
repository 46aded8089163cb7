"""docs/architecture.md's "One owner each" table tells the truth: every owner it names
exists, and every test it names as the enforcer exists (issue 23)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .astkit import source_tree

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


def _rows() -> list[tuple[str, str, str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## One owner each", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("one …", "---") and not set(cells[0]) <= {"-", " "}:
            rows.append((cells[0], cells[1], cells[2]))
    return rows


def _tests_in(path: Path) -> set[str]:
    tree = source_tree(path)
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_the_table_has_a_row_for_every_one_issue_23_names():
    ones = " ".join(r[0] for r in _rows())
    for word in ("fold", "scoring", "VPS", "set-up", "game-id", "human seat", "channel", "seat's model",
                 "cheapest common slot", "store", "no-peeking", "command line"):
        assert word in ones, word


def test_every_owner_and_every_enforcing_test_exists():
    last_file = None
    for one, owner, enforcer in _rows():
        for path in re.findall(r"`([\w/]+\.py)", owner):
            assert (ROOT / path).is_file(), f"{one}: {path} does not exist"
        for path, names in re.findall(r"`(tests/[\w/]+\.py)((?:::\w+)?)`", enforcer):
            last_file = ROOT / path
            assert last_file.is_file(), f"{one}: {path} does not exist"
            if names:
                assert names[2:] in _tests_in(last_file), f"{one}: {path}{names} does not exist"
        for short, name in re.findall(r"`(test_[\w]+\.py)::(\w+)`", enforcer):
            path = ROOT / "tests" / "architecture" / short
            assert name in _tests_in(path), f"{one}: {short}::{name} does not exist"
        assert re.search(r"test_\w+\.py", enforcer), f"{one}: no enforcing test named"
