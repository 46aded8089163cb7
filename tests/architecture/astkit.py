"""The project's source read as syntax trees, for the architecture tests.

The counting itself lives once, in ``benchmarks/house_counts.py`` (the benchmark prints the
house's counts; these tests hold them): :func:`house_counts` loads it, and
:func:`called_name` is its reading of a call's name.

Each file is parsed once per test session (:func:`source_tree`): the architecture
tests walk the same ~300 modules many times, and parsing was most of their time.  The trees
are shared, so a test reads them and never changes them.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def house_counts() -> ModuleType:
    """``benchmarks/house_counts.py`` as a module (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location("house_counts", ROOT / "benchmarks" / "house_counts.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("house_counts", mod)  # (its dataclass looks itself up there)
    spec.loader.exec_module(sys.modules["house_counts"])
    return sys.modules["house_counts"]


@functools.cache
def _parsed(path: str, mtime_ns: int, size: int) -> ast.Module:
    with open(path, encoding="utf-8") as fh:
        return ast.parse(fh.read(), filename=path)


def source_tree(path: Path | str) -> ast.Module:
    """``ast.parse`` of the file at ``path``, once per session (again if the file changed)."""
    p = Path(path).resolve()
    st = p.stat()
    return _parsed(str(p), st.st_mtime_ns, st.st_size)


#: folders never walked for the project's own files (a venv holds tens of thousands)
_NOT_OURS = {".venv", ".git", "__pycache__", "node_modules", "site-packages", ".tox", ".mypy_cache", ".pytest_cache"}


@functools.cache
def repo_files(root: Path = ROOT) -> tuple[Path, ...]:
    """Every ``*.py`` of the checkout, sorted, without walking into a venv or ``.git``."""
    out = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _NOT_OURS]
        out += [Path(folder) / n for n in names if n.endswith(".py")]
    return tuple(sorted(out))


def called_name(node: ast.Call) -> str | None:
    """``f`` for ``f(...)`` and ``x.f(...)``; None for anything else called."""
    return house_counts().callee(node)


def code_strings(tree: ast.AST) -> list[ast.Constant]:
    """Every string constant of a module that is code, not a docstring (f-string pieces
    included: a name written into a sentence is still written)."""
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]
