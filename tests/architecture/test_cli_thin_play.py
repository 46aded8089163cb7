"""Issue 23 step 5, held for ``calbench-play``, ``run``, ``serve``, ``suite`` and ``study``:
each command is argparse → one lab call (two where there are two steps) → print.

What a command used to decide itself — resolving tasks, checking specs against tasks,
building settings, resuming, choosing processes, serving loops, signal handling — lives in
``lab/`` (``lab/launch.py``, ``lab/runplan.py``, ``lab/serving.py``, ``lab/suites.py``,
``lab/study/links.py``, ``lab/study/admit.py``).  These checks fail when it creeps back.
"""

from __future__ import annotations

import ast
from pathlib import Path

from .astkit import house_counts, source_tree

REPO = Path(__file__).resolve().parents[2]

COMMANDS = REPO / "calbench_cli" / "commands"
MODULES = ("play", "serve", "run", "suite", "study")
#: the most branches a command's handler may have: its options turned into the call's
#: arguments, one except clause, and what it prints (play.py:handle was 37, run.py:handle 34)
MAX_HANDLER_COMPLEXITY = 10
#: what a thin command never does itself: event loops and signals, processes, reading task
#: references, the store, a table, a resume (the lab calls own those)
FORBIDDEN_MODULES = {"asyncio", "signal", "multiprocessing", "engine.taskref", "saves.store", "lab.table",
                     "lab.session"}
FORBIDDEN_NAMES = {"load_resume", "resolve_tasks", "resolve_task", "RunSettings", "Table", "make_personas",
                   "run_cli_suite", "generate_suite", "load_task_file"}


def _tree(name: str) -> ast.Module:
    path = COMMANDS / f"{name}.py"
    return source_tree(path)


def _handlers(tree: ast.Module):
    """Every function of a handler (``handle``, ``handle_*``, ``_handle_*``) and the functions nested in it."""
    def walk(node, prefix, inside):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                mine = inside or child.name.lstrip("_").startswith("handle")
                if mine:
                    yield name, child
                yield from walk(child, name + ".", mine)
            elif not isinstance(child, ast.ClassDef):
                yield from walk(child, prefix, inside)

    yield from walk(tree, "", False)


def test_every_handler_of_these_commands_is_small():
    complexity = house_counts().complexity  # McCabe; nested functions counted on their own
    too_big = []
    for mod in MODULES:
        handlers = list(_handlers(_tree(mod)))
        assert handlers, f"{mod}.py has no handler"
        too_big += [f"{mod}.py:{name} has complexity {complexity(fn)}" for name, fn in handlers
                    if complexity(fn) > MAX_HANDLER_COMPLEXITY]
    assert not too_big, "; ".join(too_big) + f" (at most {MAX_HANDLER_COMPLEXITY}: move the decisions into lab/)"


def test_these_commands_leave_loops_tasks_store_and_tables_to_the_lab():
    found = []
    for mod in MODULES:
        for node in ast.walk(_tree(mod)):
            if isinstance(node, ast.Import):
                found += [f"{mod}.py imports {a.name}" for a in node.names if a.name in FORBIDDEN_MODULES]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module in FORBIDDEN_MODULES:
                    found.append(f"{mod}.py imports from {node.module}")
                if node.module.split(".")[0] in ("engine", "lab", "personas", "saves"):
                    found += [f"{mod}.py imports {a.name} from {node.module}" for a in node.names
                              if a.name in FORBIDDEN_NAMES]
    assert not found, "; ".join(found)


def test_the_lab_calls_import_no_textual_and_no_command_line():
    for rel in ("lab/launch.py", "lab/runplan.py", "lab/serving.py", "lab/study/links.py", "lab/study/admit.py"):
        tree = source_tree(REPO / rel)
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}
        bad = sorted(n for n in names if n.split(".")[0] in ("textual", "calbench_tui", "calbench_cli"))
        assert not bad, f"{rel} imports {bad}"
