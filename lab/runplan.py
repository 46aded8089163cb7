"""What ``calbench run`` decides before and after it plays a suite (no Textual, no printing).

Two steps, each one call from ``calbench_cli/commands/run.py``:

* :func:`plan_run` — the options checked, the tasks resolved, the shard read, the agents
  spec parsed once, where the games are played (Ray, else decided when playing);
* :func:`play_run` — with the LLM settings built: the DSM fidelity, the spec checked
  against every seat count of the suite, how many games at once (processes for a
  CPU-bound scripted suite, games in flight for LLM seats), the suite played
  (``lab.runner.run_cli_suite``), and the result counted (:class:`RunResult`).

A user's mistake is a :class:`lab.gamespec.SetupError`; a run that cannot go on (another
run holds the suite, an executor or store that fails) a :class:`lab.runner.RunError`;
both one line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from engine.model import Task
from personas.spec import AgentsSpec, PersonaSpecError

from . import runner
from .gamespec import SetupError
from .summary import GameSummary

__all__ = ["RunPlan", "RunResult", "plan_run", "play_run", "parse_shard", "resolve_fidelity", "game_slots"]


@dataclass
class RunPlan:
    """A suite checked and ready to play: the tasks, the parsed spec, the rules, the shard."""

    tasks: list[Task]
    spec: AgentsSpec
    channels: tuple[str, ...]
    max_turns: int
    retries: int
    deterministic: bool
    concurrency: int | None  # --concurrency, or None: decided by the suite's size and seats
    shard: tuple[int, int] | None = None  # (I, N): applied when playing, after the spec is checked on the whole suite
    executor: Any = None  # Ray's (``lab.executors.ray_executor``), or None: decided when playing


@dataclass
class RunResult:
    """A suite played: its games (with ``--resume``, the ones completed before too) and Table 2."""

    games: list[GameSummary]
    summary: list[dict[str, Any]]
    fidelity: str
    db: str
    failed: int = field(init=False)  # games saved as failed (crashed)
    infra: int = field(init=False)  # games with infrastructure failures (an LLM endpoint down or failing)
    config: int = field(init=False)  # games with context overflows (a setting to change)

    def __post_init__(self) -> None:
        self.failed = sum(1 for g in self.games if g.status == "failed")
        self.infra = sum(1 for g in self.games if g.infra_failures)
        self.config = sum(1 for g in self.games if g.config_failures)

    def exit_code(self, keep_going: bool = False) -> int:
        """1 when a game failed (unless ``keep_going``), had infrastructure failures or context overflows; else 0."""
        return int(bool((self.failed and not keep_going) or self.infra or self.config))


def parse_shard(raw: str | None) -> tuple[int, int] | None:
    """``I/N`` (1-based) as ``(I, N)``; None without one."""
    if raw is None:
        return None
    try:
        i_s, n_s = raw.split("/")
        i, n = int(i_s), int(n_s)
    except ValueError:
        raise SetupError(f"--shard must look like I/N (e.g. 1/4), got {raw!r}") from None
    if n < 1 or not 1 <= i <= n:
        raise SetupError(f"--shard {raw}: need 1 ≤ I ≤ N")
    return i, n


def _ray(executor: str, address: str | None) -> Any:
    """Ray's executor for ``--executor ray`` (checked to be installed), else None."""
    if executor != "ray":
        if address:
            raise SetupError("--address needs --executor ray")
        return None
    from .executors import RAY_MISSING, RayOptions, ray_available, ray_executor

    if not ray_available():
        raise SetupError(RAY_MISSING)
    return ray_executor(RayOptions(address=address))


def _spec(agents: str) -> AgentsSpec:
    if not agents.strip():
        raise SetupError("--agents needs a persona name, e.g. imap")
    try:
        return runner.agents_of(agents.strip())  # parsed once (the lab's one parse); everything below uses it
    except PersonaSpecError as exc:
        raise SetupError(str(exc)) from None


def _tasks(ref: str) -> list[Task]:
    from engine.model import TaskError
    from engine.taskref import TaskRefError, resolve_tasks

    try:
        tasks = resolve_tasks(ref)
    except (TaskRefError, TaskError) as exc:
        raise SetupError(str(exc)) from None
    if not tasks:
        raise SetupError(f"--tasks {ref} names no tasks")
    return tasks


def plan_run(tasks_ref: str, agents: str, *, channels: Sequence[str], max_turns: int = 15, retries: int = 3,
             deterministic: bool = False, concurrency: int | None = None, executor: str = "local",
             address: str | None = None, shard: str | None = None) -> RunPlan:
    """The first step of ``calbench run``: every option checked, the tasks and the spec read."""
    if retries < 0:
        raise SetupError("--retries must be 0 or more")
    if max_turns < 1:
        raise SetupError("--max-turns must be at least 1")
    if concurrency is not None and concurrency < 1:
        raise SetupError("--concurrency must be at least 1")
    ray = _ray(executor, address)
    sh = parse_shard(shard)
    spec = _spec(agents)
    tasks = _tasks(tasks_ref)
    return RunPlan(tasks=tasks, spec=spec, channels=tuple(channels), max_turns=max_turns, retries=retries,
                   deterministic=deterministic, concurrency=concurrency, shard=sh, executor=ray)


def resolve_fidelity(flag: str | None, personas_file: str | None) -> str:
    """``--fidelity``, else the personas file's ``fidelity``, else ``ours``; a conflict is one line."""
    from personas.registry import personas_file_fidelity

    from_file = None
    if personas_file:
        try:
            from_file = personas_file_fidelity(personas_file)
        except ValueError as exc:
            raise SetupError(str(exc)) from None
    if flag and from_file and flag != from_file:
        raise SetupError(f"--fidelity {flag} contradicts fidelity = \"{from_file}\" in {personas_file}; give one")
    return flag or from_file or "ours"


def check_spec(spec: AgentsSpec, tasks: Sequence[Task], settings: runner.RunSettings) -> None:
    """Fail early, with the list of valid names, on an unknown persona or a wrong seat count
    (once per seat count of the suite, named by its first task)."""
    from personas.registry import UnknownPersona

    if settings.personas and tasks:  # a [seats.N] no game has would be ignored (issue 35)
        most = max(t.num_agents for t in tasks)
        beyond = sorted(s for s in settings.personas if s >= most)
        if beyond:
            raise SetupError(f"--personas: [seats.{beyond[0]}] names no seat of these games (seats 0-{most - 1}); "
                             "remove it or number it from 0")
    for n, tid in sorted({t.num_agents: t.task_id for t in reversed(tasks)}.items()):
        try:
            runner.make_seats_for(spec, n, settings)
        except UnknownPersona as exc:
            raise SetupError(str(exc)) from None
        except PersonaSpecError as exc:
            raise SetupError(f"{exc} (task {tid} has {n} agents)") from None
        except ValueError as exc:  # LLMConfigError and friends
            raise SetupError(f"--agents {spec}: {exc}") from None
    if settings.personas and tasks:
        kinds = _seat_specs(spec, tasks)
        scripted = sorted(s for s in settings.personas if s < len(kinds) and kinds[s].kind != "llm")
        if scripted:  # its settings would be ignored without a word (found by hand)
            s = scripted[0]
            raise SetupError(f"--personas: [seats.{s}] gives LLM settings, but seat {s} is {kinds[s].name} in "
                             f"--agents {spec}; remove the table, or make that seat an llm seat")


def _seat_specs(spec: AgentsSpec, tasks: Sequence[Task]) -> tuple:
    """The spec of every seat of the suite's largest game (the spec is checked: ``check_spec``)."""
    return spec.for_seats(max((t.num_agents for t in tasks), default=0), allow_bare_llm=True) if tasks else ()


def check_llm_endpoints(spec: AgentsSpec, tasks: Sequence[Task], settings: runner.RunSettings) -> None:
    """Before any game: every endpoint an LLM seat (or the judge) will call answers — one line
    naming it otherwise, instead of a suite of games whose every call fails after its retries
    (found by hand: 4 min 27 s for two games against a closed port).  An endpoint that fails
    later, mid-suite, is recorded as infrastructure failures and ``--resume`` plays those games
    again."""
    if not spec.uses_llm and settings.judge is None:
        return
    import asyncio

    from .gamespec import endpoints_answer

    used = [(settings.personas or {}).get(i) or settings.llm for i, s in enumerate(_seat_specs(spec, tasks))
            if s.kind == "llm"]
    used += [settings.judge] if settings.judge is not None else []
    used = [u for u in used if u is not None]
    if not used:
        return
    asyncio.run(endpoints_answer(used))


def game_slots(concurrency: int | None, scripted: bool, tasks: int, cpus: int) -> tuple[int, int]:
    """``(games in flight in this process, worker processes)``.

    Scripted seats are CPU-bound: K > 1 means K processes (capped at the CPU count; by
    default one per CPU for 16 tasks or more, else 1); LLM seats wait on the network: K
    games in flight in one process (default 4)."""
    if concurrency:
        k = concurrency
    elif scripted:  # CPU-bound: one process per CPU, unless the suite is too small to bother
        k = cpus if tasks >= 16 else 1
    else:
        k = 4
    if not scripted:
        return k, 1
    return 1, min(k, cpus, tasks)


def play_run(plan: RunPlan, *, db: str, llm: Any = None, personas: dict[int, Any] | None = None, judge: Any = None,
             fidelity: str | None = None, personas_file: str | None = None, resume: bool = False,
             progress_bar: runner.ProgressBar | None = None,
             notice: Callable[[str], Any] | None = None) -> RunResult:
    """The second step of ``calbench run``: play the planned suite into the database at ``db``."""
    from saves.store import StoreError

    from .executors import ExecutorError

    fid = resolve_fidelity(fidelity, personas_file)
    settings = runner.RunSettings(channels=plan.channels, max_turns=plan.max_turns, retries=plan.retries,
                                  deterministic=plan.deterministic, llm=llm, personas=personas, judge=judge,
                                  fidelity=fid)
    check_spec(plan.spec, plan.tasks, settings)
    check_llm_endpoints(plan.spec, plan.tasks, settings)
    tasks = runner.shard(plan.tasks, *plan.shard) if plan.shard else plan.tasks
    in_flight, processes = game_slots(plan.concurrency, not plan.spec.uses_llm, len(tasks), os.cpu_count() or 1)
    executor = plan.executor
    if executor is None and processes > 1:
        import multiprocessing  # here: a run in this process alone never loads it

        if "fork" not in multiprocessing.get_all_start_methods():
            processes = 1
    if executor is None and processes > 1:
        from .executors import process_executor

        executor = process_executor(processes)  # worker processes play, this one writes
    try:
        games = runner.run_cli_suite(tasks, plan.spec, db=db, settings=settings, concurrency=in_flight,
                                     resume=resume, progress_bar=progress_bar, notice=notice, executor=executor)
    except (ExecutorError, StoreError) as exc:
        raise runner.RunError(str(exc)) from None
    return RunResult(games=games, summary=runner.summarise(games), fidelity=fid, db=db)
