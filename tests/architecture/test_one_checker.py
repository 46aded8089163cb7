"""One CSV writer (issue 35, 3): every CSV the product writes goes through ``lab/csvfile.py``,
which neutralises formula cells; no other module makes a ``csv.writer`` or ``csv.DictWriter``.
One trace checker (issue 35, 5): ``engine/tracecheck.py``."""

from __future__ import annotations

import ast
from pathlib import Path

from .astkit import source_tree

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("engine", "personas", "saves", "lab", "calbench_tui", "calbench_cli", "calbench_devtools")
OWNER = Path("lab/csvfile.py")


def csv_writers(path: Path) -> list[int]:
    """Lines of ``path`` that make a CSV writer (``csv.writer(`` / ``csv.DictWriter(`` or the
    names imported from ``csv``)."""
    tree = source_tree(path)
    imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "csv"
                for a in n.names if a.name in ("writer", "DictWriter")}
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            if (isinstance(f, ast.Attribute) and f.attr in ("writer", "DictWriter") and isinstance(f.value, ast.Name)
                    and f.value.id == "csv") or (isinstance(f, ast.Name) and f.id in imported):
                out.append(n.lineno)
    return out


def test_every_csv_is_written_by_the_one_writer():
    found = {f"{path.relative_to(REPO)}:{line}" for pkg in PRODUCT for path in sorted((REPO / pkg).rglob("*.py"))
             if path.relative_to(REPO) != OWNER for line in csv_writers(path)}
    assert not found, f"write CSV through lab/csvfile.py (formula cells neutralised): {sorted(found)}"
    assert csv_writers(REPO / OWNER)


def test_the_check_sees_both_spellings(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import csv\nfrom csv import DictWriter as D\nw = csv.writer(fh)\nd = D(fh, [])\n")
    assert csv_writers(f) == [3, 4]


def test_one_trace_checker():
    """Issue 35 (5): what a trace may hold is checked by ``engine/tracecheck.py`` alone; the store
    (``saves/checks.py``) and ``calbench trace FILE`` (``lab.archive.load_trace``) call it."""
    checks = (REPO / "saves" / "checks.py").read_text(encoding="utf-8")
    assert "from engine.tracecheck import" in checks and "raise StoreError" not in checks
    assert "check_trace(trace)" in (REPO / "lab" / "archive.py").read_text(encoding="utf-8")
    defs = {f"{path.relative_to(REPO)}" for pkg in PRODUCT for path in sorted((REPO / pkg).rglob("*.py"))
            for n in ast.walk(source_tree(path))
            if isinstance(n, ast.FunctionDef) and n.name in ("_check_events", "_locate_bad_value", "_check_values")}
    assert defs == {"engine/tracecheck.py"}, defs
