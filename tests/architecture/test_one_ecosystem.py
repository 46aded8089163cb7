"""Issue 32: the public package ``calbench`` and its optional extras have one home each.

* ``calbench/`` sits above the lab, beside the command line: nothing below it imports it,
  ``calbench_cli`` does not import it and it imports neither ``calbench_cli``, the app nor
  Textual (the static rule is ``tests/engine/test_layers.py``; here: at run time, and the
  homes of the extras);
* Inspect AI (``inspect_ai``) is imported only by ``calbench/`` and ``lab/inspect_log.py``,
  PettingZoo and Gymnasium only by ``calbench/`` — and, in those homes, never at the top of
  a module that ``import calbench`` or the lab loads (a missing extra is a clear message
  where it is used, never an import error of the program).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "personas", "saves", "lab", "calbench_tui", "calbench_devtools", "calbench_cli", "calbench")
HOMES = {
    "inspect_ai": {"calbench/inspect_task.py", "calbench/inspect_client.py", "calbench/_registry.py",
                   "lab/inspect_log.py"},
    "pettingzoo": {"calbench/pettingzoo_env.py"},
    "gymnasium": {"calbench/pettingzoo_env.py"},
}
#: modules of a home that may import their extra at the top (loaded only when the extra is used)
TOP_LEVEL_OK = {"calbench/inspect_task.py", "calbench/pettingzoo_env.py"}


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(root module, at the top of the module?) for every absolute import of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name.split(".")[0], id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.module.split(".")[0], id(node) in top))
    return out


def test_the_extras_are_imported_only_in_their_homes():
    found: dict[str, set[str]] = {m: set() for m in HOMES}
    at_top = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for root, top in _imports(path):
                if root in HOMES:
                    found[root].add(rel)
                    if top and rel not in TOP_LEVEL_OK:
                        at_top.append(f"{rel} imports {root} at the top")
    for module, homes in HOMES.items():
        assert found[module] <= homes, f"{module} imported outside its homes: {sorted(found[module] - homes)}"
    assert found["inspect_ai"] and found["pettingzoo"], "the homes named here are stale"
    assert not at_top, at_top


def test_the_public_package_is_a_layer_of_its_own():
    """At run time: the program's command line and the lab load without it, and it loads no Textual."""
    code = ("import sys\n"
            "import calbench_cli.cli, lab.runner, lab.archive\n"
            "assert 'calbench' not in sys.modules, 'the command line or the lab imported calbench'\n"
            "import calbench, calbench.api\n"
            "bad = [m for m in ('textual', 'calbench_tui', 'calbench_cli.commands.play') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
