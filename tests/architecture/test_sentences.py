"""docs/architecture.md's sentences checked against the code, not only its names (issue 35):
who builds the seats, who answers the engine for a person, where the lab starts the mock
endpoint, who calls the verifier, where games are scored."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from .astkit import source_tree

ROOT = Path(__file__).resolve().parents[2]
DOC = " ".join((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").split())
PRODUCT = ("engine", "personas", "saves", "lab", "calbench_tui", "calbench_cli", "calbench_devtools")


def _modules():
    for pkg in PRODUCT:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), source_tree(path)  # parsed once per session


@functools.cache
def _calls() -> dict[str, frozenset[str]]:
    """Every called name (a plain or an attribute call) -> the modules that call it; the
    modules are walked once, not once per name asked about."""
    out: dict[str, set[str]] = {}
    for rel, tree in _modules():
        for n in ast.walk(tree):
            if isinstance(n, ast.Call):
                f = n.func
                called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if called is not None:
                    out.setdefault(called, set()).add(rel)
    return {k: frozenset(v) for k, v in out.items()}


def _callers(name: str) -> set[str]:
    """Modules that call ``name`` (a plain or an attribute call), its definition's module left out."""
    return set(_calls().get(name, ()))


def _row(first_words: str) -> str:
    line = next(ln for ln in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines()
                if ln.startswith(f"| {first_words}"))
    return line


def test_seats_are_built_only_at_the_sites_the_doc_lists():
    listed = set(re.findall(r"`([\w/]+\.py)`", _row("building personas from a spec").split("|")[2]))
    callers = _callers("make_personas") - {"personas/registry.py"}
    assert callers, "the check sees no caller"
    assert callers == listed - {"personas/registry.py"}, (callers, listed)


def test_no_screen_answers_the_engine_the_app_does():
    for path in sorted((ROOT / "calbench_tui" / "screens").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr in ("answer", "answer_threadsafe")]
        assert not calls, f"{path.name}:{calls[0].lineno} answers the engine itself"
    app = ast.parse((ROOT / "calbench_tui" / "app.py").read_text(encoding="utf-8"))
    handler = next(n for n in ast.walk(app) if isinstance(n, ast.FunctionDef)
                   and n.name == "on_decision_screen_answered")
    assert any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "answer"
               for n in ast.walk(handler))
    assert "no screen answers the engine" in DOC


def test_the_lab_starts_the_mock_endpoint_in_one_module_only():
    importers = set()
    for rel, tree in _modules():
        if not rel.startswith("lab/"):
            continue
        for n in ast.walk(tree):
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
                [n.module or ""] if isinstance(n, ast.ImportFrom) else []
            if any(m.split(".")[0] == "calbench_devtools" for m in names):
                assert n.col_offset > 0, f"{rel}:{n.lineno} imports the mock at module level"
                importers.add(rel)
    assert importers == {"lab/study/check.py"}
    assert "in `lab` that is one module, `lab/study/check.py`" in DOC


def test_verification_has_one_entry_and_rescore_checks_the_record():
    assert _callers("verify_trace") - {"engine/verify.py"} == {"lab/replaycheck.py"}
    assert _callers("verify_game") - {"lab/replaycheck.py"} == {"lab/archive.py"}
    assert "lab/rescore.py" in _callers("check_record")
    assert "the only caller of `verify_trace`" in DOC


def test_games_are_scored_only_in_the_stage():
    assert _callers("score_played") == {"engine/game.py", "lab/session.py"}
    assert _callers("end_game") == {"engine/game.py", "lab/session.py"}
    assert _callers("score") - {"engine/scoring.py"} <= {"engine/verify.py"}
    assert _callers("judge_metrics") == {"engine/scoring.py"}  # the judge asks; the stage scores
    assert "takes no scoring function of its own" in DOC
