"""The suite runner: many games, saved to the store, summarised (``calbench run``).

No Textual here; the CLI (``commands/run.py``) uses this module and draws the progress
bar it is given (``progress_bar``).  Every game is played by :func:`lab.session.run_session`.

* Each task is one game with the personas of ``agents_spec`` (one name for every seat,
  or a comma list with one per seat; see ``personas.registry``).
* Every game is saved.  Games with LLM or human seats are slow, so they are saved as
  they happen: ``create_game`` (status ``running``), events through the store's sink,
  ``finish_game``.  Scripted games take milliseconds; they are saved whole, in bursts
  (:class:`BurstSaver`), which costs far less than a round trip to the database thread
  per phase.  A game whose persona or engine raises is saved ``failed`` with the error
  and the suite goes on; Ctrl-C marks running games ``stopped`` (finished ones are kept).
* ``resume=True`` marks games a crash left ``running`` under the same
  :func:`settings_key` as ``stopped`` and skips tasks already completed under it.
* ``concurrency`` games are in flight at once (asyncio): what LLM suites need.  Scripted
  suites are CPU-bound; :func:`run_cli_suite` plays them in forked worker processes and
  this process alone writes the database (``lab.executors.ProcessExecutor``).
* The oracle is solved once per task and shared by the full and scheduled-only lookups
  (:func:`prime_oracle`).

Summaries (:func:`lab.summary.summarise`, re-exported here) follow the paper's Table 2,
grouped by persona spec and cost setting; see :mod:`lab.summary`.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterator, Sequence

from engine.game import GameConfig
from engine.model import Task
from engine.gameid import game_id
from lab.gamespec import GameSpec, close_pools, game_config
from lab.session import packs_events
from lab.gamespec import settings_key as gamespec_key
from lab.summary import GameSummary, failure_counts, summarise
from personas.spec import AgentsSpec, PersonaSpecError


__all__ = ["RunSettings", "GameSummary", "RunError", "run_suite", "run_cli_suite", "summarise", "failure_counts", "shard",
           "settings_key", "make_seats", "make_seats_for", "prime_oracle", "spec_label",
           "agents_of", "game_agents"]

# Settings added after runs were first saved, left out of the run's key at their default
# so that `calbench run --resume` still finds the games of an earlier version.
_LLM_KEY_DEFAULTS = {"structured": "auto", "history": "auto", "decision": "slot", "idle_passes": "auto"}
# LLM settings that never change what a game is (secrets, plumbing, patience).
_LLM_KEY_EXCLUDE = {"api_key", "api_key_env", "concurrency", "timeout", "retries", "backoff_base",
                    "backoff_max", "retry_after_max", "base_urls", "endpoint_concurrency", "request_deadline",
                    "stream"}


@dataclass(frozen=True)
class RunSettings:
    """Everything besides the tasks and the agents that decides how a suite is played.

    ``llm`` is a ``personas.llm.settings.LLMSettings`` (or None for scripted suites);
    ``personas`` maps seat -> its own LLMSettings (from ``--personas FILE.toml``).
    """

    channels: tuple[str, ...] = ("dm",)
    max_turns: int = 15
    retries: int = 3
    deterministic: bool = False
    seat_timeout: float | None = None
    llm: Any = None
    personas: dict[int, Any] | None = None
    stream_events: bool | None = None  # None: stream to the store iff a seat is an LLM or a human
    judge: Any = None  # LLMSettings of the optional LLM judge (paper I.2; personas.llm.judge)
    fidelity: str = "ours"  # "paper": the authors' DSM and SD-MAP behaviour (personas.registry.FIDELITIES)

    def game_config(self) -> GameConfig:
        return game_config(max_turns=self.max_turns, retries=self.retries, channels=self.channels,
                           seat_timeout=self.seat_timeout, deterministic=self.deterministic)

    def key_fields(self, agents_spec: str | AgentsSpec) -> dict[str, Any]:
        """The settings that define a run (never keys): what :func:`settings_key` hashes.

        ``agents_spec``: the parsed spec (its label is hashed) or a label as saved."""
        label = agents_spec.label if isinstance(agents_spec, AgentsSpec) else agents_spec
        d: dict[str, Any] = {
            "agents": label,
            "channels": list(self.channels),
            "max_turns": self.max_turns,
            "retries": self.retries,
            "deterministic": self.deterministic,
        }
        if self.judge is not None:
            d["judge"] = _llm_fields(self.judge)
        if self.fidelity != "ours":  # the default leaves every existing key as it was
            d["fidelity"] = self.fidelity
        if agents_spec.uses_llm if isinstance(agents_spec, AgentsSpec) else _uses_llm(agents_spec):
            if self.llm is not None:
                d["llm"] = _llm_fields(self.llm)
            if self.personas:
                d["personas"] = {str(k): _llm_fields(v) for k, v in sorted(self.personas.items())}
        return d

    async def aclose(self) -> None:
        """Close the LLM clients of this run (one pool, shared by every seat)."""
        await close_pools(self.llm, self.judge, *(self.personas or {}).values())


def settings_key(agents_spec: str | AgentsSpec, settings: RunSettings) -> str:
    """A short stable id of (agents, settings): ``--resume`` matches games on it (``lab.gamespec.settings_key``)."""
    return gamespec_key(settings.key_fields(agents_spec))


def _llm_fields(llm: Any) -> dict[str, Any]:
    raw = llm.public() if hasattr(llm, "public") else (llm.model_dump() if hasattr(llm, "model_dump") else dict(llm))
    out = {k: v for k, v in raw.items() if k not in _LLM_KEY_EXCLUDE and "secret" not in k and "key" != k[-3:]}
    for k, default in _LLM_KEY_DEFAULTS.items():  # settings added later: at their default, the key stays as it was
        if out.get(k) == default:
            out.pop(k)
    return out


# ---------------------------------------------------------------------------------------
# Seats
# ---------------------------------------------------------------------------------------
SeatFactory = Callable[[Task], Sequence[Any]]


def make_seats(agents_spec: str | AgentsSpec | SeatFactory, task: Task, settings: RunSettings) -> list[Any]:
    """The personas for one game (fresh objects every game: personas keep state).

    With a personas file, each LLM seat gets its own settings; a bare ``llm`` seat takes
    its model from there.
    """
    if callable(agents_spec):
        return list(agents_spec(task))
    return make_seats_for(agents_spec, task.num_agents, settings)


def make_seats_for(agents_spec: str | AgentsSpec, n: int, settings: RunSettings) -> list[Any]:
    """Personas for ``n`` seats from a spec (raises the registry's one-line errors).

    A bare ``llm`` seat is allowed here: it takes its model from the personas file (or
    the run's LLM settings).
    """
    from personas.registry import make_personas

    spec = agents_of(agents_spec)
    if not settings.personas and not spec.has_bare_llm:
        return make_personas(spec, n, llm=settings.llm, fidelity=settings.fidelity)
    out = []
    for seat, s in enumerate(spec.for_seats(n, allow_bare_llm=True)):
        seat_llm = (settings.personas or {}).get(seat, settings.llm)
        if s.bare_llm:
            from personas.llm.factory import make_llm_persona

            out.append(make_llm_persona("llm", seat_llm))
        else:
            out.append(make_personas(s.name, 1, llm=seat_llm, fidelity=settings.fidelity)[0])
    return out


def agents_of(agents_spec: str | AgentsSpec | SeatFactory) -> AgentsSpec | SeatFactory:
    """The one parse of a suite's agents: :func:`run_suite` and :func:`run_cli_suite` call it
    where they start and hand the parsed spec down (a parsed spec or a seat factory passes
    through; a string reaching a function below is parsed here, once)."""
    if callable(agents_spec) or isinstance(agents_spec, AgentsSpec):
        return agents_spec
    return AgentsSpec.parse(agents_spec)


def game_agents(agents: AgentsSpec | SeatFactory) -> AgentsSpec:
    """What a ``GameSpec`` carries: the parsed spec, or a seat factory's label (its ``spec``
    attribute or its name) as one seat name kept as it is."""
    if isinstance(agents, AgentsSpec):
        return agents
    return AgentsSpec.of_names([str(getattr(agents, "spec", getattr(agents, "__name__", "custom")))])


def spec_label(agents_spec: str | AgentsSpec | SeatFactory) -> str:
    """The label games are filed under: the spec's canonical text, or a seat factory's ``spec`` / name."""
    return game_agents(agents_of(agents_spec)).label


def _uses_llm(label: str) -> bool:
    try:
        return agents_of(label).uses_llm
    except PersonaSpecError:
        return False


def prime_oracle(task: Task) -> None:
    """Solve the full oracle once and let the scheduled-only oracle reuse it.

    When a game schedules every meeting, the scheduled-only oracle is the full one; the
    metrics look it up under the tuple of all meeting ids, so store the same result there.
    """
    from engine.metrics import oracle_cached
    from lab import oracle_cache

    oracle_cache.load(task)  # solved by an earlier run: reuse it (lab/oracle_cache.py)
    full = oracle_cached(task, None)
    all_ids = tuple(sorted(m.id for m in task.meetings))
    task.cache.setdefault(("oracle", all_ids), full)
    ids_in_order = tuple(m.id for m in task.meetings)
    task.cache.setdefault(("oracle", ids_in_order), full)


def remember_oracle(task: Task) -> None:
    """Keep the oracle results this game solved (full, scheduled-only) for later runs."""
    from lab import oracle_cache

    oracle_cache.save(task)


def _judge(task: Task, judge: Any):
    """The optional LLM judge (paper I.2) as a session's ``after`` measurement, or None: it
    reads the played game's messages before the game is scored, and its record is what the
    ``judge`` scorer scores (``engine.scoring``)."""
    if judge is None:
        return None

    async def run(events: list[dict[str, Any]]) -> dict[str, Any]:
        from personas.llm.judge import ask_judge

        return await ask_judge(events, task, judge)

    return run


def shard(tasks: Sequence[Task], index: int, count: int) -> list[Task]:
    """Tasks ``index-1, index-1+count, …`` (``--shard I/N``, 1-based)."""
    if count < 1 or not 1 <= index <= count:
        raise ValueError(f"shard must be I/N with 1 ≤ I ≤ N, got {index}/{count}")
    return list(tasks[index - 1::count])


# ---------------------------------------------------------------------------------------
# The suite
# ---------------------------------------------------------------------------------------
Progress = Callable[[GameSummary], Any]


async def _maybe_await(x: Any) -> Any:
    if asyncio.iscoroutine(x) or isinstance(x, asyncio.Future):
        return await x
    return x


def _game_ids(key: str, tasks: Sequence[Task], deterministic: bool) -> list[str]:
    """One id per task: random, or (``deterministic``) derived from the settings key, the
    task id and its occurrence in the suite, so a shard, a resume or another process
    gives a task the same id."""
    if not deterministic:
        return [game_id("calbench-run", deterministic=False) for _ in tasks]
    seen: dict[str, int] = {}
    out = []
    for t in tasks:
        n = seen.get(t.task_id, 0)
        seen[t.task_id] = n + 1
        out.append(game_id("calbench-run", key, t.task_id, n))
    return out


class RunError(Exception):
    """A suite that cannot start as asked (the CLI shows the message as a user error)."""


async def run_suite(
    tasks: Sequence[Task],
    agents_spec: str | AgentsSpec | SeatFactory,
    *,
    store,
    concurrency: int = 1,
    settings: RunSettings | None = None,
    progress: Progress | None = None,
    resume: bool = False,
) -> list[GameSummary]:
    """Play every task, save each game to ``store``, return one summary per game played.

    With ``resume`` the tasks already completed under the same settings key are skipped
    (they are not in the returned list) and games a crash left ``running`` are marked
    ``stopped`` first (their tasks run again).  ``progress(summary)`` is called after each
    game (it may be a coroutine function).
    """
    settings = settings or RunSettings()
    agents_spec = agents_of(agents_spec)  # parsed once for the whole suite; everything below uses it
    key = settings_key(game_agents(agents_spec), settings)
    tasks = list(tasks)
    ids = _game_ids(key, tasks, settings.deterministic)
    units = _units(tasks)
    await _check_other_runs(store, key, resume, units)
    if resume:
        keep, _ = await _resume_claims(store, key, tasks, ids)
        tasks, ids, units = [tasks[i] for i in keep], [ids[i] for i in keep], [units[i] for i in keep]
    elif settings.deterministic:
        await _refuse_saved_ids(store, key, ids)
    return await _play_all(tasks, ids, agents_spec, store=store, concurrency=concurrency, settings=settings,
                           progress=progress, lease=(units, resume, None))


async def _refuse_saved_ids(store, key: str, ids: list[str]) -> None:
    """Deterministic ids repeat: a second run into the same database must say so up front."""
    if not ids:
        return
    done = {g["game_id"] for g in await store.list_games(settings_key=key, status="completed")}
    clash = sum(1 for gid in ids if gid in done)
    if clash:
        raise RunError(f"{clash} of these deterministic games are already saved in {store.path}; "
                       "add --resume to skip them, or use another --db")


def prepared(trace: dict[str, Any], task: Task):
    """A game this process just played, as the rows the store writes (``saves.traces.prepare_game``).

    Its events are packed here, lean and compressed, where the game was played — trusted,
    since this engine made them (``engine.lean.slim_events``)."""
    from saves.traces import prepare_game

    return prepare_game(trace, task=task, trusted=True)


class BurstSaver:
    """Saves finished games whole, ``size`` games per flush, in one transaction each.

    Scripted games are pure CPU and take a few milliseconds, so their events are not
    streamed one by one (a hand-over to the database thread per event costs more than the
    game); a burst of games is one ``store.write_games`` call.  The games come prepared
    (``saves.traces.prepare_game``: checked, packed, turned into rows) by whoever played
    them, so the writer only inserts.  A kill loses at most the last ``size`` finished
    games (tens of milliseconds of work) and the ones in play, which ``--resume`` plays
    again.  A game id saved already is replaced unless it is completed (a deterministic
    rerun of a failed game); a completed one is kept, and with ``strict`` that is an error.
    """

    def __init__(self, store, size: int = 8, *, strict: bool = False) -> None:
        self.store = store
        self.size = size
        self.strict = strict
        self.pending: list[Any] = []

    async def add(self, game: Any) -> None:
        self.pending.append(game)
        if len(self.pending) >= self.size:
            await self.flush()

    async def flush(self) -> None:
        pending, self.pending = self.pending, []
        if not pending:
            return
        fresh = await self.store.write_games(pending)
        for game, ok in zip(pending, fresh):
            if ok:
                continue
            old = [g for g in await self.store.list_games(task_id=game.task_id) if g["game_id"] == game.game_id]
            if old and old[0]["status"] == "completed":
                if self.strict:
                    raise RunError(f"game {game.game_id} is already saved and completed")
                continue  # never a second copy
            await self.store.delete_game(game.game_id)
            await self.store.write_games([game])


async def play_one(task: Task, gid: str, agents_spec: str | AgentsSpec | SeatFactory, *, settings: RunSettings,
                   store: Any, stream: bool, saver: Any = None, label: str | None = None, key: str | None = None,
                   config: GameConfig | None = None) -> GameSummary:
    """Play one game of a suite through the session service and return its summary.

    The suite runner calls it for every game; the Ray executor (``lab/executors.py``)
    calls it in a worker with ``store=None`` and a ``saver`` that hands the finished trace
    back to the driver.  A game whose seats cannot be made is filed ``failed``, like one
    that raised.
    """
    agents_spec = agents_of(agents_spec)  # a parsed spec passes through (the suite parsed it once)
    agents = game_agents(agents_spec)
    label = label or agents.label
    key = key or settings_key(agents, settings)
    spec = GameSpec(task, agents, config or settings.game_config(), gid, key,
                    extra_config={"agents_spec": label, "settings_key": key})
    t0 = time.perf_counter()
    try:
        seats = make_seats(agents_spec, task, settings)
        prime_oracle(task)
    except Exception as exc:  # a persona that cannot be made: saved failed like any other
        out = await spec.fail(exc, store=store, stream=stream, saver=saver)
    else:
        out = await spec.play(seats, store=store, stream=stream, saver=saver, after=_judge(task, settings.judge))
        remember_oracle(task)
    if out.status == "completed":
        s = GameSummary.from_trace(out.trace, agents=label, game_id=gid)
    else:  # a broken persona or an engine bug: recorded with its traceback; the suite goes on
        s = GameSummary(gid, task.task_id, task.cost_mode, label, "failed", error=out.error,
                        meetings_total=len(task.meetings))
    s.seconds = time.perf_counter() - t0
    return s


def _units(tasks):
    from lab.lease import units_of

    return units_of(tasks)


async def _check_other_runs(store, key: str, resume: bool, units: list[str] | None = None) -> None:
    from lab.lease import OtherRunActive, check_other_runs

    try:
        await check_other_runs(store, key, resume=resume, db=store.path, units=units)
    except OtherRunActive as exc:
        raise RunError(str(exc)) from None


async def _resume_claims(store, key, tasks, ids):
    from lab.lease import OtherSuite, prepare_resume_claims

    try:
        return await prepare_resume_claims(store, key, tasks, ids)
    except OtherSuite as exc:
        raise RunError(str(exc)) from None


async def _play_all(tasks: list[Task], ids: list[str], agents_spec: str | AgentsSpec | SeatFactory, *, store,
                    concurrency: int, settings: RunSettings, progress: Progress | None,
                    lease: tuple | None = None) -> list[GameSummary]:
    """Play ``tasks``; with ``lease = (units, skip_done, run_pid)`` each task is claimed in the
    store first (``lab.lease.Claimer``) and skipped when done or held by a live process."""
    agents_spec = agents_of(agents_spec)  # parsed by the entry point; a string from elsewhere once here
    label = game_agents(agents_spec).label
    key = settings_key(game_agents(agents_spec), settings)
    config = settings.game_config()
    results: list[GameSummary | None] = [None] * len(tasks)
    next_index = iter(range(len(tasks)))
    stream = settings.stream_events
    if stream is None:  # LLM and human seats: save events as they happen; scripted: in bursts
        stream = isinstance(agents_spec, AgentsSpec) and agents_spec.streams
    burst = None if stream else BurstSaver(store, strict=True)
    tasks_by_id = {gid: t for gid, t in zip(ids, tasks)}

    @packs_events
    async def saver(trace: dict[str, Any]) -> None:
        await burst.add(prepared(trace, tasks_by_id[trace["game_id"]]))
    claimer = None
    if lease is not None:
        from lab.lease import Claimer

        units, skip_done, run_pid = lease
        claimer = Claimer(store, key, tasks, ids, units, run_pid=run_pid, skip_done=skip_done)

    async def play(i: int) -> GameSummary:
        return await play_one(tasks[i], ids[i], agents_spec, settings=settings, store=store, stream=stream,
                              saver=saver if burst else None, label=label, key=key, config=config)

    async def worker() -> None:
        for i in next_index:
            if claimer is not None and not claimer.plays(await claimer.take(i)):
                continue  # completed already, or a live process plays it
            s = await play(i)
            results[i] = s
            if progress is not None:
                await _maybe_await(progress(s))

    k = max(1, min(int(concurrency), len(tasks) or 1))
    try:
        if k == 1:
            await worker()
        else:
            workers = [asyncio.ensure_future(worker()) for _ in range(k)]
            try:
                await asyncio.gather(*workers)
            except BaseException:
                for w in workers:
                    w.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
                raise
    finally:
        if burst is not None:
            await burst.flush()  # also on Ctrl-C: the finished games are kept
        if claimer is not None:
            await claimer.release()  # after the flush: a claim outlives its unsaved game
    return [r for r in results if r is not None]


# ---------------------------------------------------------------------------------------
# The command-line driver: open the store, show progress, optionally use processes
# ---------------------------------------------------------------------------------------
#: ``progress_bar(total, label)`` is a context manager giving ``advance(summary)``, called
#: once per finished game; the interface draws it (``calbench_cli/progress.py``).
ProgressBar = Callable[[int, str], ContextManager[Callable[[GameSummary], Any]]]


@contextmanager
def _no_bar(total: int, label: str) -> Iterator[Callable[[GameSummary], Any]]:
    yield lambda s: None


def run_cli_suite(tasks: Sequence[Task], agents_spec: str | AgentsSpec, *, db: str, settings: RunSettings,
                  concurrency: int = 1, resume: bool = False,
                  progress_bar: ProgressBar | None = None,
                  notice: Callable[[str], Any] | None = None, executor: Any = None) -> list[GameSummary]:
    """What ``calbench run`` does: play the suite into the database at ``db``.

    Every task is claimed in the store before it is played (``lab.lease``): a task a live
    process holds is left to it, one completed already is skipped when resuming, and the
    worker processes die with this one.  ``notice`` is given one line saying what
    ``--resume`` found.

    Returns the games played now plus, with ``resume``, the games of these tasks already
    completed under the same settings (so the table covers the whole suite).
    ``executor``: play the games elsewhere — in forked worker processes
    (``lab.executors.process_executor``, what a CPU-bound scripted suite wants) or on Ray
    (``lab.executors.ray_executor``); this process stays the only writer of the database.
    Without one, ``concurrency`` games are in flight at once in this process (what an LLM
    suite, which waits on the network, wants).
    """
    tasks = list(tasks)
    agents_spec = agents_of(agents_spec)  # parsed once; the executors and workers get the parsed spec
    todo, ids, previous, units, report = asyncio.run(_prepare(tasks, agents_spec, db=db, settings=settings,
                                                              resume=resume))
    if report is not None and notice is not None:
        notice(report.line())  # what --resume found (lab.lease.ResumeReport)
    lease = (units, resume, os.getpid())
    if executor is not None:  # worker processes or Ray (lab/executors.py): games elsewhere, this process writes
        if hasattr(executor, "start"):  # forked workers: before any thread (the store's, the progress bar's)
            executor.start(todo, ids, agents_spec, settings)
        try:
            with (progress_bar or _no_bar)(len(todo), spec_label(agents_spec)) as advance:
                played = asyncio.run(_play_elsewhere(executor, todo, ids, agents_spec, db=db, settings=settings,
                                                     concurrency=concurrency, progress=advance, lease=lease))
        finally:
            if hasattr(executor, "close"):
                executor.close()
        return previous + played
    with (progress_bar or _no_bar)(len(todo), spec_label(agents_spec)) as advance, settled_gc():
        played = asyncio.run(_play_with_store(todo, ids, agents_spec, db=db, settings=settings,
                                              concurrency=concurrency, progress=advance, lease=lease))
    return previous + played


#: The cyclic collector's thresholds while scripted games are played: a game makes a few
#: thousand short-lived objects every few milliseconds, and reference counting frees them;
#: the defaults (700, 10, 10) run the collector over and over for nothing.
GAME_GC_THRESHOLD = (10_000, 50, 100)


def settle_gc() -> None:
    """Before a process plays games: what it holds now (the suite's tasks, the modules) is
    moved out of the collector's way for good (``gc.freeze``), and it runs less often
    (:data:`GAME_GC_THRESHOLD`).  Reference counting still frees everything as usual; only
    the search for cycles is spared (measured: 5-10 % of a scripted game's CPU)."""
    gc.freeze()
    gc.set_threshold(*GAME_GC_THRESHOLD)


@contextmanager
def settled_gc() -> Iterator[None]:
    """:func:`settle_gc` for a while, then the collector as it was (a suite played in this process)."""
    old = gc.get_threshold()
    settle_gc()
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


async def _open_store(db: str):
    from saves.store import Store

    return await Store.open(db)


async def _prepare(tasks: list[Task], agents_spec: str | AgentsSpec, *, db: str, settings: RunSettings, resume: bool):
    """Resume bookkeeping before any game starts: (tasks to play, their ids, previous games)."""
    key = settings_key(game_agents(agents_of(agents_spec)), settings)
    ids = _game_ids(key, tasks, settings.deterministic)
    units = _units(tasks)
    store = await _open_store(db)
    try:
        await _check_other_runs(store, key, resume, units)
        if resume:
            keep, report = await _resume_claims(store, key, tasks, ids)
            todo = [tasks[i] for i in keep]
            return (todo, [ids[i] for i in keep], await _previous_games(store, key, tasks, todo),
                    [units[i] for i in keep], report)
        if settings.deterministic:
            await _refuse_saved_ids(store, key, ids)
        return tasks, ids, [], units, None
    finally:
        await store.close()


async def _play_with_store(tasks, ids, agents_spec, *, db, settings, concurrency, progress, lease=None):
    store = await _open_store(db)
    try:
        return await _play_all(tasks, ids, agents_spec, store=store, concurrency=concurrency,
                               settings=settings, progress=progress, lease=lease)
    finally:
        await settings.aclose()
        await store.close()


async def _play_elsewhere(executor, tasks, ids, agents_spec, *, db, settings, concurrency, progress, lease):
    """``executor(tasks, ids, agents_spec, store=, settings=, concurrency=, progress=, lease=)`` plays
    the games somewhere else and writes each one to ``store`` as it comes back (the only writer);
    ``lease`` is what the local runner claims with (``_play_all``)."""
    store = await _open_store(db)
    try:
        return await executor(tasks, ids, agents_spec, store=store, settings=settings, concurrency=concurrency,
                              progress=progress, lease=lease)
    finally:
        await settings.aclose()
        await store.close()


async def _previous_games(store, key: str, tasks: list[Task], todo: list[Task]) -> list[GameSummary]:
    """Summaries of the suite's tasks already completed under ``key`` (for ``--resume``),
    read from the per-seat results (no event is loaded)."""
    skipped = {t.task_id for t in tasks} - {t.task_id for t in todo}
    if not skipped:
        return []
    by_task = {t.task_id: t for t in tasks}
    games: dict[str, list[dict[str, Any]]] = {}
    for row in await store.game_results(settings_key=key, task_id=sorted(skipped)):
        games.setdefault(row["game_id"], []).append(row)
    out, seen = [], set()
    for rows in games.values():
        tid = rows[0]["task_id"]
        if tid in seen:  # one game per task, the earliest
            continue
        seen.add(tid)
        out.append(GameSummary.from_seat_rows(rows, by_task[tid]))
    order = {t.task_id: i for i, t in enumerate(tasks)}
    return sorted(out, key=lambda g: order.get(g.task_id, 0))
