"""One seat model under the human screens (issue 23 step 4; docs/architecture.md).

- ``GameScreen`` and ``DecisionScreen`` keep no game state of their own: the attributes they
  assign are the listed ones (the model, display flags, key-press bookkeeping);
- screens never call a method the CalBench apps define (``self.app.play_again()`` and the
  like): they post messages, the app handles them;
- the apps never read a screen's insides (the game screen's talk, proposal, outbox...; the
  batch builder's plan): only the calls that hand the game screen events and requests, the
  builder's ``draft()``, and Textual's own screen API;
- the cheapest common slot is computed once (``personas/base.py:cheapest_common_slot``),
  called by IMAP and by the seat model, and no other function re-implements it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from .astkit import source_tree

ROOT = Path(__file__).resolve().parents[2]
SCREENS = ROOT / "calbench_tui" / "screens"
APPS = [ROOT / "calbench_tui" / "app.py", ROOT / "calbench_tui" / "study_app.py"]
PACKAGES = ("engine", "personas", "lab", "saves", "calbench_tui")

#: What each screen may assign on ``self``: nothing of the game (that is the model's).
SCREEN_ATTRIBUTES = {
    "GameScreen": {"model", "blind", "participant_words", "seat", "_arm", "_binding_state", "_ready", "_backlog"},
    # the batch being built is the builder's own editing state, not the game's; talk and apart
    # are what the seat model said of this decision when it opened (read-only snapshots)
    "DecisionScreen": {"request", "obs", "decision", "plan", "talk", "apart", "armed_invalid", "armed_warning",
                       "warnings", "_had_moves"},
}

#: What an app may touch of its screens beyond Textual's Screen API.
SCREEN_ENTRY_POINTS = {
    "game_screen": {"deliver", "on_register", "on_speak", "on_batch_request", "on_game_event", "on_presence", "note",
                    "typed", "restore_unsent"},
    "decision_screen": {"draft"},
}


def _tree(path: Path) -> ast.Module:
    return source_tree(path)


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)


def _self_assigned(cls: ast.ClassDef) -> set[str]:
    """Attributes the class's own methods assign on ``self`` (``self.x =``, ``self.x +=``,
    ``setattr(self, ...)``); nested classes (its Message types) are theirs."""
    out: set[str] = set()
    methods = [fn for fn in cls.body if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for node in (n for fn in methods for n in ast.walk(fn)):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            for sub in (t.elts if isinstance(t, ast.Tuple) else [t]):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
                    out.add(sub.attr)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "self":
            out.add("<setattr>")
    return out


def test_screens_keep_no_game_state():
    for name, allowed in SCREEN_ATTRIBUTES.items():
        path = SCREENS / ("game.py" if name == "GameScreen" else "decision.py")
        assigned = _self_assigned(_class(_tree(path), name))
        assert assigned <= allowed, f"{name} assigns {sorted(assigned - allowed)}: keep game state in the seat model"
    # the domain names of the old screen are the model's now
    game = _self_assigned(_class(_tree(SCREENS / "game.py"), "GameScreen"))
    assert not game & {"proposal", "cost_request", "outbox", "penalty", "reported", "talk", "my_proposal",
                       "pending", "batch_request", "meeting", "round", "last_writer", "game_over", "protocols"}


def _app_methods() -> set[str]:
    """Methods the CalBench apps define that Textual's App does not (their own domain)."""
    from textual.app import App

    own: set[str] = set()
    for path in APPS:
        for cls in (n for n in ast.walk(_tree(path)) if isinstance(n, ast.ClassDef)):
            for fn in cls.body:
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and not hasattr(App, fn.name):
                    own.add(fn.name)
    return own


def test_screens_post_messages_instead_of_calling_the_app():
    own = _app_methods()
    assert {"play_again", "open_batch_builder", "resume_saved"} <= own  # the check sees the app's methods
    calls = []
    for path in sorted(SCREENS.glob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "app" \
                    and node.func.attr in own:
                calls.append(f"{path.name}:{node.lineno} self.app.{node.func.attr}()")
    assert calls == []


def test_the_apps_do_not_read_a_screens_insides():
    from textual.screen import Screen

    bad = []
    for path in APPS:
        tree = _tree(path)
        for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for which, entry in SCREEN_ENTRY_POINTS.items():
                allowed = entry | set(dir(Screen))
                aliases = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign)
                           and isinstance(n.value, ast.Attribute) and n.value.attr == which
                           for t in n.targets if isinstance(t, ast.Name)}
                for n in ast.walk(fn):
                    if not isinstance(n, ast.Attribute):
                        continue
                    v = n.value
                    on_screen = (isinstance(v, ast.Attribute) and v.attr == which) or \
                        (isinstance(v, ast.Name) and v.id in aliases)
                    if on_screen and n.attr not in allowed:
                        bad.append(f"{path.name}:{n.lineno} {which}.{n.attr}")
    assert bad == []


def _sums_peer_costs_until_impossible(fn: ast.AST) -> bool:
    """The shape of a cheapest-common-slot loop: over slots, over peers, ``total += cost`` and
    ``total = None; break`` when a peer cannot."""
    for outer in (n for n in ast.walk(fn) if isinstance(n, ast.For)):
        for inner in (n for n in ast.walk(outer) if isinstance(n, ast.For) and n is not outer):
            body = list(ast.walk(inner))
            added = {n.target.id for n in body if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add)
                     and isinstance(n.target, ast.Name)}
            nulled = {t.id for n in body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                      and n.value.value is None for t in n.targets if isinstance(t, ast.Name)}
            if added & nulled and any(isinstance(n, ast.Break) for n in body):
                return True
    return False


def test_the_cheapest_common_slot_is_computed_once():
    defined, copies, callers = [], [], set()
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            tree = _tree(path)
            rel = path.relative_to(ROOT).as_posix()
            for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
                if fn.name == "cheapest_common_slot":
                    defined.append(rel)
                elif _sums_peer_costs_until_impossible(fn):
                    copies.append(f"{rel}:{fn.name}")
                if any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == "cheapest_common_slot"
                       for n in ast.walk(fn)):
                    callers.add(f"{rel}:{fn.name}")
    assert defined == ["personas/base.py"]
    assert copies == []
    assert {"personas/scripted/imap.py:best_slot", "personas/seat_model.py:best_common_slot"} <= callers


def test_the_copy_detector_finds_the_old_copies():
    """The detector above is not blind: the two loops this step merged are found by it."""
    old = '''
def best_slot(self):
    best = None
    for s in sorted(st["my"]):
        total = st["my"][s]
        for r in self.responders:
            c = self._responder_cost(r, s)
            if c is None:
                total = None
                break
            total += c
        if total is not None and (best is None or total < best[0]):
            best = (total, s)
    return best
'''
    assert _sums_peer_costs_until_impossible(ast.parse(old).body[0])
    assert not _sums_peer_costs_until_impossible(ast.parse("def f(xs):\n    for x in xs:\n        pass\n").body[0])
