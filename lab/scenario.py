"""One task to show: the work behind ``calbench scenario``.

:func:`scenario_task` looks a task up by reference (``canonical:7``, ``seed:7``,
``FILE.jsonl:ID``) or generates one from a seed (SPEC §2), solving it with the oracle
under a time limit.  A mistake the user can fix raises :class:`ScenarioError` (one line).
"""

from __future__ import annotations

__all__ = ["ScenarioError", "scenario_task"]


class ScenarioError(Exception):
    """A task reference that names no single task, generator settings that make no scenario,
    a bad time limit, or a scenario the oracle could not solve in time."""


def scenario_task(*, task: str | None = None, seed: int | None = None, agents: int = 5, slots: int = 16,
                  meetings: int = 5, participants: int = 3, density: float | list[float] = 0.8,
                  blocked: int | list[int] = 4, cost: str = "uniform", time_limit: float = 60.0):
    """The task ``task`` names (exactly one), else the scenario generated from ``seed`` (0 when
    None) with these settings; the oracle may take at most ``time_limit`` seconds on it."""
    from engine import oracle
    from engine.model import TaskError

    if not time_limit > 0:
        raise ScenarioError("--time-limit must be a positive number of seconds")
    old = oracle.set_time_limit(time_limit)
    try:
        if task is not None:
            return _look_up(task)
        from engine.generate import generate_scenario

        return generate_scenario(seed if seed is not None else 0, num_agents=agents, num_slots=slots,
                                 num_meetings=meetings, density=density, blocked=blocked, cost_mode=cost,
                                 participants_per_meeting=participants)
    except oracle.OracleTimeout:
        raise ScenarioError(f"the oracle did not solve this scenario within {time_limit:g} s "
                            f"({agents} agents, {slots} slots, {meetings} meetings); try a smaller "
                            "scenario or a longer --time-limit") from None
    except TaskError as exc:
        raise ScenarioError(str(exc)) from None
    finally:
        oracle.set_time_limit(old)


def _look_up(ref: str):
    from engine.taskref import TaskRefError, resolve_tasks

    if not ref.strip():
        raise ScenarioError("--task needs a reference, e.g. canonical:7, seed:7 or FILE.jsonl:ID")
    try:
        tasks = resolve_tasks(ref)
    except TaskRefError as exc:
        raise ScenarioError(str(exc)) from None
    if len(tasks) != 1:
        raise ScenarioError(f"--task {ref!r} names {len(tasks)} tasks; name exactly one (e.g. canonical:7)")
    return tasks[0]
