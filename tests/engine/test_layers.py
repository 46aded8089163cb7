"""The import direction is the architecture (docs/architecture.md).

engine imports no sibling package and never textual, openai or aiosqlite; personas and
saves import engine but not the app.  Checked on the source (static) and at run time.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "engine": {"textual", "openai", "aiosqlite", "personas", "saves", "lab", "calbench_tui"},
    "personas": {"textual", "aiosqlite", "saves", "lab", "calbench_tui"},
    "saves": {"textual", "openai", "personas", "lab", "calbench_tui"},
    "lab": {"textual", "calbench_tui"},
}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_static_import_rules():
    problems = []
    for pkg, banned in FORBIDDEN.items():
        for path in sorted((REPO / pkg).rglob("*.py")):
            bad = imported_roots(path) & banned
            if bad:
                problems.append(f"{path.relative_to(REPO)} imports {sorted(bad)}")
    assert not problems, "\n".join(problems)


def test_engine_runs_without_the_heavy_packages():
    code = (
        "import sys, asyncio\n"
        "import engine.game, engine.rules, engine.observe, engine.metrics, engine.oracle, engine.generate\n"
        "bad = [m for m in ('textual', 'openai', 'aiosqlite') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
