"""The public study link for an online pool (Prolific, MTurk ...): one URL for everyone.

A study whose ``[pool]`` sets ``max_participants`` gets, from ``calbench serve --study``, one
public link ``BASE?code=PUBLIC&ID_PARAM={the pool's id}`` (``ID_PARAM`` is ``[pool] id_param``,
e.g. ``PROLIFIC_PID``).  Opening it (:meth:`PoolDoor.admit`):

* the same pool id again is the same participant: they are sent to their own private link
  and resume where they were (or see their ending again); never a second slot;
* a new pool id gets a new participant (``[pool] participant_prefix`` + the lowest free
  number: W001, W002, ...) registered at the lowest open counterbalancing slot, in one write
  transaction with the check (``saves.study.StudyStore.admit_pool``);
* while ``max_participants`` real participants are active or completed the link refuses
  newcomers ("the study is full"); declined, screened-out and timed-out participants free
  their place.

The public code is derived like the private ones (``lab.study.links``), from the study's
name with the key kept next to the database, so the link stays the same after a restart and
cannot be guessed.  Refusals the visitor reads are :class:`PoolRefusal` (one line, plain words);
a setup the server cannot serve is :class:`lab.gamespec.SetupError`.
"""

from __future__ import annotations

import re
from typing import Any

from ..gamespec import SetupError
from .admit import ParticipantError, check_pool_id
from .links import link_key, study_link, study_links

__all__ = ["PoolDoor", "PoolRefusal", "public_code", "pool_participant_id", "pool_links", "served_links"]

_PUBLIC = "\0public-link"  # the subject of the public code (no participant id can be it)


class PoolRefusal(ValueError):
    """The public link cannot admit this visitor; the message is for them, one line."""


def public_code(key: bytes, study: Any) -> str:
    """The public link's code: like a participant's link code, for no participant."""
    return study_link(key, study.name, _PUBLIC)


def pool_participant_id(prefix: str, taken: set[str]) -> str:
    """The lowest free id ``PREFIX001``, ``PREFIX002``, ... (more digits past 999)."""
    n = 1
    while f"{prefix}{n:03d}" in taken:
        n += 1
    return f"{prefix}{n:03d}"


def _check_ids(study: Any) -> None:
    pattern = study.study.participant_pattern
    example = pool_participant_id(study.pool.participant_prefix, set())
    if not re.fullmatch(pattern, example):
        raise SetupError(f"the public link's participant ids ({example}, ...: [pool] participant_prefix) do not "
                         f"match the study's participant_pattern {pattern!r}; change one of them")


def pool_links(study: Any, db: str) -> dict[str, str]:
    """``{link code: participant}`` of the participants the public link admitted earlier (every real
    participant with a pool id), so their private links open after a restart."""
    from pathlib import Path

    if not Path(db).exists():
        return {}
    from saves.store import StoreError, on_store
    from saves.study import StudyStore

    async def look(store):
        return [p["participant"] for p in await StudyStore(store, study.name).participants(simulated=False)
                if p.get("pool_id")]

    try:
        ids = on_store(db, look)
    except StoreError as exc:
        raise SetupError(str(exc)) from None
    key = link_key(db)
    return {study_link(key, study.name, pid): pid for pid in ids}


class PoolDoor:
    """The public link of ``study`` (served from ``db``): :attr:`code` opens it, :meth:`admit`
    lets a pool id in.  Made only for a study with ``[pool] max_participants``."""

    def __init__(self, study: Any, db: str) -> None:
        if study.pool.max_participants is None:
            raise SetupError("the study has no public link: set [pool] max_participants (the most participants "
                             "it admits) in the study file")
        _check_ids(study)
        self.study = study
        self.db = db
        self.key = link_key(db)
        self.code = public_code(self.key, study)
        self.param = study.pool.id_param

    async def admit(self, raw_pool_id: str | None) -> tuple[str, str]:
        """``(private link code, participant id)`` for the pool id ``raw_pool_id``: the participant who
        already has it, or a new one (see the module docstring).  :class:`PoolRefusal` when the id is
        missing or not one, or the study is full."""
        try:
            pool_id = check_pool_id(raw_pool_id)
        except ParticipantError:
            pool_id = None
        if pool_id is None:
            raise PoolRefusal(f"This link needs your id from the study's website ({self.param}=...). Open the "
                              "study from there.")
        from saves.store import Store
        from saves.study import StudyStore

        from .assign import assignment
        from .model import pool_tasks
        from .runner import design_hash, plan_steps

        study = self.study
        tasks = pool_tasks(study)

        def plan(slot: int):
            games = assignment(study, slot, tasks)
            return [g.to_json() for g in games], plan_steps(study, games)

        async with await Store.open(self.db) as store:
            pid, _new = await StudyStore(store, study.name).admit_pool(
                pool_id, cap=study.pool.max_participants,
                new_id=lambda taken: pool_participant_id(study.pool.participant_prefix, taken),
                plan=plan, design_hash=design_hash(study))
        if pid is None:
            raise PoolRefusal("This study is full: every place has been taken. Please return the study on the "
                              "study's website. Thank you for your interest.")
        return study_link(self.key, study.name, pid), pid


def served_links(study: Any, participants: str | None, db: str) -> tuple[dict[str, str], PoolDoor | None]:
    """What ``calbench serve --study`` serves: ``({link code: participant}, public link or None)``.
    Without ``[pool] max_participants``: the private links of ``participants`` (required).  With
    it: the public link, the private links of the participants it admitted before, and those of
    ``participants`` when given."""
    if study.pool.max_participants is None:
        return study_links(study, participants, db), None
    door = PoolDoor(study, db)
    return {**pool_links(study, db), **(study_links(study, participants, db) if participants else {})}, door
