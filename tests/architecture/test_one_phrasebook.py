"""One phrasebook (issue 29 item 3; docs/architecture.md "One owner each").

A blinded game's words come from ``engine/phrasebook.py`` alone: the only places in the
product that give a message new words (``replace(message, content=...)``) are the partner
wrapper ``personas/voice.py`` and the participant's quick actions in
``personas/seat_model.py``, and both take the words from a ``Phrasebook``'s ``say``; the tag a
person gives a message is ``person_tag`` (the chat pane asks it, never a table of its own).
"""

from __future__ import annotations

import ast
from pathlib import Path

from .astkit import called_name, source_tree

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "personas", "lab", "saves", "calbench_tui", "calbench_cli", "calbench_devtools")
REWORDERS = {"personas/voice.py", "personas/seat_model.py"}


def _sources():
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), source_tree(path)


def test_only_the_voice_and_the_seat_model_give_a_message_new_words_and_they_ask_the_phrasebook():
    found = set()
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and called_name(node) == "replace" \
                    and any(k.arg == "content" for k in node.keywords):
                found.add(rel)
        if rel in REWORDERS:
            src = ast.unparse(tree)
            assert "from engine.phrasebook import" in src and ".say(" in src, rel
    assert found == REWORDERS


def test_the_chat_asks_the_phrasebook_for_a_persons_tag():
    chat = source_tree(ROOT / "calbench_tui" / "widgets" / "chat.py")
    calls = {called_name(n) for n in ast.walk(chat) if isinstance(n, ast.Call)}
    assert "person_tag" in calls
    imported = {a.name for n in ast.walk(chat) if isinstance(n, ast.ImportFrom) and n.module == "engine.phrasebook"
                for a in n.names}
    assert imported == {"person_tag"}
