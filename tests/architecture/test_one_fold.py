"""One fold (issue 23, step 1): a game's events are folded by ``engine/fold.py`` only.

The architecture: the event kinds are declared once (``engine.events.EVENT_KINDS``), and
one reducer, ``engine.fold.Fold``, applies them: the game loop advances through it, a
resume applies the kept events, ``fold_trace`` is the fold plus the checks against what the
trace recorded, and verification, reports, the replay and the end screen read it.  Checked
on the source (no other module applies a batch, resolves a round or loops over events
dispatching on ``batch_applied``) and by millisecond tests of the fold itself.
"""

from __future__ import annotations

import ast
import asyncio
import copy
import functools
import json
from pathlib import Path

import pytest

from engine.events import EVENT_KINDS, FOLDED_KINDS, HEADER, MESSAGE_EVENTS
from engine.fold import Fold, fold_events
from engine.game import GameConfig, _Game, run_game
from engine.generate import generate_scenario
from engine.model import calendar_to_json
from engine.trace import fold_trace
from personas.registry import make_personas

from .astkit import source_tree

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "personas", "saves", "lab", "calbench_tui")


@functools.lru_cache(maxsize=1)
def _sources() -> dict[str, ast.Module]:
    return {str(f.relative_to(REPO)): source_tree(f)
            for pkg in PACKAGES for f in sorted((REPO / pkg).rglob("*.py"))}


def _called(tree: ast.AST, name: str) -> list[int]:
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            if (isinstance(f, ast.Name) and f.id == name) or (isinstance(f, ast.Attribute) and f.attr == name):
                out.append(n.lineno)
    return out


def _compares_with(node: ast.AST, value: str) -> bool:
    return any(isinstance(n, ast.Compare) and any(isinstance(c, ast.Constant) and c.value == value
                                                  for c in ast.walk(n))
               for n in ast.walk(node))


# ---------------------------------------------------------------------------------------
# The source: one module folds
# ---------------------------------------------------------------------------------------
def test_only_the_fold_applies_a_batch_or_resolves_a_round():
    """``apply_outcome`` and ``resolve_round`` (engine/state.py's transitions) are called in engine/fold.py only."""
    callers = {path: lines for path, tree in _sources().items()
               for lines in [_called(tree, "apply_outcome") + _called(tree, "resolve_round")] if lines}
    assert set(callers) == {"engine/fold.py"}, callers


#: Modules that may compare an event's type with ``batch_applied`` — none of them in a loop
#: over events but the fold: the lean codec (it restores the *recorded* calendar copies a
#: stored blob left out, value for value, which a rules fold must not second-guess), the
#: replay's line and marks for the one event on screen, the human seat's model (issue 23
#: step 4: it applies one *projected* event at a time, what SPEC §5 lets that seat see, never
#: the game's events) and the game screen that hands it those events.
MAY_NAME_BATCH_APPLIED = {"engine/fold.py", "engine/lean.py", "calbench_tui/screens/replay.py",
                          "calbench_tui/screens/game.py", "personas/seat_model.py"}


def test_no_other_module_loops_over_events_applying_batches():
    naming, looping = set(), set()
    for path, tree in _sources().items():
        if _compares_with(tree, "batch_applied"):
            naming.add(path)
        for n in ast.walk(tree):
            body = n.body if isinstance(n, (ast.For, ast.While)) else n.ifs if isinstance(n, ast.comprehension) else ()
            if any(_compares_with(b, "batch_applied") for b in body):
                looping.add(path)
    assert naming <= MAY_NAME_BATCH_APPLIED, naming - MAY_NAME_BATCH_APPLIED
    assert looping <= {"engine/fold.py"}, looping


def test_the_old_folds_are_gone_and_fold_trace_is_the_fold_plus_checks():
    src = _sources()
    defined = {path: {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
               for path, tree in src.items()}
    assert "_refold_state" not in defined["engine/verify.py"]
    fold_trace_def = next(n for n in ast.walk(src["engine/trace.py"])
                          if isinstance(n, ast.FunctionDef) and n.name == "fold_trace")
    assert _called(fold_trace_def, "Fold") and not _called(fold_trace_def, "check_batch")
    restore = next(n for n in ast.walk(src["engine/game.py"]) if isinstance(n, ast.FunctionDef) and n.name == "restore")
    assert _called(restore, "fold_trace") and not any(_compares_with(restore, k) for k in FOLDED_KINDS), \
        "restore applies the kept events through the fold, with no event loop of its own"


def test_the_architecture_doc_names_the_one_fold():
    doc = (REPO / "docs" / "architecture.md").read_text()
    assert "one fold: `engine/fold.py`" in doc


def test_every_event_the_engine_emits_is_a_declared_kind():
    """The kinds are declared once: each type the game loop names is in EVENT_KINDS."""
    tree = _sources()["engine/game.py"]
    named = {n.args[0].value for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("emit", "make")
             and n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)}
    assert named and named <= set(EVENT_KINDS), named - set(EVENT_KINDS)
    assert set(MESSAGE_EVENTS) <= FOLDED_KINDS
    from engine.game import SEAT_EVENT_TYPES, failure_event_type
    from engine.observe import EVENT_ALLOWANCES

    assert set(SEAT_EVENT_TYPES) | {failure_event_type(e) for e in ("seat_timeout", "context_overflow", "x")} \
        <= set(EVENT_KINDS)
    assert set(EVENT_ALLOWANCES) <= set(EVENT_KINDS)


# ---------------------------------------------------------------------------------------
# The fold itself
# ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def game():
    task = generate_scenario(7)
    cfg = GameConfig(channels=("dm", "participant_groupchat", "all_groupchat"), deterministic=True)
    res = asyncio.run(run_game(task, make_personas("imap", task.num_agents), cfg))
    return task, json.loads(json.dumps(res.trace)), res


def test_played_events_carry_only_their_kinds_declared_fields_in_order(game):
    _task, trace, _res = game
    for ev in trace["events"]:
        kind = EVENT_KINDS[ev["type"]]
        keys = list(ev["data"])
        assert keys[:4] == list(HEADER)
        if not kind.open:
            rest = keys[4:]
            assert set(rest) <= set(kind.fields), (ev["type"], set(rest) - set(kind.fields))
            assert rest == [k for k in kind.fields if k in rest], ev["type"]


def test_the_game_loop_and_the_trace_fold_agree(game):
    """run_game advanced through a Fold; folding its trace again gives the same state."""
    task, trace, res = game
    again = fold_events(task, trace["events"])
    assert again.state == res.state
    assert again.folds_cleanly and not again.problems
    assert again.messages_sent == trace["final_state"]["per_agent_messages_sent"]
    assert sum(again.messages.values()) == sum(1 for e in trace["events"] if e["type"] in MESSAGE_EVENTS)
    starts = {e["data"]["round"]: e["seq"] for e in trace["events"] if e["type"] == "round_start"}
    full = fold_trace(trace)
    assert again.round_starts == {r: full.calendars_at(s) for r, s in starts.items()}
    assert [res.meeting_id for _s, res, _c in again.resolutions] == [m.id for m in task.meetings]


def test_a_batch_the_rules_refuse_is_named_and_not_applied(game):
    task, trace, _res = game
    events = copy.deepcopy(trace["events"])
    i = next(i for i, e in enumerate(events) if e["type"] == "batch_applied")
    seat = events[i]["data"]["agent_id"]
    events[i]["data"]["actions"] = [{"type": "schedule", "meeting_id": 999, "slot": 0}]
    fold = Fold.for_task(task).apply_all(events[:i])
    before = fold.state
    assert fold.apply(events[i]) is None
    assert fold.refused == 1 and not fold.folds_cleanly and fold.state is before
    assert fold.problems[0].startswith(f"event {events[i]['seq']} (round {events[i]['data']['round']}, "
                                       f"agent {seat}): the recorded batch breaks the rules")
    assert not any(s == events[i]["seq"] for s, *_ in fold.batches)


def test_kinds_the_fold_does_not_read_leave_it_unchanged(game):
    task, trace, _res = game
    fold = Fold.for_task(task)
    state = fold.state
    for ev in trace["events"]:
        if ev["type"] not in FOLDED_KINDS:
            assert fold.apply(ev) is None
    assert fold.state is state and not fold.batches and not fold.round_starts and fold.messages_sent == [0] * task.num_agents


def test_each_step_moves_calendars_costs_and_rounds(game):
    task, trace, _res = game
    fold = Fold.for_task(task)
    for ev in trace["events"]:
        got = fold.apply(ev)
        d = ev["data"]
        if ev["type"] == "batch_applied":
            a = d["agent_id"]
            assert calendar_to_json(fold.calendars[a]) == d["calendar_after"] and got.cost == d["cost"]
            assert fold.checkpoints[-1] == (ev["seq"], fold.calendars)
        elif ev["type"] == "resolution":
            assert [calendar_to_json(c) for c in fold.calendars] == d["calendars"]
            assert fold.state.round == d["round"] + 1 and fold.outcome_of(d["round"]).coordinated == d["coordinated"]
        elif ev["type"] == "round_start":
            assert fold.meetings[d["round"]] == d["meeting"] and fold.round_starts[d["round"]] == fold.calendars
    assert list(fold.state.costs) == trace["final_state"]["per_agent_cost"] and fold.ended


def test_a_resume_is_the_fold_of_the_kept_events(game):
    """_Game.restore keeps the complete rounds and continues from their fold."""
    task, trace, _res = game
    events = trace["events"]
    cut = [i for i, e in enumerate(events) if e["type"] == "resolution"][1] + 1
    g = _Game(task, make_personas("imap", task.num_agents), GameConfig(), _Log())
    nxt, aside = g.restore(events[: cut + 3])
    kept = g.log.events
    assert nxt == 2 and [e["seq"] for e in aside] == [e["seq"] for e in events[len(kept): cut + 3]]
    assert g.state == fold_events(task, kept).state and g.fold.round_starts.keys() == {0, 1}
    assert g.messages_sent == fold_events(task, kept).messages_sent


class _Log:
    def __init__(self) -> None:
        self.events: list = []
        self.seq = 0


def test_the_end_screen_reads_the_schedule_and_moves_from_the_fold(game):
    """played_schedule / moves_by_seat: what the recorded events say, through the fold."""
    from calbench_tui.screens.end import moves_by_seat, played_schedule

    task, trace, _res = game
    marks: list[dict] = [{} for _ in range(task.num_agents)]
    for ev in trace["events"]:  # what the screen showed before: the recorded actions, in order
        if ev["type"] == "batch_applied":
            a = ev["data"]["agent_id"]
            for act in ev["data"]["actions"]:
                if act["type"] == "reschedule":
                    marks[a][act["to_slot"]] = f"←{act['from_slot']}"
                    marks[a].setdefault(act["from_slot"], f"→{act['to_slot']}")
                else:
                    marks[a][act["slot"]] = "★"
    assert moves_by_seat(trace) == marks and any(marks)
    played = played_schedule(trace)
    for ev in trace["events"]:
        if ev["type"] == "resolution":
            d = ev["data"]
            slots = set(d["per_agent_slot"].values())
            want = f"slot {next(iter(slots))}" if d["coordinated"] else None
            assert played[d["meeting_id"]].startswith(want) if want else not played[d["meeting_id"]].startswith("slot")
    assert moves_by_seat({"events": []}) == [] and played_schedule({"events": []}) == {}
