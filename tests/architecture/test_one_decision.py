"""One builder, one talk reader, one call count for LLM decisions (issue 31; docs/architecture.md).

- the LLM seat's DECISION by slot builds its batch with the builder the scripted seats use
  (``personas/base.py:clear_and_schedule``): no module of ``personas/llm`` makes a
  ``Reschedule`` of its own;
- what talk produced is read by the human seat's model (``personas/seat_model.py``:
  ``SeatModel.talk_facts``, ``stance_of``): the LLM seat folds its round into a SeatModel and
  no module of ``personas/llm`` calls the protocol's slot readers itself;
- an LLM seat's calls are counted by ``engine/usage.py:call_counts`` — the benchmark, the
  report rows and the end screen call it and sum no attempts of their own.
"""

from __future__ import annotations

import ast
from pathlib import Path

from .astkit import source_tree

ROOT = Path(__file__).resolve().parents[2]
LLM = ROOT / "personas" / "llm"


def _calls(path: Path) -> set[str]:
    out: set[str] = set()
    for n in ast.walk(source_tree(path)):
        if isinstance(n, ast.Call):
            f = n.func
            out.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
    return out


def test_the_llm_decision_batch_is_built_by_the_one_builder():
    for path in LLM.glob("*.py"):
        assert "Reschedule" not in _calls(path), f"{path.name} builds a Reschedule: use personas.base.clear_and_schedule"
    assert "clear_and_schedule" in _calls(LLM / "decide.py")


def test_the_talk_facts_are_read_by_the_seat_model():
    assert "SeatModel" in _calls(LLM / "decide.py") and "talk_facts" in _calls(LLM / "decide.py")
    readers = {"read_text", "mentioned_slots", "is_proposal", "is_request_for_costs", "costs_in_payload", "stance_of"}
    for path in LLM.glob("*.py"):
        for n in ast.walk(source_tree(path)):
            if isinstance(n, ast.ImportFrom) and n.module in ("engine.protocol", "personas.seat_model"):
                assert not {a.name for a in n.names} & readers, f"{path.name} reads talk itself"
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "protocol":
                assert n.attr not in readers, f"{path.name} reads talk itself (protocol.{n.attr})"


def test_llm_calls_are_counted_once():
    for rel in ("benchmarks/real_model.py", "lab/llm_calls.py", "calbench_tui/screens/end.py"):
        path = ROOT / rel
        text = path.read_text(encoding="utf-8")
        assert "call_counts" in _calls(path), rel
        assert '"attempts"' not in text and '"retried"' not in text, f"{rel} counts requests itself"
