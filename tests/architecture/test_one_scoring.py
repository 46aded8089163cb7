"""Issue 23 step 2: scoring is one named, versioned stage, and VPS is reduced from belief
updates once.

* one scoring stage: ``engine/scoring.py`` (``SCORERS``: outcome, vps, leaks, reflection,
  judge, each with an integer version); the game loop (``play_game``, ``end_game``,
  ``_Game``) reaches no scorer; the session runs ``play_game`` → ``score_played`` →
  ``end_game`` itself; ``verify`` re-scores through the same stage;
* one VPS reduction: ``P0`` is defined once (``engine/privacy.py``), and no other module
  does arithmetic on a belief update's ``before``/``after`` or subtracts the prior from a
  belief (reports, replay, the metrics widget and the study export call
  ``engine.privacy.tally`` / ``credit`` / ``vps_sums``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from .astkit import source_tree

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "lab", "personas", "saves", "calbench_tui")
PRIVACY = REPO / "engine" / "privacy.py"
SCORER_NAMES = {"outcome", "vps", "leaks", "reflection", "judge"}


def _modules():
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            yield path, source_tree(path)


def _is_prior(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and node.value == 0.5) or (isinstance(node, ast.Name) and node.id == "P0")


def _belief_field(node: ast.AST) -> bool:
    return (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
            and node.slice.value in ("before", "after"))


def test_the_prior_is_defined_once():
    found = [f"{path.relative_to(REPO)}:{node.lineno}" for path, tree in _modules() for node in ast.walk(tree)
             if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "P0" for t in node.targets)]
    assert len(found) == 1 and found[0].startswith("engine/privacy.py:"), found


def test_no_module_but_privacy_reduces_belief_updates():
    offenders = []
    for path, tree in _modules():
        if path == PRIVACY:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.BinOp):
                continue
            if (isinstance(node.op, ast.Sub) and _is_prior(node.right)) or _belief_field(node.left) \
                    or _belief_field(node.right):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    assert not offenders, "VPS is reduced from belief updates in engine/privacy.py only (tally, credit):\n" + \
        "\n".join(offenders)


def test_the_consumers_call_the_one_reduction():
    uses = {"lab/report/stats.py": "vps_sums", "calbench_tui/screens/replay.py": "tally",
            "calbench_tui/widgets/metrics.py": "tally", "lab/study/export.py": "tally"}
    for rel, name in uses.items():
        tree = source_tree(REPO / rel)
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "engine.privacy"
                    for a in n.names}
        assert name in imported, f"{rel} should reduce belief updates with engine.privacy.{name}"


def test_scorers_are_registered_by_name_with_a_version():
    from engine.scoring import SCORERS, versions

    assert set(SCORERS) == SCORER_NAMES
    assert all(isinstance(s.version, int) and s.version >= 1 for s in SCORERS.values())
    assert versions() == {n: s.version for n, s in SCORERS.items()}


SCORING_NAMES = {"score", "score_played", "outcome_metrics", "vps_metrics", "leak_metrics", "reflection_metrics",
                 "privacy_metrics", "game_metrics", "semantic_leaks", "reflection_vps", "judge_metrics"}
SCORING_MODULES = {"scoring", "privacy", "freetext"}


def _reaches_scoring(node: ast.AST) -> list[str]:
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.ImportFrom):
            mod = (n.module or "").rpartition(".")[2]
            if mod in SCORING_MODULES or any(a.name in SCORING_NAMES for a in n.names):
                out.append(f"line {n.lineno}: import from {n.module}")
        elif isinstance(n, ast.Name) and n.id in SCORING_NAMES:
            out.append(f"line {n.lineno}: {n.id}")
        elif isinstance(n, ast.Attribute) and n.attr in SCORING_NAMES:
            out.append(f"line {n.lineno}: .{n.attr}")
    return out


def test_the_game_loop_does_not_score():
    tree = source_tree(REPO / "engine" / "game.py")
    top = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for name in ("play_game", "end_game", "_Game"):
        assert name in top, name
        assert not _reaches_scoring(top[name]), (name, _reaches_scoring(top[name]))
    module_level = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not [x for n in module_level for x in _reaches_scoring(n)]
    # only the one-call form (tests, benchmarks) reaches the stage, after play_game returned
    body = top["run_game"].body
    first_play = next(i for i, st in enumerate(body) if "play_game" in ast.unparse(st))
    assert all(not _reaches_scoring(st) for st in body[:first_play + 1])


def test_the_session_runs_scoring_after_the_game():
    tree = source_tree(REPO / "lab" / "session.py")
    calls = sorted((n.lineno, n.col_offset, n.func.id) for n in ast.walk(tree)
                   if isinstance(n, ast.Call) and isinstance(n.func, ast.Name))
    assert "run_game" not in [c for _, _, c in calls]
    order = [c for _, _, c in calls if c in ("play_game", "score_played", "end_game")]
    assert order == ["play_game", "score_played", "end_game"]


def test_verify_rescores_through_the_stage():
    tree = source_tree(REPO / "engine" / "verify.py")
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert "score" in names and "game_metrics" not in names
    assert "game_metrics" not in (REPO / "engine" / "metrics.py").read_text()
