"""The import direction is the architecture (docs/architecture.md).

engine imports no sibling package and never textual, openai or aiosqlite; personas and
saves import engine but not the app; lab (runs and reads games) never imports Textual or
the interface.  Inside the interface, screens do not import the command line and widgets
do not reach into a persona's internals.  No import cycle anywhere among the project's
modules.  Checked on the source (static, every import including those inside functions)
and at run time.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "engine": {"textual", "openai", "aiosqlite", "personas", "saves", "lab", "calbench_tui", "calbench_devtools",
               "calbench_cli", "calbench"},
    "personas": {"textual", "aiosqlite", "saves", "lab", "calbench_tui", "calbench_devtools", "calbench_cli",
                 "calbench", "inspect_ai", "pettingzoo", "gymnasium"},
    "saves": {"textual", "openai", "personas", "lab", "calbench_tui", "calbench_devtools", "calbench_cli", "calbench"},
    "lab": {"textual", "calbench_tui", "calbench_cli", "calbench"},
    # the loopback mock endpoint is a tool for tests and offline play, under the program
    "calbench_devtools": {"textual", "aiosqlite", "saves", "lab", "calbench_tui", "calbench_cli", "calbench"},
    # the app sits under the command line (the CLI opens it, never the other way)
    "calbench_tui": {"calbench_cli", "calbench"},
    # the public Python package sits above the lab, beside the command line: neither imports the other
    "calbench": {"textual", "calbench_tui", "calbench_cli", "calbench_devtools"},
    "calbench_cli": {"calbench"},
}


PACKAGES = ("engine", "personas", "saves", "lab", "calbench_tui", "calbench_devtools", "calbench_cli", "calbench")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(f): f for pkg in PACKAGES for f in sorted((REPO / pkg).rglob("*.py"))}


def imported_modules(path: Path) -> set[str]:
    """Every dotted name ``path`` imports (relative imports resolved; ``from a import b`` gives a and a.b)."""
    name = module_name(path)
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if path.name == "__init__.py" else 0)]
                pre = ".".join(base + ([node.module] if node.module else []))
            else:
                pre = node.module or ""
            out |= {pre} | {f"{pre}.{a.name}" for a in node.names}
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (a package's own parents left out)."""
    mods = project_modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps = set()
        for t in imported_modules(path):
            while t and t not in mods:
                t = t.rpartition(".")[0]
            if t and t != name and not name.startswith(t + "."):
                deps.add(t)
        graph[name] = deps
    return graph


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


def _rule_violations(folder: str, banned_prefixes: tuple[str, ...]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in sorted((REPO / folder).rglob("*.py")):
        bad = sorted(m for m in imported_modules(path) if any(m == b or m.startswith(b + ".") for b in banned_prefixes))
        if bad:
            out[str(path.relative_to(REPO))] = bad
    return out


def test_screens_do_not_import_the_command_line():
    bad = _rule_violations("calbench_tui/screens", ("calbench_cli.commands",))
    assert not bad, bad


#: Widgets that still reach into a persona, with the issue that moves them out.  Strict:
#: an entry that no longer imports a persona's internals must be removed from here.
WIDGETS_PENDING: set[str] = set()


def test_widgets_do_not_import_a_personas_internals():
    bad = _rule_violations("calbench_tui/widgets", ("personas.scripted", "personas.llm"))
    assert set(bad) - WIDGETS_PENDING == set(), {k: v for k, v in bad.items() if k not in WIDGETS_PENDING}
    assert WIDGETS_PENDING <= set(bad), f"no longer imports a persona's internals, drop from WIDGETS_PENDING: " \
                                         f"{sorted(WIDGETS_PENDING - set(bad))}"


def test_lab_never_imports_textual_or_the_interface():
    bad = _rule_violations("lab", ("textual", "calbench_tui"))
    assert not bad, bad
    code = ("import sys\n"
            "import lab.session, lab.runner, lab.summary, lab.report, lab.report.plots\n"
            "bad = [m for m in sys.modules if m == 'textual' or m.startswith(('textual.', 'calbench_tui'))]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_find_cycles_finds_a_cycle():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_among_the_projects_modules():
    graph = import_graph()
    assert "calbench_tui.screens.games" in graph and "lab.session" in graph  # the graph covers the project
    assert "lab.gamespec" in graph["lab.runner"] and "lab.session" in graph["lab.gamespec"]
    cycles = find_cycles(graph)
    assert not cycles, cycles
