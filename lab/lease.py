"""A run's lease on what it plays, and workers that die with their parent.

Issue 15: a killed ``calbench run`` left its worker processes writing under PID 1 while
``--resume`` played the same tasks again (456 tasks completed twice out of 720), and two
runs of one suite into one database played every task twice.  Two mechanisms close this:

* **Workers die with their parent.**  :func:`die_with_parent` (called first thing in a
  forked worker) asks Linux to SIGKILL the worker when its parent dies
  (``prctl(PR_SET_PDEATHSIG)`` through ctypes) and starts a watchdog thread that exits
  the worker when its parent pid changes (other systems, and the window before prctl).
  A worker that dies this way loses at most the finished games it had not flushed yet;
  their claims go stale and ``--resume`` plays them again.
* **Claims.**  Each task of a suite ("unit": ``<task_id>#<occurrence>``) is claimed in the
  store (``Store.claim_units``, one transaction per chunk of :data:`CHUNK` units) before it
  is played.  A live claim of another process is respected (the task is left to it), a
  stale one (its process gone) is taken over, and — when resuming — a task completed
  already is never played again.  Checking "completed" and claiming happen in one write
  transaction, so two processes cannot both decide to play a task.

A run that ends cleanly drops its claims.  A second run of the same suite into the same
database while the first is alive is refused in one line, unless it is a ``--resume``,
which shares the work: it plays only what nobody else holds.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from saves.lease import (HEARTBEAT_SECONDS, LeaseHeld, Owner, current_owner, game_subject,
                         participant_subject)

__all__ = ["CHUNK", "Claimer", "ResumeReport", "die_with_parent", "units_of", "check_other_runs",
           "prepare_resume_claims", "Lease", "LeaseHeld", "hold_game", "game_subject", "participant_subject"]

#: Units claimed per store transaction (one writer-lock trip per chunk, as the saver flushes).
CHUNK = 8
PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int, *, interval: float = 0.2, watch: bool = True) -> bool:
    """Make this (forked) process die when ``parent_pid`` does.  True when prctl took.

    Linux: ``PR_SET_PDEATHSIG`` = SIGKILL, then a check that the parent did not die before
    the call (it would not fire then).  Everywhere (unless ``watch`` is false: a process
    that forks and so wants no thread, and watches ``os.getppid()`` itself): a daemon
    thread that polls ``os.getppid()`` and ends the process with ``os._exit`` once it changes.
    """
    armed = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            armed = libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent_pid:  # the parent is gone already
        os._exit(1)
    if not watch:
        return armed

    def watcher() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watcher, name="calbench-parent-watchdog", daemon=True).start()
    return armed


def units_of(tasks: Sequence[Any]) -> list[str]:
    """``<task_id>#<occurrence>`` for each task of a suite (a task may appear twice)."""
    seen: dict[str, int] = {}
    out = []
    for t in tasks:
        n = seen.get(t.task_id, 0)
        seen[t.task_id] = n + 1
        out.append(f"{t.task_id}#{n}")
    return out


class Claimer:
    """Claims a process's share of a suite, a chunk at a time, just before it is played.

    ``take(i)`` answers for task ``i``: ``claimed`` / ``stale`` (play it), ``done`` or
    ``taken`` (do not).  ``release()`` drops this process's claims (a clean end).
    """

    def __init__(self, store, key: str, tasks: Sequence[Any], ids: Sequence[str], units: Sequence[str], *,
                 run_pid: int | None = None, skip_done: bool = True, chunk: int = CHUNK) -> None:
        self.store = store
        self.key = key
        self.tasks = list(tasks)
        self.ids = list(ids)
        self.units = list(units)
        self.owner: Owner = current_owner(run_pid)
        self.skip_done = skip_done
        self.chunk = max(1, chunk)
        self.status: dict[int, str] = {}
        self.counts: dict[str, int] = {"claimed": 0, "stale": 0, "done": 0, "taken": 0}
        self._lock = asyncio.Lock()

    async def take(self, i: int) -> str:
        async with self._lock:  # concurrent games of one process share one claim per chunk
            if i not in self.status:
                idx = [j for j in range(i, min(len(self.tasks), i + self.chunk)) if j not in self.status]
                got = await self.store.claim_units(
                    self.key, [(self.units[j], self.tasks[j].task_id, self.ids[j]) for j in idx], self.owner,
                    skip_done=self.skip_done)
                for j in idx:
                    self.status[j] = got.get(self.units[j], "taken")
        st = self.status[i]
        self.counts[st] = self.counts.get(st, 0) + 1
        return st

    def plays(self, status: str) -> bool:
        return status in ("claimed", "stale")

    async def release(self) -> None:
        try:
            await self.store.release_claims(self.key, self.owner)
        except Exception:  # noqa: BLE001 - a closed store at shutdown; the claims go stale anyway
            pass


@dataclass
class ResumeReport:
    """What ``--resume`` found before playing (one line for the user)."""

    total: int = 0
    completed: int = 0
    marked_stopped: int = 0
    set_aside: int = 0  # completed games with infrastructure failures, marked stopped to be played again
    stale_claims: int = 0
    held_by_others: int = 0
    other_pids: list[int] = field(default_factory=list)
    to_play: int = 0

    def line(self) -> str:
        parts = [f"{self.completed} of {self.total} tasks completed already"]
        if self.marked_stopped:
            parts.append(f"{self.marked_stopped} game(s) a crash left running marked stopped")
        if self.set_aside:
            parts.append(f"{self.set_aside} game(s) whose endpoint failed set aside (marked stopped) "
                         "to be played again")
        if self.stale_claims:
            parts.append(f"{self.stale_claims} task(s) claimed by a run that is gone, taken over")
        if self.held_by_others:
            pids = ", ".join(str(p) for p in sorted(set(self.other_pids))[:3])
            parts.append(f"{self.held_by_others} being played by another run (pid {pids}), left to it")
        return "resume: " + "; ".join(parts) + f"; playing {self.to_play}"


async def check_other_runs(store, key: str, *, resume: bool, db: str,
                           units: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Live claims of other runs under ``key`` (on ``units``, this run's tasks, when given: the
    other shard of a suite, ``--shard 2/2`` beside ``1/2``, plays other tasks and is no
    conflict); without ``resume`` any is :class:`OtherRunActive` (the caller shows it as one line)."""
    me = os.getpid()
    mine = None if units is None else set(units)
    live = [c for c in await store.claims(key) if c["alive"] and c["run_pid"] != me and c["pid"] != me
            and (mine is None or c["unit"] in mine)]
    if live and not resume:
        pids = sorted({c["run_pid"] or c["pid"] for c in live})
        raise OtherRunActive(
            f"another calbench run (pid {', '.join(map(str, pids[:3]))}) is playing this suite with the same "
            f"agents and settings into {db} right now; add --resume to share the work with it, or wait "
            "for it to finish")
    return live


class OtherRunActive(Exception):
    """A second run of the same suite into the same database, without ``--resume``."""


class OtherSuite(Exception):
    """``--resume`` of a suite whose task ids name other tasks in the database (one line)."""


def same_task(row: str | dict[str, Any], task: Any) -> bool:
    """Whether a saved game's task row (JSON text or parsed) holds the same scenario as
    ``task``: the same calendars, meetings, cost values and slots
    (``lab.oracle_cache.task_hash``; the row's other fields — labels, annotations, key
    order — do not decide)."""
    import orjson

    from engine.model import Task
    from lab.oracle_cache import task_hash

    try:
        saved = Task.from_row(orjson.loads(row) if isinstance(row, (str, bytes)) else row)
    except Exception:  # noqa: BLE001 - a row this version cannot read is not the same task
        return False
    return task_hash(saved) == task_hash(task)


async def other_content(store, key: str, tasks: Sequence[Any]) -> list[str]:
    """The ids of ``tasks`` whose completed games under ``key`` were all played on another
    scenario with the same task id (a game saved without its row counts as the same)."""
    if not tasks:
        return []
    rows = await store.completed_task_rows(key)
    return [t.task_id for t in tasks
            if rows.get(t.task_id) and not any(same_task(r, t) for r in rows[t.task_id])]


async def prepare_resume_claims(store, key: str, tasks: Sequence[Any], ids: Sequence[str]
                                ) -> tuple[list[int], ResumeReport]:
    """``--resume`` bookkeeping: which task indexes are left to play, and what was found.

    Refused (:class:`OtherSuite`, nothing changed) when the database holds these task ids
    under ``key`` played on other scenarios.  Games a crash left ``running`` are marked
    stopped — except those a live process still plays — and so are this suite's completed
    games whose endpoint failed (their tasks are played again).  Tasks completed under
    ``key`` are dropped.  Claims are only inspected here (each worker claims its own chunks
    as it goes).
    """
    report = ResumeReport(total=len(tasks))
    # first, before anything is changed: is this the suite the database holds under these ids?
    done = set(await store.completed_task_ids(key))
    other = await other_content(store, key, [t for t in tasks if t.task_id in done])
    if other:
        shown = ", ".join(other[:2]) + (", …" if len(other) > 2 else "")
        raise OtherSuite(
            f"{len(other)} task(s) of this suite ({shown}) are completed in {store.path} under the same agents "
            "and settings but on other calendars or meetings (another task file that uses the same task ids?); "
            "resuming would mix the two suites' games: use another --db")
    claims = await store.claims(key)
    me = os.getpid()
    live_games = {c["game_id"] for c in claims if c["alive"] and c["pid"] != me}
    for gid in await store.running_game_ids(key):
        if gid in live_games:
            continue
        await store.mark_status(gid, "stopped")
        report.marked_stopped += 1
    ours = {t.task_id for t in tasks}  # (another shard's games are its own resume's)
    for gid, tid in await store.infra_failed_games(key):
        if tid in ours:
            # the endpoint failed in it (down, timing out): its scores do not measure the agents;
            # kept (stopped, out of every report) and its task played again
            await store.mark_status(gid, "stopped")
            report.set_aside += 1
    done = set(await store.completed_task_ids(key))
    units = units_of(tasks)
    by_unit = {c["unit"]: c for c in claims}
    keep = []
    for i, t in enumerate(tasks):
        if t.task_id in done:
            report.completed += 1
            continue
        c = by_unit.get(units[i])
        if c is not None and c["pid"] != me:
            if c["alive"]:
                report.held_by_others += 1
                report.other_pids.append(c["run_pid"] or c["pid"])
            else:
                report.stale_claims += 1
        keep.append(i)
    report.to_play = len(keep) - report.held_by_others
    # the claims of runs that are gone: tidy them away (a task they held and did not
    # complete is played again by whoever claims it next)
    await store.drop_claims(key, {c["owner"] for c in claims if not c["alive"]})
    return keep, report


# -- one owner of a live game (issue 24, 3) ----------------------------------------------------

class Lease:
    """One process's lease on a live thing: a game in play (:func:`game_subject`) or a study
    participant's session (:func:`participant_subject`).

    ``async with Lease(store, subject, role="calbench-play"):`` takes the lease (raising
    :class:`LeaseHeld`, whose text is one line naming the owner, when a live process holds
    it), renews its heartbeat every ``heartbeat`` seconds while the block runs, and drops it
    at the end, however the block ends.  A lease whose process is gone (this host: its pid
    is absent or now another process; another host: no heartbeat for
    ``saves.lease.LEASE_STALE_SECONDS``) is taken over, and :attr:`took_over` says whose it
    was.  The lease lives in the save database, so every process that opens it agrees.

    ``lost`` is set when the heartbeat finds the lease gone (someone took it over believing
    this process dead): the holder should stop writing.
    """

    def __init__(self, store, subject: str, *, role: str, game_id: str | None = None, what: str = "",
                 heartbeat: float = HEARTBEAT_SECONDS) -> None:
        self.store = store
        self.subject = subject
        self.role = role
        self.game_id = game_id
        self.what = what
        self.heartbeat = heartbeat
        self.owner: Owner = current_owner()
        self.took_over: dict[str, Any] | None = None
        self.held = False
        self.lost = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def acquire(self) -> "Lease":
        status, other = await self.store.take_lease(self.subject, self.owner, role=self.role, game_id=self.game_id)
        if status == "taken":
            raise LeaseHeld(self.subject, other or {}, self.what)
        self.took_over = other if status == "stale" else None
        self.held = True
        self._task = asyncio.get_running_loop().create_task(self._beat(), name=f"lease {self.subject}")
        return self

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat)
            try:
                if not await self.store.renew_lease(self.subject, self.owner):
                    self.lost.set()
                    return
            except Exception:  # noqa: BLE001 - a busy database: try again at the next beat
                continue

    async def release(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except BaseException:  # noqa: BLE001 - cancelled, as asked
                pass
            self._task = None
        if self.held:
            self.held = False
            try:
                await asyncio.shield(self.store.release_lease(self.subject, self.owner))
            except BaseException:  # noqa: BLE001 - a closed store at shutdown: the lease goes stale with us
                pass

    async def __aenter__(self) -> "Lease":
        return await self.acquire()

    async def __aexit__(self, *exc) -> None:
        await self.release()


def hold_game(store, game_id: str, role: str) -> Lease:
    """The lease on one game in play (``async with hold_game(store, gid, "serve"):``)."""
    return Lease(store, game_subject(game_id), role=role, game_id=game_id, what=f"game {game_id[:8]}")
