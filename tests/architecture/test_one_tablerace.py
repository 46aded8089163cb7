"""Issue 23 step 6 (branch tablerace): one way a Textual DataTable is laid out in the app.

Textual's DataTable sizes auto-width columns in its idle handler and caches rendered lines
under a counter that pass does not bump, so a frame painted in between keeps the columns at
their labels' widths (tests/tui/test_games_table_layout.py shows it).  In ``calbench_tui`` a
DataTable is laid out by one function, ``calbench_tui/screens/games.py:fill_table``: every
column gets an explicit width from its label and cells, set in the same step as the rows.
"""

from __future__ import annotations

import ast
from pathlib import Path

from .astkit import called_name, source_tree

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "calbench_tui"
FILLER = ("calbench_tui/screens/games.py", "fill_table")
#: DataTable methods that add or resize columns and rows (each leaves the width to the idle pass
#: unless the column has an explicit width)
LAYOUT_CALLS = {"add_column", "add_columns", "add_row", "add_rows", "update_cell", "update_cell_at"}


def _modules_with_a_datatable() -> list[Path]:
    out = []
    for path in sorted(APP.rglob("*.py")):
        tree = source_tree(path)
        if any(isinstance(n, ast.ImportFrom) and (n.module or "").startswith("textual")
               and any(a.name == "DataTable" for a in n.names) for n in ast.walk(tree)):
            out.append(path)
    return out


def _layout_calls(tree: ast.Module) -> list[tuple[str, ast.Call, str | None]]:
    """(method, call, the top-level function or method it is in, else None) for each layout call."""
    scopes = [(n.name, n) for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    scopes += [(m.name, m) for c in tree.body if isinstance(c, ast.ClassDef) for m in c.body
               if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
    found = [(called_name(n), n, name) for name, scope in scopes for n in ast.walk(scope)
             if isinstance(n, ast.Call) and called_name(n) in LAYOUT_CALLS]
    inside = {id(n) for _, n, _ in found}
    found += [(called_name(n), n, None) for n in ast.walk(tree)
              if isinstance(n, ast.Call) and called_name(n) in LAYOUT_CALLS and id(n) not in inside]
    return found


def test_the_app_lays_out_a_datatable_in_one_function():
    modules = _modules_with_a_datatable()
    assert [p.relative_to(REPO).as_posix() for p in modules] == [FILLER[0]], \
        "a new DataTable screen lays its table out with fill_table (explicit widths, one step)"
    calls = _layout_calls(source_tree(REPO / FILLER[0]))
    assert calls, "fill_table adds the columns and rows"
    outside = [f"{m} at line {c.lineno} in {owner}" for m, c, owner in calls if owner != FILLER[1]]
    assert outside == [], "the table's columns and rows are added by fill_table only: " + ", ".join(outside)


def test_every_column_has_an_explicit_width():
    calls = _layout_calls(source_tree(REPO / FILLER[0]))
    methods = {m for m, _, _ in calls}
    assert methods <= {"add_column", "add_row"}, methods  # add_columns cannot give widths; update_cell resizes later
    for method, call, _ in calls:
        if method == "add_column":
            assert any(k.arg == "width" for k in call.keywords), f"add_column at line {call.lineno} has no width="
