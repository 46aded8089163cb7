"""Who may start a study session at this terminal (``calbench study run``): the checks before
the study app opens.

:func:`admit` checks the participant's id (its form and the study's ``participant_pattern``),
the online pool's id, and every LLM condition's endpoint and key; a new id that looks
like an existing participant's (``p001``, ``P0O1`` or ``P0001`` next to ``P001``) is registered
only when the caller's ``ask`` says yes or the researcher passed ``--new-participant``; it returns
an :class:`Admission`.
Refusals are one-line :class:`ParticipantError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

__all__ = ["ParticipantError", "Admission", "admit", "check_participant_id", "check_pool_id",
           "check_llm_conditions", "similar_participants", "confirm_new", "lookalike_question",
           "lookalikes", "existing_participants"]


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


_CONFUSABLE = str.maketrans({"o": "0", "i": "1", "l": "1", "s": "5", "-": None, "_": None})


def _fold(pid: str) -> str:
    """An id with every pair a person mixes up made one character: case, O/0, I/l/1, S/5, '-'/'_' dropped."""
    return pid.casefold().translate(_CONFUSABLE)


def _one_edit(a: str, b: str) -> bool:
    """One character inserted, deleted or replaced turns ``a`` into ``b``."""
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) == 1
    short, long_ = sorted((a, b), key=len)
    i = next((k for k, (x, y) in enumerate(zip(short, long_)) if x != y), len(short))
    return short[i:] == long_[i + 1:]


def _numbers(pid: str) -> tuple[str, tuple[int, ...]]:
    """An id's frame (every run of digits as '#') and its numbers: P001 -> ('p#', (1,))."""
    return re.sub(r"[0-9]+", "#", pid), tuple(int(n) for n in re.findall(r"[0-9]+", pid))


def _similar(a: str, b: str) -> bool:
    """Ids a person could type for one another: the same once folded (p001, P0O1, PO01 for P001),
    or one edit apart (P0001, P01, PX001) -- but never two numbers of one scheme (P002, P1 / P11),
    which is how a study's next ids differ."""
    if a == b:
        return False
    fa, fb = _fold(a), _fold(b)
    if fa == fb:
        return True
    if not _one_edit(fa, fb):
        return False
    (frame_a, nums_a), (frame_b, nums_b) = _numbers(fa), _numbers(fb)
    return not (frame_a == frame_b and nums_a != nums_b)


def lookalikes(pid: str, ids: list[str]) -> list[str]:
    """The ids in ``ids`` that look like ``pid`` (see :func:`_similar`); [] when ``pid`` is one of them."""
    return [] if pid in ids else [i for i in ids if _similar(pid, i)]


def existing_participants(study: Any, db: str) -> list[str]:
    """The real (not simulated) participants of ``study`` in ``db``; [] when the database does not exist yet."""
    if not Path(db).exists():
        return []
    from saves.store import StoreError, on_store
    from saves.study import StudyStore

    async def look(store):
        return [p["participant"] for p in await StudyStore(store, study.name).participants(simulated=False)]

    try:
        return on_store(db, look)
    except StoreError as exc:
        raise ParticipantError(str(exc)) from None


def similar_participants(study: Any, pid: str, db: str) -> list[str]:
    """The real participants of ``study`` whose ids look like ``pid``; [] when ``pid`` is one
    already or the database does not exist yet."""
    return lookalikes(pid, existing_participants(study, db))


def lookalike_question(pid: str, like: list[str]) -> str:
    """What a terminal asks before registering ``pid`` next to the look-alike existing ids ``like``."""
    return f"{pid} looks like the existing participant {' / '.join(like)} \u2014 is this a new participant? [y/N]"


def confirm_new(study: Any, pid: str, like: list[str], *, ask: Callable[[str], bool] | None) -> None:
    """Register ``pid`` next to look-alike ids only when ``ask(question)`` says yes; without a way to
    ask (no terminal: a script, CI, a browser link) refuse in one line naming the existing id and
    the way on (``--new-participant``).  Nothing is printed here: the caller asks."""
    if not like:
        return
    if ask is None:
        raise ParticipantError(f"--participant {pid} looks like the existing participant {' / '.join(like)} of "
                               f"{study.name}: run with --participant {like[0]} to continue that participant, or "
                               f"add --new-participant to register {pid} as a new one")
    if not ask(lookalike_question(pid, like)):
        raise ParticipantError(f"{pid} not registered; to continue that participant run with --participant {like[0]}")


def admit(study: Any, participant: str, *, pool_id: str | None, db: str, new_participant: bool = False,
          ask: Callable[[str], bool] | None = None) -> Admission:
    """``calbench study run``'s checks, in order: the id, the pool id, the LLM conditions, and last
    the id's look-alikes among the study's participants (:func:`confirm_new`, skipped with
    ``new_participant``: the researcher said so)."""
    pid = check_participant_id(participant, study.study.participant_pattern)
    like = similar_participants(study, pid, db)
    pool = check_pool_id(pool_id)
    if any(c.uses_llm for c in study.conditions):
        check_llm_conditions(study)
    if not new_participant:
        confirm_new(study, pid, like, ask=ask)
    return Admission(pid, pool, like)
