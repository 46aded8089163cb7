"""The paper's message audit (§4.3) in ``study export``: ``message_audit.csv``, one row per
game × seat that sent at least one message, with the counts and rates of
:mod:`engine.audit` (docs/metrics.md, "Message audit").  Kept apart from the rest of the
export: :mod:`lab.study.export` registers :data:`AUDIT_CODEBOOK` and calls
:func:`audit_rows` once per game."""

from __future__ import annotations

from typing import Any

from engine.audit import CATEGORIES, pool_audit, seat_audit

__all__ = ["AUDIT_FILE", "AUDIT_CODEBOOK", "audit_rows"]

AUDIT_FILE = "message_audit.csv"

_COLUMNS: list[tuple[str, str]] = [
    ("participant", "participant id"),
    ("simulated", "1 = a row of a simulated participant (`study check --dry-run`), 0 = a person; left out of the "
                  "export unless --include-simulated"),
    ("game_id", "game id"),
    ("condition", "the condition (treatment) of the game"),
    ("practice", "1 = the practice game"),
    ("seat", "sending seat"),
    ("kind", "human (the participant's seat), llm or protocol"),
    ("persona", "the seat's persona (as in games.csv)"),
    ("messages", "messages this seat sent in the game (DM and groupchat messages count 1 each)"),
    ("typed", "of which typed protocol messages (read from their payload)"),
    ("free_text", "of which free text (read by the shared free-text reader)"),
    ("talk_rounds", "rounds in which the seat sent at least one message"),
]
for _c, _what in (("proposal", "put a slot forward"), ("availability", "said which of its slots work or not"),
                  ("cost", "named a cost of one of its slots"), ("question", "asked the others something"),
                  ("refusal", "declined (a slot does not work, a fail, a bare no)")):
    _COLUMNS += [
        (_c, f"messages that {_what}"),
        (f"{_c}_rate", f"{_c} / messages"),
        (f"{_c}_round_rate", f"share of talk_rounds with at least one message that {_what}"),
    ]

#: The codebook entry of the file (``lab.study.export.CODEBOOK`` takes it in).
AUDIT_CODEBOOK: dict[str, tuple[str, list[tuple[str, str]]]] = {
    AUDIT_FILE: ("The paper's message audit (§4.3): one row per game × seat that sent messages; how each "
                 "message is classified is in docs/metrics.md (\"Message audit\").", _COLUMNS),
}


def audit_rows(out: dict[str, list[dict[str, Any]]], trace: dict[str, Any], pid: str, g: dict[str, Any],
               kinds: list[str], personas: list[Any]) -> None:
    """Append this game's rows to ``out[AUDIT_FILE]``."""
    rows = out.setdefault(AUDIT_FILE, [])
    for rec in seat_audit(trace):
        a = rec["agent_id"]
        rates = pool_audit([rec])
        row: dict[str, Any] = {
            "participant": pid, "game_id": trace.get("game_id"), "condition": g.get("condition"),
            "practice": int(bool(g.get("practice"))), "seat": a,
            "kind": kinds[a] if 0 <= a < len(kinds) else None,
            "persona": personas[a] if 0 <= a < len(personas) else None,
            "messages": rec["messages"], "typed": rec["typed"], "free_text": rec["free_text"],
            "talk_rounds": rec["talk_rounds"]}
        for c in CATEGORIES:
            row[c] = rec[c]
            row[f"{c}_rate"] = None if rates[c]["rate"] is None else round(rates[c]["rate"], 6)
            row[f"{c}_round_rate"] = None if rates[c]["round_rate"] is None else round(rates[c]["round_rate"], 6)
        rows.append(row)
