"""Issue 23 step 5, held: a headless command is argparse → one lab call → print.

For the commands of the save database, reports, replay, the oracle, scenarios, rescoring
and the mock LLM (``calbench_cli/commands/{saves,report,replay,oracle,scenario,rescore,llm}.py``):

* each handler (a ``handle*`` function) stays small: McCabe's complexity (as
  ``benchmarks/house_counts.py`` counts it) at most :data:`MAX_HANDLER_COMPLEXITY`; the
  printing lives in helpers beside it, the work in ``lab/`` (docs/architecture.md);
* the module never opens the save database itself: no coroutine, no ``saves.store``
  import, no ``with_store``/``Store.open`` — the lab call opens and closes it;
* the lab modules they call print nothing (they return data, or raise one-line errors).
"""

from __future__ import annotations

import ast
from pathlib import Path

from .astkit import house_counts, source_tree

REPO = Path(__file__).resolve().parents[2]
COMMANDS = REPO / "calbench_cli" / "commands"
#: the commands this rule covers (the others — play, serve, run, suite, study — are slimmed apart)
THIN = ("saves.py", "report.py", "replay.py", "oracle.py", "scenario.py", "rescore.py", "llm.py")
#: the largest a handler's complexity may be: parse, call, choose an output, print
MAX_HANDLER_COMPLEXITY = 8
#: where their work went; none of these prints
LAB = ("lab/archive.py", "lab/report/saved.py", "lab/oracle_check.py", "lab/scenario.py", "lab/rescore.py")


def _tree(path: Path) -> ast.Module:
    return source_tree(path)


def test_each_handler_is_parse_call_print():
    complexity = house_counts().complexity
    handlers: dict[str, int] = {}
    for name in THIN:
        for node in ast.walk(_tree(COMMANDS / name)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("handle"):
                handlers[f"{name}:{node.name}"] = complexity(node)
    assert len(handlers) >= len(THIN), handlers  # every module has its handler(s)
    big = {h: c for h, c in handlers.items() if c > MAX_HANDLER_COMPLEXITY}
    assert not big, f"handlers over complexity {MAX_HANDLER_COMPLEXITY} (move the work to lab/): {big}"


def test_the_commands_do_not_open_the_save_database():
    found = []
    for name in THIN:
        tree = _tree(COMMANDS / name)
        for node in ast.walk(tree):
            if isinstance(node, ast.AsyncFunctionDef):
                found.append(f"{name}:{node.lineno}: async def {node.name} (a coroutine over the store)")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("saves.store"):
                found.append(f"{name}:{node.lineno}: imports saves.store")
            elif isinstance(node, ast.ImportFrom) and any(a.name in ("with_store", "Store") for a in node.names):
                found.append(f"{name}:{node.lineno}: imports {', '.join(a.name for a in node.names)}")
            elif isinstance(node, ast.Name) and node.id == "with_store":
                found.append(f"{name}:{node.lineno}: with_store")
    assert not found, found


def test_the_lab_calls_print_nothing():
    for rel in LAB:
        for node in ast.walk(_tree(REPO / rel)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in ("print", "input"), f"{rel}:{node.lineno} calls {node.func.id}"
        assert "sys.stdout" not in (REPO / rel).read_text(encoding="utf-8"), rel
