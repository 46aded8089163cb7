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

__all__ = ["Owner", "current_owner", "process_start", "pid_alive", "owner_alive", "FOREIGN_STALE_SECONDS"]

FOREIGN_STALE_SECONDS = 6 * 3600


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


def owner_alive(token: str, host: str, pid: int, claimed_at: str | None = None) -> bool:
    """Is the process that made a claim still running?"""
    if host != socket.gethostname():
        try:
            age = (datetime.now(timezone.utc) - datetime.fromisoformat(claimed_at or "")).total_seconds()
        except (TypeError, ValueError):
            return False
        return age < FOREIGN_STALE_SECONDS
    if not pid_alive(pid):
        return False
    start = token.rsplit(":", 1)[-1] if token.count(":") >= 2 else ""
    return not start or process_start(pid) in ("", start)
