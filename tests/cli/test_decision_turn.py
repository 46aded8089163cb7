"""Issue 35 item 10: the decision step's ``turn``.  The authors number a round's decision
and resolution events with the count of sweeps (3 after turns 0, 1, 2); ours carry the last
sweep's index (2).  Exports keep ours and say so where they say "the authors' shape"
(``calbench export --help``, docs/rules.md).  Their traces are read from ../shared/compat."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calbench_cli.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT.parent / "shared" / "compat"
CLOSING = ("decide_start", "decide_end", "batch_applied", "resolution")


def closing_minus_last_sweep(trace) -> set[int]:
    """Per round: the closing events' turn minus the last CHEAP_TALK turn."""
    talk: dict[int, int] = {}
    for e in trace["events"]:
        d = e["data"]
        if e["type"] == "turn_start":
            talk[d["round"]] = max(talk.get(d["round"], -1), d["turn"])
    return {e["data"]["turn"] - talk[e["data"]["round"]] for e in trace["events"]
            if e["type"] in CLOSING and e["data"]["round"] in talk}


def test_theirs_count_sweeps_ours_index_the_last():
    files = sorted(COMPAT.glob("authors_trace_*.json")) if COMPAT.is_dir() else []
    if not files:
        pytest.skip("the authors' traces are not here (../shared/compat)")
    for f in files:
        assert closing_minus_last_sweep(json.loads(f.read_text())) == {1}, f.name


def test_ours_index_the_last_sweep_and_the_export_says_so():
    import asyncio

    from engine.game import GameConfig, run_game
    from engine.generate import generate_scenario
    from personas.registry import make_personas

    for agents in ("imap", "dsm-private"):
        task = generate_scenario(3)
        res = asyncio.run(run_game(task, make_personas(agents, task.num_agents), GameConfig(deterministic=True)))
        assert closing_minus_last_sweep(json.loads(json.dumps(res.trace))) == {0}, agents
    parser = build_parser()
    sub = next(a for a in parser._actions if getattr(a, "choices", None) and "export" in a.choices)
    text = " ".join(sub.choices["export"].description.split())
    assert "the authors' shape" in text and "last sweep's index" in text and "number of sweeps" in text
    rules = " ".join((ROOT / "docs" / "rules.md").read_text().split())
    assert "the index of the round's last sweep" in rules and "count of sweeps" in rules
