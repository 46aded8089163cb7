"""Who holds a claim, and whether that process is still there.

A run claims each task in the store before playing it (``Store.claim_units``).  A claim
names its owner as ``<host>:<pid>:<start>``, where ``start`` is the process's start time
(``/proc/<pid>/stat`` field 22 on Linux), so a pid the system has since given to another
process does not keep a dead run's claim alive.  A claim is *live* when its process is
alive on this host; a claim from another host is treated as live (we cannot look) until
it is older than :data:`FOREIGN_STALE_SECONDS`.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timezone

__all__ = ["Owner", "current_owner", "process_start", "pid_alive", "owner_alive", "FOREIGN_STALE_SECONDS",
           "LEASE_KEY", "HEARTBEAT_SECONDS", "LEASE_STALE_SECONDS", "LeaseHeld", "game_subject",
           "participant_subject"]

FOREIGN_STALE_SECONDS = 6 * 3600

# -- leases on live things (a game in play, a study participant's session) -------------------
# Kept in the ``claims`` table under the settings key :data:`LEASE_KEY`: ``unit`` is the
# subject (``game:<id>``, ``participant:<study>:<id>``), ``task_id`` the holder's role
# ("calbench-play", "study run", "serve"), ``game_id`` the game when the subject is one, and
# ``claimed_at`` the holder's last heartbeat.  See ``lab.lease.Lease``.

#: The claims table's settings key for leases (never a suite's settings key: those hold ':' parts).
LEASE_KEY = "lease"
#: How often a holder renews its heartbeat.
HEARTBEAT_SECONDS = 10.0
#: A lease held from another host is stale once its heartbeat is this old.  On this host the
#: holder's pid (and its start time) decides: a process that is gone leaves a stale lease.
LEASE_STALE_SECONDS = 60.0


def game_subject(game_id: str) -> str:
    """The lease subject of a game in play."""
    return f"game:{game_id}"


def participant_subject(study: str, participant: str) -> str:
    """The lease subject of one study participant's live session."""
    return f"participant:{study}:{participant}"


class LeaseHeld(Exception):
    """Someone else holds the lease: ``holder`` is its row (role, pid, host, heartbeat).
    ``str()`` is one line naming the owner."""

    def __init__(self, subject: str, holder: dict, what: str = "") -> None:
        self.subject = subject
        self.holder = holder
        self.what = what
        role = holder.get("role") or "another calbench process"
        where = "" if holder.get("host") == socket.gethostname() else f" on {holder.get('host')}"
        super().__init__(f"{what or subject} is in use by {role} (pid {holder.get('pid')}{where}, last seen "
                         f"{holder.get('heartbeat') or '?'}); wait for it to end, or stop that process — a lease "
                         "whose process is gone is taken over")


def process_start(pid: int) -> str:
    """The start time of ``pid`` in clock ticks since boot ('' when unknown: not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except OSError:
        return ""
    # the command name is in parentheses and may hold spaces: split after the last ')'
    rest = raw[raw.rfind(")") + 2:].split()
    return rest[19] if len(rest) > 19 else ""


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process, but it exists
    except OSError:
        return False
    try:  # a zombie has exited: it only waits to be reaped
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
        state = raw[raw.rfind(")") + 2:].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return True


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    start: str
    run_pid: int | None = None

    @property
    def token(self) -> str:
        return f"{self.host}:{self.pid}:{self.start}"


def current_owner(run_pid: int | None = None) -> Owner:
    pid = os.getpid()
    return Owner(socket.gethostname(), pid, process_start(pid), run_pid)


def owner_alive(token: str, host: str, pid: int, claimed_at: str | None = None,
                stale_after: float = FOREIGN_STALE_SECONDS) -> bool:
    """Is the process that made a claim still running?  (Another host's: is its last
    ``claimed_at`` younger than ``stale_after`` seconds?)"""
    if host != socket.gethostname():
        try:
            age = (datetime.now(timezone.utc) - datetime.fromisoformat(claimed_at or "")).total_seconds()
        except (TypeError, ValueError):
            return False
        return age < stale_after
    if not pid_alive(pid):
        return False
    start = token.rsplit(":", 1)[-1] if token.count(":") >= 2 else ""
    return not start or process_start(pid) in ("", start)
