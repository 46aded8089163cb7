"""The oracle against a task file: the work behind ``calbench oracle``.

:func:`load_tasks` reads a task reference; :func:`check_tasks` solves each task with the
CP-SAT oracle (SPEC §3) under a time limit and compares with the ``optimal.cost`` the file
records, giving each disagreement its reason.  A mistake the user can fix raises
:class:`OracleCheckError` (one line).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["OracleCheck", "OracleCheckError", "check_task", "check_tasks", "load_tasks"]


class OracleCheckError(Exception):
    """A task reference that cannot be read, a bad time limit, a task the oracle could not solve in time."""


@dataclass
class OracleCheck:
    rows: list[dict[str, Any]]  # one per task, see check_task

    @property
    def agree(self) -> int:
        return sum(r["status"] == "agree" for r in self.rows)

    @property
    def disagree(self) -> int:
        return sum(r["status"] == "disagree" for r in self.rows)


def load_tasks(ref: str) -> list:
    """The tasks a reference names (PATH.jsonl, PATH.jsonl:ID, canonical, seed:7, ...)."""
    from engine.model import TaskError
    from engine.taskref import TaskRefError, resolve_tasks

    try:
        return resolve_tasks(ref)
    except (TaskRefError, TaskError, OSError) as exc:
        raise OracleCheckError(str(exc)) from None


def _compare(res, file_cost) -> tuple[str, str]:
    """(status, reason): agree, disagree (with why) or unknown (the file records no optimum)."""
    if file_cost is None:
        return "unknown", "the file records no optimal.cost"
    if not res.feasible:
        return "disagree", ("no schedule fits every agent's errands (our exact errand-capacity constraint binds; "
                            f"the relaxation without it costs {res.relaxed_cost})" if res.capacity_binds
                            else "no feasible schedule exists")
    if res.cost == file_cost:
        return "agree", ""
    if res.capacity_binds:
        return "disagree", (f"our exact errand-capacity constraint binds: without it the optimum is "
                            f"{res.relaxed_cost}, but that schedule leaves some displaced errand nowhere to go")
    return "disagree", ("our optimum is lower than the file's" if res.cost < file_cost
                        else "our optimum is higher than the file's")


def check_task(task) -> dict[str, Any]:
    """One task solved and compared with the file's optimal cost."""
    from engine.oracle import difficulty_from_fraction, feasible_fraction, solve

    t0 = time.perf_counter()
    res = solve(task)
    frac = feasible_fraction(task)
    seconds = time.perf_counter() - t0
    file_cost = (task.row.get("optimal") or {}).get("cost")
    status, reason = _compare(res, file_cost)
    return {
        "task_id": task.task_id,
        "optimal_cost": res.cost if res.feasible else None,
        "file_optimal_cost": file_cost,
        "agent_costs": list(res.agent_costs) if res.feasible else None,
        "feasible_fraction": frac.value,
        "feasible_fraction_exact": frac.exact,
        "feasible_fraction_interval": [frac.low, frac.high],
        "difficulty": difficulty_from_fraction(frac.value),
        "seconds": round(seconds, 4),
        "status": status,
        "reason": reason,
    }


def check_tasks(tasks: list, *, time_limit: float = 60.0,
                advance: Callable[[], None] | None = None) -> OracleCheck:
    """Every task checked (:func:`check_task`), at most ``time_limit`` seconds of solving each;
    ``advance()`` after each task."""
    from engine import oracle

    if not time_limit > 0:
        raise OracleCheckError("--time-limit must be a positive number of seconds")
    rows = []
    old = oracle.set_time_limit(time_limit)
    try:
        for task in tasks:
            try:
                rows.append(check_task(task))
            except oracle.OracleTimeout:
                raise OracleCheckError(f"task {task.task_id}: the oracle did not solve it within "
                                       f"{time_limit:g} s; give a longer --time-limit") from None
            if advance:
                advance()
    finally:
        oracle.set_time_limit(old)
    return OracleCheck(rows)
