"""Issue 23 step 6 (branch steady): tests that hold on a loaded machine, dead code kept out,
and the house counts that measure the other steps.

* No wall-clock threshold in a unit test: no ``assert`` compares a time.perf_counter() /
  time.monotonic() / time.time() difference (or a name holding one) with fewer than 10
  seconds.  A bound of a waiting loop (``assert time.monotonic() - t0 < 40, "never came"``)
  is a timeout, not a speed check; speed is measured in ``benchmarks/``.
* One wait for the paint in Pilot tests: ``tests/tui/helpers.py`` (``wait_painted``).
* The dead code removed in this step stays out.
* ``benchmarks/house_counts.py`` counts McCabe's complexity as its docstring says.
* No ``asyncio.wait_for`` in the product: on Python 3.11 it returns the awaited result when
  the result and a cancel land in the same loop turn, and the cancel (ctrl+q, a stopped run,
  table or study) is lost; ``asyncio.timeout`` lets the cancel win (tests/*/test_cancel_wins.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

from .astkit import called_name, house_counts, repo_files, source_tree

REPO = Path(__file__).resolve().parents[2]
CLOCKS = {"perf_counter", "monotonic", "time", "perf_counter_ns", "monotonic_ns"}
THRESHOLD = 10.0  # seconds: below this, an assert on elapsed time is a speed check


def _is_clock_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CLOCKS
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "time")


def _elapsed(node: ast.AST, names: set[str]) -> bool:
    """``time.X() - t0`` (either side a clock call), or a name assigned one."""
    if isinstance(node, ast.Name):
        return node.id in names
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and \
        (_is_clock_call(node.left) or _is_clock_call(node.right))


def wall_clock_thresholds(path: Path) -> list[int]:
    tree = source_tree(path)
    names = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and _elapsed(node.value, set())
             for t in node.targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for cmp in ast.walk(node.test):
            if not isinstance(cmp, ast.Compare):
                continue
            sides = [cmp.left, *cmp.comparators]
            for (a, op, b) in zip(sides, cmp.ops, sides[1:]):
                if isinstance(op, (ast.Lt, ast.LtE)) and _elapsed(a, names) and isinstance(b, ast.Constant) \
                        and isinstance(b.value, (int, float)) and b.value < THRESHOLD:
                    found.append(node.lineno)
    return found


def test_no_wall_clock_thresholds_in_unit_tests():
    found = [f"{path.relative_to(REPO)}:{line}" for path in sorted((REPO / "tests").rglob("*.py"))
             for line in wall_clock_thresholds(path)]
    assert found == [], "speed checks belong in benchmarks/, not in tests: " + ", ".join(found)


def test_the_threshold_check_catches_the_shapes_we_removed(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import time\n"
                     "def f():\n"
                     "    t0 = time.perf_counter()\n"
                     "    assert time.perf_counter() - t0 < 0.25\n"
                     "    waited = time.perf_counter() - t0\n"
                     "    assert waited >= 1.0 and waited < 4.0\n"
                     "    assert time.monotonic() - t0 < 40, 'a timeout, allowed'\n")
    assert wall_clock_thresholds(probe) == [4, 6]


def test_one_paint_wait_helper():
    defs = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        tree = source_tree(path)
        defs += [f"{path.relative_to(REPO)}" for node in ast.walk(tree)
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "wait_painted"]
    assert defs == ["tests/tui/helpers.py"]


def test_the_dead_code_stays_out():
    assert not (REPO / "engine" / "replay.py").exists()  # engine.trace / engine.verify are the modules
    gone = {"lab/runner.py": "prepare_resume", "lab/study/model.py": "study_id_of", "personas/base.py": "meeting_at",
            "calbench_tui/settings.py": "channel_label", "calbench_tui/widgets/batch.py": "set_destination"}
    for rel, name in gone.items():
        tree = source_tree(REPO / rel)
        assert not [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and n.name == name], f"{rel}: {name} is back"
    for path in repo_files():
        if ".venv" in path.parts or path == Path(__file__).resolve():
            continue
        text = path.read_text(errors="replace")
        assert "engine.replay import" not in text and "from engine import replay" not in text, path


def test_house_counts_mccabe_on_a_known_function():
    hc = house_counts()
    src = ("def f(xs, y):\n"
           "    if y and xs or not y:\n"          # if +1, and/or +2
           "        return [x for x in xs if x if x > 1]\n"  # two comprehension ifs +2
           "    for x in xs:\n"                   # +1
           "        while x:\n"                   # +1
           "            x -= 1\n"
           "    try:\n"
           "        pass\n"
           "    except ValueError:\n"             # +1
           "        pass\n"
           "    except KeyError:\n"               # +1
           "        pass\n"
           "    match y:\n"
           "        case 1: pass\n"               # +1
           "        case _: pass\n"               # +1
           "    def inner():\n"                   # counted on its own
           "        if y: pass\n"
           "    with open('x'): pass\n"           # with: +0
           "    return 1 if y else 2\n")          # ternary +1
    fn = ast.parse(src).body[0]
    assert hc.complexity(fn) == 1 + 3 + 2 + 1 + 1 + 2 + 2 + 1
    assert hc.complexity(fn.body[4]) == 2  # inner


def test_house_counts_counts_call_sites_and_p0(tmp_path):
    hc = house_counts()
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from x import Session, GameConfig\nP0 = 0.5\n"
                              "def go():\n    s = Session(config=GameConfig())\n    return lab.Session()\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text("Session()\n")
    c = hc.count(tmp_path)
    assert c["session_calls"]["count"] == 2 and c["gameconfig_calls"]["count"] == 1
    assert c["p0_definitions"]["sites"] == ["pkg/a.py:2"]
    assert c["largest_modules"][0] == {"module": "pkg/a.py", "lines": 5}
    assert hc.count(tmp_path, with_tests=True)["session_calls"]["count"] == 3


PRODUCT = ("engine", "personas", "lab", "saves", "calbench_tui", "calbench_cli", "calbench_devtools")


def wait_for_calls(path: Path) -> list[int]:
    tree = source_tree(path)
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call) and called_name(node) == "wait_for"
            and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "asyncio"]


def test_no_asyncio_wait_for_in_the_product():
    found = {f"{path.relative_to(REPO)}:{line}" for pkg in PRODUCT for path in sorted((REPO / pkg).rglob("*.py"))
             for line in wait_for_calls(path)}
    assert not found, f"asyncio.wait_for can lose a cancel on Python 3.11; use asyncio.timeout: {sorted(found)}"


def test_the_wait_for_check_sees_the_call(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import asyncio\nasync def f(x):\n    await asyncio.wait_for(x, 1)\n    await cond.wait_for(x)\n")
    assert wait_for_calls(f) == [3]
