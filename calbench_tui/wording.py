"""What a study participant reads instead of the engine's words (``calbench study run``).

The engine's rejections name rules ("Expected exactly 1 schedule action, got 0"): right
for a researcher reading a trace, opaque to a participant.  :func:`participant_words`
says the same in terms of the keys on screen.  The play app keeps the engine's words, with the
key to press added where they name none (:func:`play_words`).
"""

from __future__ import annotations

import re

__all__ = ["participant_words", "play_words", "TIMEOUT_WORDS"]

_RULE = re.compile(r"^Rule \d+ \([^)]*\):\s*")


def participant_words(message: str) -> str:
    """A rejection (``engine.rules.Rejection`` text) in a participant's words."""
    m = re.match(r"Expected exactly 1 schedule action, got (\d+)", message or "")
    if m:
        if m.group(1) == "0":
            return "Pick a slot for the meeting first: enter on a slot"
        return "Place the meeting in one slot only: enter on the slot you want"
    if (message or "").startswith("Expected 0 schedule actions"):
        return "There is no meeting to place now: only move your own items, or press n to do nothing"
    text = _RULE.sub("", message or "")
    return text[:1].upper() + text[1:] if text else text


def play_words(message: str) -> str:
    """A rejection as ``calbench-play`` shows it: the engine's words (a researcher reads them
    in the trace too), with what to press added where they name no key ("Expected exactly 1
    schedule action, got 0 — pick a slot for the meeting first: enter on a slot")."""
    text = str(message or "")
    if text.startswith(("Expected exactly 1 schedule action", "Expected 0 schedule actions")):
        hint = participant_words(text)
        return f"{text} — {hint[:1].lower()}{hint[1:]}"
    return text


#: What the participant is told when a call of theirs runs out of time: (phase, outcome) -> words.
TIMEOUT_WORDS = {
    ("talk", "end_turn"): "Time is up for this talk turn: it ended without a message.",
    ("decision", "submitted_as_it_stands"): "Time is up: your batch was submitted as it stood.",
    ("decision", "no_move"): "Time is up: you made no move this round (no slot was placed for the meeting).",
    ("voluntary", "submitted_as_it_stands"): "Time is up: your moves were submitted as they stood.",
    ("voluntary", "no_move"): "Time is up: you made no move.",
}
