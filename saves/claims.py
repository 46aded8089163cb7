"""Claims and leases, in the ``claims`` table: a run's claim on the suite units it plays,
and the one live owner of a game or a participant's session (see ``saves/lease.py``).
Each change is one write transaction, so two processes never both hold one unit."""

from __future__ import annotations

from typing import Any, Iterable

from .codec import _now


class Claims:
    """The store's claims and leases (a part of :class:`saves.store.Store`)."""

    # -- claims: a run's lease on the tasks it plays (see saves/lease.py) -----------------
    async def claim_units(self, settings_key: str, units: list[tuple[str, str, str | None]], owner,
                          *, skip_done: bool = True) -> dict[str, str]:
        """Claim suite units ``(unit, task_id, game_id)`` for ``owner`` (a ``saves.lease.Owner``).

        In one write transaction, each unit becomes

        * ``done``  — ``skip_done`` and the task is completed under ``settings_key`` already;
        * ``taken`` — a live process (not ``owner``) holds its claim: respected, not played;
        * ``claimed`` — claimed now (it was free, or ours already);
        * ``stale`` — it was claimed by a process that is gone; taken over now.

        ``unit`` is ``"<task_id>#<occurrence>"``; a task counts as done for occurrence n
        when more than n games of it are completed.
        """
        from .lease import owner_alive

        if not units:
            return {}
        out: dict[str, str] = {}
        now = _now()
        async with self._tx() as db:
            done: dict[str, int] = {}
            if skip_done:
                tids = sorted({t for _, t, _ in units})
                for i in range(0, len(tids), 500):
                    part = tids[i:i + 500]
                    rows = await db.execute_fetchall(
                        f"SELECT task_id, COUNT(*) FROM games WHERE settings_key = ? AND status = 'completed' "
                        f"AND task_id IN ({', '.join('?' * len(part))}) GROUP BY task_id", [settings_key, *part])
                    done.update({r[0]: r[1] for r in rows})
            held: dict[str, tuple] = {}
            names = [u for u, _, _ in units]
            for i in range(0, len(names), 500):
                part = names[i:i + 500]
                rows = await db.execute_fetchall(
                    f"SELECT unit, owner, host, pid, claimed_at FROM claims WHERE settings_key = ? "
                    f"AND unit IN ({', '.join('?' * len(part))})", [settings_key, *part])
                held.update({r[0]: r[1:] for r in rows})
            new_rows = []
            for unit, task_id, game_id in units:
                occurrence = int(unit.rsplit("#", 1)[1]) if "#" in unit and unit.rsplit("#", 1)[1].isdigit() else 0
                if done.get(task_id, 0) > occurrence:
                    out[unit] = "done"
                    continue
                h = held.get(unit)
                if h is not None and h[0] != owner.token:
                    if owner_alive(h[0], h[1], h[2], h[3]):
                        out[unit] = "taken"
                        continue
                    out[unit] = "stale"
                else:
                    out[unit] = "claimed"
                new_rows.append((settings_key, unit, task_id, game_id, owner.token, owner.host, owner.pid,
                                 owner.run_pid, now))
            if new_rows:
                await db.executemany("INSERT OR REPLACE INTO claims (settings_key, unit, task_id, game_id, owner, "
                                     "host, pid, run_pid, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", new_rows)
        return out

    async def release_claims(self, settings_key: str, owner) -> int:
        """Drop ``owner``'s claims under ``settings_key`` (a run that ends cleanly)."""
        async with self._tx() as db:
            cur = await db.execute("DELETE FROM claims WHERE settings_key = ? AND owner = ?",
                                   (settings_key, owner.token))
            return cur.rowcount

    async def drop_claims(self, settings_key: str, owners: Iterable[str]) -> int:
        """Drop the claims of ``owners`` (tokens of processes that are gone) under ``settings_key``."""
        owners = sorted(set(owners))
        if not owners:
            return 0
        async with self._tx() as db:
            cur = await db.execute(f"DELETE FROM claims WHERE settings_key = ? AND owner IN "
                                   f"({', '.join('?' * len(owners))})", [settings_key, *owners])
            return cur.rowcount

    async def claims(self, settings_key: str) -> list[dict[str, Any]]:
        """Every claim under ``settings_key``, each with ``alive`` (is its process still there)."""
        from .lease import owner_alive

        cols = ("unit", "task_id", "game_id", "owner", "host", "pid", "run_pid", "claimed_at")
        async with self._db.execute(f"SELECT {', '.join(cols)} FROM claims WHERE settings_key = ? ORDER BY unit",
                                    (settings_key,)) as cur:
            rows = [dict(zip(cols, r)) for r in await cur.fetchall()]
        for r in rows:
            r["alive"] = owner_alive(r["owner"], r["host"], r["pid"], r["claimed_at"])
        return rows

    # -- leases: one live owner of a game or a participant's session (see lab/lease.py) ---
    _LEASE_COLS = ("unit", "task_id", "game_id", "owner", "host", "pid", "run_pid", "claimed_at")

    @staticmethod
    def _lease_row(r: tuple) -> dict[str, Any]:
        from .lease import LEASE_STALE_SECONDS, owner_alive

        unit, role, game_id, owner, host, pid, run_pid, at = r
        return {"subject": unit, "role": role, "game_id": game_id, "owner": owner, "host": host, "pid": pid,
                "heartbeat": at, "alive": owner_alive(owner, host, pid, at, stale_after=LEASE_STALE_SECONDS)}

    async def take_lease(self, subject: str, owner, *, role: str, game_id: str | None = None
                         ) -> tuple[str, dict[str, Any] | None]:
        """Take the lease on ``subject`` for ``owner`` (a ``saves.lease.Owner``), in one write transaction.

        Answers ``("claimed", None)`` (it was free, or ours), ``("stale", old)`` (its holder is
        gone: taken over) or ``("taken", holder)`` (a live process holds it: nothing written).
        """
        from .lease import LEASE_KEY

        async with self._tx() as db:
            rows = await db.execute_fetchall(f"SELECT {', '.join(self._LEASE_COLS)} FROM claims "
                                             "WHERE settings_key = ? AND unit = ?", (LEASE_KEY, subject))
            held = self._lease_row(rows[0]) if rows else None
            if held is not None and held["owner"] != owner.token and held["alive"]:
                return "taken", held
            await db.execute("INSERT OR REPLACE INTO claims (settings_key, unit, task_id, game_id, owner, host, pid, "
                             "run_pid, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (LEASE_KEY, subject, role, game_id, owner.token, owner.host, owner.pid, owner.run_pid,
                              _now()))
        if held is not None and held["owner"] != owner.token:
            return "stale", held
        return "claimed", None

    async def renew_lease(self, subject: str, owner) -> bool:
        """The holder's heartbeat; False when ``owner`` no longer holds the lease (taken over)."""
        from .lease import LEASE_KEY

        async with self._lock:
            cur = await self._db.execute("UPDATE claims SET claimed_at = ? WHERE settings_key = ? AND unit = ? "
                                         "AND owner = ?", (_now(), LEASE_KEY, subject, owner.token))
            return cur.rowcount == 1

    async def release_lease(self, subject: str, owner) -> bool:
        """Drop ``owner``'s lease on ``subject`` (a clean end); another holder's is left alone."""
        from .lease import LEASE_KEY

        async with self._lock:
            cur = await self._db.execute("DELETE FROM claims WHERE settings_key = ? AND unit = ? AND owner = ?",
                                         (LEASE_KEY, subject, owner.token))
            return cur.rowcount == 1

    async def lease(self, subject: str) -> dict[str, Any] | None:
        """The lease on ``subject`` (``role``, ``pid``, ``host``, ``heartbeat``, ``alive``), or None."""
        from .lease import LEASE_KEY

        async with self._db.execute(f"SELECT {', '.join(self._LEASE_COLS)} FROM claims WHERE settings_key = ? "
                                    "AND unit = ?", (LEASE_KEY, subject)) as cur:
            row = await cur.fetchone()
        return self._lease_row(row) if row else None

    async def leases(self, prefix: str = "") -> list[dict[str, Any]]:
        """Every lease whose subject starts with ``prefix`` (e.g. ``"game:"``), live or stale."""
        from .lease import LEASE_KEY

        esc = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        async with self._db.execute(f"SELECT {', '.join(self._LEASE_COLS)} FROM claims WHERE settings_key = ? "
                                    "AND unit LIKE ? ESCAPE '\\' ORDER BY unit", (LEASE_KEY, esc + "%")) as cur:
            return [self._lease_row(r) for r in await cur.fetchall()]
