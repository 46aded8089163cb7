"""The house counts of issue 23, read from the source with ``ast`` (nothing is imported or run).

    python benchmarks/house_counts.py            # a short report
    python benchmarks/house_counts.py --json     # the same numbers as JSON
    python benchmarks/house_counts.py --root /work/main --top 20

Counted over the project's packages (every top-level folder with an ``__init__.py``, not
``tests`` or ``benchmarks``; ``--with-tests`` adds those two):

* ``Session(`` and ``GameConfig(`` call sites (a call whose callee is that name or ends in
  ``.Session`` / ``.GameConfig``);
* ``P0 =`` definitions (a module-level, class-level or local assignment to ``P0``);
* cyclomatic complexity per function (McCabe): 1, plus one for each ``if``/``elif``, ternary,
  ``for``, ``while``, ``except`` clause, each extra operand of ``and``/``or``, each ``if`` of a
  comprehension and each ``case`` of a ``match``; nested functions count on their own;
* lines per module (physical lines).

Run it before and after a change to a game's set-up, a fold or the scoring, and compare.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SKIP = {"tests", "benchmarks", "build", "dist"}


@dataclass
class FunctionCount:
    where: str  # file:qualified.name
    file: str
    function: str
    first_line: int
    lines: int
    complexity: int


def packages(root: Path, with_tests: bool = False) -> list[Path]:
    out = [p for p in sorted(root.iterdir())
           if p.is_dir() and not p.name.startswith(".") and p.name not in SKIP and (p / "__init__.py").exists()]
    if with_tests:
        out += [root / n for n in ("tests", "benchmarks") if (root / n).is_dir()]
    return out


def sources(root: Path, with_tests: bool = False) -> list[Path]:
    files: list[Path] = []
    for pkg in packages(root, with_tests):
        files += sorted(f for f in pkg.rglob("*.py") if ".venv" not in f.parts and "__pycache__" not in f.parts)
    return files


def callee(node: ast.Call) -> str | None:
    f = node.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


def complexity(fn: ast.AST) -> int:
    """McCabe's number of one function, not counting the functions and classes defined in it."""
    n = 1
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue  # counted on their own
        if isinstance(node, (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler)):
            n += 1
        elif isinstance(node, ast.BoolOp):
            n += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            n += len(node.ifs)
        elif isinstance(node, ast.match_case):
            n += 1
        stack.extend(ast.iter_child_nodes(node))
    return n


def _functions(tree: ast.AST, rel: str) -> list[FunctionCount]:
    out: list[FunctionCount] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                lines = (child.end_lineno or child.lineno) - child.lineno + 1
                out.append(FunctionCount(f"{rel}:{name}", rel, name, child.lineno, lines, complexity(child)))
                walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(tree, "")
    return out


def count(root: Path = REPO, *, with_tests: bool = False, top: int = 15, largest: int = 10) -> dict:
    calls: dict[str, list[str]] = {"Session": [], "GameConfig": []}
    p0: list[str] = []
    functions: list[FunctionCount] = []
    modules: list[tuple[str, int]] = []
    for path in sources(root, with_tests):
        rel = str(path.relative_to(root))
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text, filename=rel)
        except SyntaxError as exc:
            raise SystemExit(f"house_counts: cannot parse {rel}: {exc}") from None
        modules.append((rel, len(text.splitlines())))
        functions += _functions(tree, rel)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and callee(node) in calls:
                calls[callee(node)].append(f"{rel}:{node.lineno}")
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AnnAssign) else []
            if any(isinstance(t, ast.Name) and t.id == "P0" for t in targets):
                p0.append(f"{rel}:{node.lineno}")
    for sites in (*calls.values(), p0):
        sites.sort(key=lambda w: (w.rsplit(":", 1)[0], int(w.rsplit(":", 1)[1])))
    functions.sort(key=lambda f: (-f.complexity, -f.lines, f.where))
    modules.sort(key=lambda m: (-m[1], m[0]))
    return {
        "root": str(root),
        "files": len(modules),
        "lines": sum(n for _, n in modules),
        "session_calls": {"count": len(calls["Session"]), "sites": calls["Session"]},
        "gameconfig_calls": {"count": len(calls["GameConfig"]), "sites": calls["GameConfig"]},
        "p0_definitions": {"count": len(p0), "sites": p0},
        "functions": len(functions),
        "functions_over_20": sum(1 for f in functions if f.complexity > 20),
        "most_complex": [asdict(f) for f in functions[:top]],
        "largest_modules": [{"module": m, "lines": n} for m, n in modules[:largest]],
    }


def report(c: dict) -> str:
    out = [f"house counts of {c['root']}: {c['files']} files, {c['lines']} lines, {c['functions']} functions",
           f"  Session( call sites:    {c['session_calls']['count']:>3}   {', '.join(c['session_calls']['sites'])}",
           f"  GameConfig( call sites: {c['gameconfig_calls']['count']:>3}   {', '.join(c['gameconfig_calls']['sites'])}",
           f"  P0 = definitions:       {c['p0_definitions']['count']:>3}   {', '.join(c['p0_definitions']['sites'])}",
           f"  functions with complexity > 20: {c['functions_over_20']}",
           "", f"the {len(c['most_complex'])} most complex functions (file:function:lines:complexity)"]
    out += [f"  {f['file']}:{f['function']}:{f['lines']}:{f['complexity']}" for f in c["most_complex"]]
    out += ["", f"the {len(c['largest_modules'])} largest modules (lines)"]
    out += [f"  {m['lines']:>6}  {m['module']}" for m in c["largest_modules"]]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=str(REPO), help="the checkout to count (default: this one)")
    ap.add_argument("--json", action="store_true", help="print the counts as JSON")
    ap.add_argument("--top", type=int, default=15, help="how many of the most complex functions to list (15)")
    ap.add_argument("--largest", type=int, default=10, help="how many of the largest modules to list (10)")
    ap.add_argument("--with-tests", action="store_true", help="count tests/ and benchmarks/ too")
    args = ap.parse_args(argv)
    root = Path(args.root)
    if not root.is_dir():
        print(f"house_counts: error: {root} is not a folder", file=sys.stderr)
        return 2
    c = count(root, with_tests=args.with_tests, top=args.top, largest=args.largest)
    print(json.dumps(c, indent=2) if args.json else report(c))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
