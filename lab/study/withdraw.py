"""``study withdraw`` while the participant may be playing (issue 24, 4).

A participant's live session holds leases (``lab.lease``): the study runner holds the
participant's lease for its whole run, and every game in play is held by its own lease
(``lab.session.run_session``).  Withdrawing under a live session deleted the rows the
session was writing: the session crashed and its game was recreated as an orphan.

:func:`withdraw_participant` takes the participant's lease itself (so no session can start
while it deletes), checks that none of the participant's games is held by a live process,
and only then removes everything in one transaction.  While a session is live it waits up
to ``wait`` seconds for it to end (the participant finishes or quits: the game is saved
stopped and its leases dropped), then refuses with one line naming the session's process.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..lease import Lease, LeaseHeld, game_subject, participant_subject

__all__ = ["ParticipantBusy", "withdraw_participant"]


class ParticipantBusy(Exception):
    """The participant is in a live session; nothing was removed.  ``str()`` is one line."""


async def _live_game(store, db, participant: str) -> tuple[str, dict[str, Any]] | None:
    for step in await db.steps(participant):
        gid = step.get("game_id")
        if gid:
            held = await store.lease(game_subject(gid))
            if held is not None and held["alive"]:
                return gid, held
    return None


async def withdraw_participant(store, study_id: str, participant: str, *, wait: float = 0.0,
                               poll: float = 0.25) -> dict[str, int]:
    """Remove every row of ``participant`` (their games included) once no live session holds
    them; wait up to ``wait`` seconds for one to end, else :class:`ParticipantBusy`."""
    from saves.study import StudyStore

    db = StudyStore(store, study_id)
    lease = Lease(store, participant_subject(study_id, participant), role="study withdraw",
                  what=f"participant {participant}")
    deadline = time.monotonic() + max(0.0, wait)
    while True:
        try:
            await lease.acquire()
        except LeaseHeld as exc:
            role = exc.holder.get("role") or "another process"
            busy = f"participant {participant} is in a live session ({role}, pid {exc.holder.get('pid')})"
        else:
            live = await _live_game(store, db, participant)
            if live is None:
                break
            await lease.release()
            gid, held = live
            role = held.get("role") or "another process"
            busy = f"participant {participant} is playing game {gid[:8]} right now ({role}, pid {held.get('pid')})"
        if time.monotonic() >= deadline:
            waited = f" (waited {wait:g} s)" if wait > 0 else ""
            raise ParticipantBusy(f"{busy}{waited}; nothing was removed. Withdraw again when the session ends, "
                                  "or add --wait SECONDS to wait for it")
        await asyncio.sleep(poll)
    try:
        return await db.withdraw(participant)
    finally:
        await lease.release()
