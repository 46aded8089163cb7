"""Issue 23 step 5, held: the store split by concern, its readers through public queries,
the "no peeking" policy outside the store, the mock endpoint outside the personas, and the
headless command line apart from the Textual app (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

from .astkit import source_tree

REPO = Path(__file__).resolve().parents[2]
SAVES = REPO / "saves"

#: each module of the store, and the one concern it holds (docs/architecture.md, "The store")
STORE_MODULES = {
    "store.py": "the connection's life: open, set-up, the write lock, close",
    "errors.py": "the errors a user can act on",
    "schema.py": "migrations, backfills, another program's database",
    "codec.py": "JSON texts, event rows, the lean event blob",
    "checks.py": "what is not a trace",
    "traces.py": "a trace into rows and back",
    "sinks.py": "durable event sinks",
    "writes.py": "games created, reopened, finished, imported, deleted",
    "queries.py": "every read",
    "claims.py": "suite claims and live leases",
}
#: the largest a store module may grow before it is two concerns
MAX_STORE_MODULE_LINES = 300
#: packages outside saves/ that must not read the store's connection
READERS = ("engine", "personas", "lab", "calbench_tui", "calbench_cli", "calbench_devtools", "benchmarks")


def _tree(path: Path) -> ast.Module:
    return source_tree(path)


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def _py_files(*folders: str):
    for folder in folders:
        if (REPO / folder).is_dir():
            yield from sorted((REPO / folder).rglob("*.py"))


def _methods(path: Path, cls: str) -> set[str]:
    for node in _tree(path).body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    raise AssertionError(f"no class {cls} in {path.name}")


def test_the_store_is_split_into_small_modules_one_concern_each():
    # the store's modules are those named above, and each is small
    mods = {p.name for p in SAVES.glob("*.py")} - {"__init__.py", "guard.py", "lease.py", "study.py"}
    assert mods == set(STORE_MODULES)
    sizes = {m: len((SAVES / m).read_text(encoding="utf-8").splitlines()) for m in STORE_MODULES}
    assert max(sizes.values()) <= MAX_STORE_MODULE_LINES, sizes
    # store.py keeps only the connection's life; every other method comes from its concern's module
    assert _methods(SAVES / "store.py", "Store") == {"__init__", "open", "_set_up", "close", "__aenter__",
                                                    "__aexit__", "_migrate", "_tx"}
    from saves.claims import Claims
    from saves.queries import Queries
    from saves.sinks import Sinks
    from saves.store import Store
    from saves.writes import GameWrites

    assert {Sinks, GameWrites, Claims, Queries} <= set(Store.__mro__)


def test_queries_only_read():
    text = (SAVES / "queries.py").read_text(encoding="utf-8")
    for word in ("INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "_tx(", "_lock"):
        assert word not in text, f"saves/queries.py holds {word!r}: a write belongs in saves/writes.py"


def test_nobody_outside_saves_reads_the_store_connection():
    found = []
    for path in _py_files(*READERS):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Attribute) and node.attr == "_db":
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not found, f"read Store._db outside saves/ (ask saves/queries.py instead): {found}"


def test_the_no_peeking_policy_is_the_guard_not_the_store():
    for name in STORE_MODULES:
        text = (SAVES / name).read_text(encoding="utf-8")
        assert "reveal-all-seats" not in text and "in_play" not in text, name
    from saves import guard

    assert guard.REVEAL_FLAG == "--reveal-all-seats"
    import saves.store

    assert not hasattr(saves.store, "human_game_in_play") and not hasattr(saves.store, "in_play_message")
# -- the mock endpoint -------------------------------------------------------------------------

MOCK = "calbench_devtools.mock_endpoint"
#: the only modules of the program that may import the mock: those whose command starts it
MOCK_STARTERS = {"lab/study/check.py", "calbench_cli/commands/llm.py"}


def test_the_mock_endpoint_is_not_a_persona():
    assert (REPO / "calbench_devtools" / "mock_endpoint.py").is_file()
    assert not list((REPO / "personas").rglob("mock*.py"))
    users = {str(p.relative_to(REPO)) for p in _py_files("engine", "personas", "saves", "lab", "calbench_tui",
                                                            "calbench_cli")
             if any(m == MOCK or m.startswith("calbench_devtools") for m in _imports(p))}
    assert not {u for u in users if u.split("/")[0] in ("engine", "personas", "saves")}, users
    assert users <= MOCK_STARTERS, users


# -- the command line apart from the app -------------------------------------------------------

#: the commands that open a Textual app (calbench-play, replay, report --tui, study run, serve's
#: browser front); every other command is headless and imports no part of the app that draws
APP_OPENERS = {"play.py", "replay.py", "report.py", "study.py", "serve.py"}
#: the app's modules that draw (Textual); the CLI may still use its plain-text helpers
#: (``safe_text``, ``settings``, ``keys``, ``report_view``), which import no Textual
APP_DRAWING = ("textual", "calbench_tui.app", "calbench_tui.replay_app", "calbench_tui.study_app",
               "calbench_tui.screens", "calbench_tui.widgets", "calbench_tui.web", "calbench_tui.remote",
               "calbench_tui.messages")


def test_the_command_line_is_its_own_package_above_the_app():
    assert (REPO / "calbench_cli" / "cli.py").is_file() and (REPO / "calbench_cli" / "commands").is_dir()
    assert not (REPO / "calbench_tui" / "cli.py").exists() and not (REPO / "calbench_tui" / "commands").exists()
    # the app never imports the command line
    up = {str(p.relative_to(REPO)) for p in _py_files("calbench_tui", "lab", "saves", "personas", "engine",
                                                        "calbench_devtools")
          if any(m.split(".")[0] == "calbench_cli" for m in _imports(p))}
    assert not up, up
    # the command line imports the drawing app only in the commands that open it
    opens = {p.name for p in _py_files("calbench_cli")
             if any(m == d or m.startswith(d + ".") for m in _imports(p) for d in APP_DRAWING)}
    assert opens <= APP_OPENERS, opens - APP_OPENERS


def test_the_entry_points_name_the_command_line_package():
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts == {"calbench": "calbench_cli.cli:main", "calbench-play": "calbench_cli.cli:play_main"}


def test_headless_commands_load_no_textual():
    import subprocess
    import sys

    code = ("import sys\n"
            "from calbench_cli.cli import build_parser\n"
            "import calbench_cli.commands.run, calbench_cli.commands.suite, calbench_cli.commands.saves\n"
            "build_parser()\n"
            "assert 'textual' not in sys.modules, 'textual'\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
