"""One owner of the message protocol (issue 9): ``engine/protocol.py`` holds the typed
payloads, their readers and the slot-list English; ``MESSAGE_EVENTS`` is declared once; the
interface reads the protocol from there and the quick keys' codec lives below it.

Static checks over the source, plus the owner's round trips (its English reads back through
its own readers; its payloads have the canonical key order every trace relies on).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from engine import protocol
from engine.events import MESSAGE_EVENT_TYPES, MESSAGE_EVENTS

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "personas", "saves", "lab", "calbench_tui", "calbench_devtools", "calbench_cli")


def _sources():
    for pkg in PACKAGES:
        root = REPO / pkg
        if root.is_dir():
            yield from sorted(root.rglob("*.py"))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level:
                pkg = path.relative_to(REPO).with_suffix("").parts[:-node.level]
                mod = ".".join((*pkg, node.module))
            else:
                mod = node.module
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}  # "from engine import protocol"
    return out


def test_message_events_are_declared_once():
    """By content, not by name: no tuple, list or set anywhere lists two or more of the message
    event types again (a copy under another name is a second declaration)."""
    where, copies = [], []
    for path in _sources():
        tree = ast.parse(path.read_text(), filename=str(path))
        rel = str(path.relative_to(REPO))
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AnnAssign) else []
            if any(isinstance(t, ast.Name) and t.id == "MESSAGE_EVENTS" for t in targets):
                where.append(rel)
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                named = {e.value for e in node.elts if isinstance(e, ast.Constant)} & set(MESSAGE_EVENTS)
                if len(named) >= 2:
                    copies.append(f"{rel}:{node.lineno}")
    assert where == ["engine/events.py"]
    assert copies == [], "the message event types are listed again; import engine.events.MESSAGE_EVENTS"
    assert set(MESSAGE_EVENTS) == {"dm_sent", "participant_groupchat_sent", "all_groupchat_sent"}
    assert MESSAGE_EVENTS == tuple(MESSAGE_EVENT_TYPES.values())


def test_the_owner_is_low_and_everyone_uses_it():
    # The owner imports only the standard library, engine.events and the protocols' registry
    # (whose modules import nothing of the project but the registry itself).
    own = {m for m in _imports(REPO / "engine" / "protocol.py") if m.split(".")[0] in PACKAGES}
    assert {m.split(".")[0] + "." + m.split(".")[1] for m in own} <= {"engine.events", "engine.protocols"}
    for path in sorted((REPO / "engine" / "protocols").glob("*.py")):
        deps = {m for m in _imports(path) if m.split(".")[0] in PACKAGES}
        assert {".".join(m.split(".")[:2]) for m in deps} <= {"engine.protocols"}, path.name
    users = {"engine/privacy.py", "personas/scripted/protocol.py", "personas/scripted/dsm.py", "personas/quick.py",
             "calbench_devtools/mock_endpoint.py", "personas/seat_model.py"}
    for rel in users:
        assert "engine.protocol" in _imports(REPO / rel), rel


def test_the_interface_imports_no_scripted_persona_and_keeps_no_codec():
    assert not (REPO / "calbench_tui" / "widgets" / "quick.py").exists()
    for path in (REPO / "calbench_tui").rglob("*.py"):
        bad = {m for m in _imports(path) if m.startswith("personas.scripted")}
        assert not bad, f"{path.relative_to(REPO)} imports {bad}"
    # The mock endpoint stays a module of its own, apart from the real client.
    assert not {m for m in _imports(REPO / "calbench_devtools" / "mock_endpoint.py")
                if m.endswith(".client") or m.endswith("llm.client")}


def test_payload_constructor_keeps_the_trace_key_order_and_knows_the_kinds():
    p = protocol.payload("sdmap", "reply", 4, slot=7, status=protocol.PENDING)
    assert list(p) == ["protocol", "kind", "meeting_id", "slot", "status"]
    assert protocol.payload("imap", "text", 2) == {"protocol": "imap", "kind": "text", "meeting_id": 2}
    with pytest.raises(ValueError):
        protocol.payload("imap", "propose", 1, slot=3)  # an SD-MAP kind
    assert protocol.typed_payload(p, "sdmap") is p and protocol.typed_payload(p, "imap") is None
    assert protocol.typed_payload({"protocol": "dsm", "kind": "text"}) is None
    assert protocol.typed_message({"content": '{"sd": "propose", "slot": 3}'})[:2] == ("sdmap", "propose")


@pytest.mark.parametrize("slots", [[3], [3, 4], [0, 1, 2, 3, 5, 7, 8], [2, 9, 11], list(range(16))])
def test_every_slot_list_english_reads_back(slots):
    for text in (protocol.fmt_slots(slots), protocol.slots_phrase(slots), protocol.slot_words(slots),
                 protocol.slot_words_or(slots)):
        phrase = text if text.startswith("slot") else f"slots {text}"
        assert set(protocol.slots_in_text(f"I am free at {phrase}.", 16)) == set(slots), text
        assert protocol.read_text(f"I am free at {phrase}.", 16).works == set(slots), text


def test_dsm_scale_round_trips():
    for cost in (0, 1, 3, 7, 10, 100, 1000):
        s = protocol.satisfaction(cost)
        assert 1 <= s <= protocol.TOP and protocol.band_cost(s) >= cost
    assert protocol.satisfaction(None) == 0 and protocol.D == 12
