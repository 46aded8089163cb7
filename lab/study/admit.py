"""Who may start a study session at this terminal (``calbench study run``): the checks before
the study app opens.

:func:`admit` checks the participant's id (its form and the study's ``participant_pattern``),
the online pool's id, and every LLM condition's endpoint and key; it returns an
:class:`Admission` that names the existing participants whose ids look like this one
(``P001`` / ``p001``), so the caller can ask before registering a new participant.
Refusals are one-line :class:`ParticipantError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ParticipantError", "Admission", "admit", "check_participant_id", "check_pool_id",
           "check_llm_conditions", "similar_participants"]


class ParticipantError(ValueError):
    """A participant who cannot start as asked (an id that is not one, an LLM condition without a key); one line."""


@dataclass(frozen=True)
class Admission:
    participant: str
    pool_id: str | None
    like: list[str] = field(default_factory=list)  # existing participants with an id like this new one


def check_participant_id(raw: str, pattern: str) -> str:
    """The id, stripped: letters, digits, '-' or '_', not ``sim-...``, and matching ``pattern``."""
    from engine.inputs import MAX_ID_CHARS, printable

    pid = raw.strip()
    if not pid or not pid.replace("-", "").replace("_", "").isalnum() or pid.startswith("sim-") or \
            len(pid) > MAX_ID_CHARS:
        raise ParticipantError(f"--participant {printable(raw, 48)!r}: use letters, digits, '-' or '_', "
                               f"at most {MAX_ID_CHARS} (ids starting 'sim-' are for simulated participants)")
    if not re.fullmatch(pattern, pid):
        raise ParticipantError(f"--participant {pid!r} does not match the study's participant_pattern {pattern!r} "
                               "([study] in the study file); check the id for a typo")
    return pid


def check_pool_id(raw: str | None) -> str | None:
    """The id an online pool gave the participant, as it is (at most 128 printable characters), or None."""
    pool_id = (raw or "").strip() or None
    if pool_id is not None and (len(pool_id) > 128 or not pool_id.isprintable()):
        raise ParticipantError(f"--pool-id {raw!r}: give the pool's id as it is (at most 128 printable characters)")
    return pool_id


def check_llm_conditions(study: Any) -> None:
    """Every LLM condition has a usable endpoint URL and a key (or a local endpoint)."""
    from personas.llm.settings import LLMConfigError, LLMSettings

    for c in study.conditions:
        if c.uses_llm:
            try:
                s = LLMSettings(base_url=c.llm.base_url, api_key_env=c.llm.api_key_env)
                s.check_base_url()
                s.resolve_api_key()
            except (LLMConfigError, ValueError) as exc:
                raise ParticipantError(f"condition {c.name!r}: {str(exc).splitlines()[0]}") from None


def _similar(a: str, b: str) -> bool:
    """Ids a person could type for one another: the same but for case, '-' and '_'."""
    def norm(x: str) -> str:
        return x.casefold().replace("-", "").replace("_", "")

    return a != b and norm(a) == norm(b)


def similar_participants(study: Any, pid: str, db: str) -> list[str]:
    """The real participants of ``study`` whose ids look like ``pid``; [] when ``pid`` is one
    already or the database does not exist yet."""
    if not Path(db).exists():
        return []
    from saves.store import StoreError, on_store
    from saves.study import StudyStore

    async def look(store):
        sdb = StudyStore(store, study.name)
        if await sdb.participant(pid) is not None:
            return []
        return [p["participant"] for p in await sdb.participants(simulated=False) if _similar(pid, p["participant"])]

    try:
        return on_store(db, look)
    except StoreError as exc:
        raise ParticipantError(str(exc)) from None


def admit(study: Any, participant: str, *, pool_id: str | None, db: str) -> Admission:
    """``calbench study run``'s checks, in order: the id, its look-alikes, the pool id, the LLM conditions."""
    pid = check_participant_id(participant, study.study.participant_pattern)
    like = similar_participants(study, pid, db)
    pool = check_pool_id(pool_id)
    if any(c.uses_llm for c in study.conditions):
        check_llm_conditions(study)
    return Admission(pid, pool, like)
