"""Executors: where the games of a suite are played (``calbench run --executor local|ray``).

Wherever the games are played, every game goes through :func:`lab.session.run_session`
(via ``lab.runner.play_one``) with no store there, is prepared for the store where it was
played (``saves.traces.prepare_game``: checked, events packed lean and compressed, turned
into rows), and comes back to the process that started the run: **the driver is the only
writer of the store** (:class:`_Driver`: claims, writes in bursts, never a second copy of
a game id, lost work saved ``failed``).  So ``--resume``, progress, summaries and reports
work the same with every executor.

* ``local`` (the default): LLM and human suites play in this process (asyncio,
  ``--concurrency`` games at once); a scripted suite, which is pure CPU, plays in one
  forked worker process per CPU (:class:`ProcessExecutor`).
* ``ray`` plays the games as Ray tasks on a cluster (or on a Ray instance it starts on
  this machine); each task streams its games back as they end (:func:`iter_chunk`).

Failures.  A Ray task whose worker process or node dies is retried by Ray
(``max_retries``); the game ids are fixed by the driver before anything is sent, and the
driver writes a game only when its result arrives — and never a second copy of an id
it has written — so a retried task cannot add a duplicate game.  A task that fails for
good (retries exhausted, the cluster gone) is saved as ``failed`` with the reason, like a
game whose persona raised; ``--resume`` plays it again.  If the driver itself dies, the
games it had written are kept and ``--resume`` plays the rest.

LLM seats.  Each game's seats talk to their endpoints from the worker.  The run's
request limit (``--llm-concurrency``) holds per endpoint across the whole cluster: one
small Ray actor per endpoint hands out the slots (:class:`EndpointGate`), every worker's
LLM pool asks it before a request.

Ray is optional: ``pip install 'calbench[ray]'``.  Without it, ``--executor ray`` is
refused with one line saying so (:data:`RAY_MISSING`).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Sequence

from engine.model import Task

__all__ = ["EXECUTORS", "RAY_MISSING", "ExecutorError", "RayOptions", "ray_available", "play_on_ray",
           "ProcessExecutor", "process_executor", "EndpointGate"]

EXECUTORS = ("local", "ray")
RAY_MISSING = "--executor ray needs Ray, which is not installed: pip install 'calbench[ray]'"

#: a test hook: when this environment variable names a folder, the first Ray task to see
#: it (one per folder) kills its own worker process as it starts (after the suite began).
FAULT_ENV = "CALBENCH_RAY_DIE_ONCE"


class ExecutorError(Exception):
    """An executor that cannot run as asked; the message is one line for the user."""


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def _import_ray():
    try:
        import ray
    except ImportError:
        raise ExecutorError(RAY_MISSING) from None
    return ray


@dataclass(frozen=True)
class RayOptions:
    """How to reach Ray and how to cut the suite into Ray tasks.

    ``address``: None starts (or joins) a Ray instance on this machine; ``"auto"`` joins
    the cluster this machine is part of; ``"ray://HOST:PORT"`` connects a driver from
    outside through Ray Client.  ``num_cpus`` only applies to an instance started here.
    ``chunk``: games per Ray task (default: 8 for scripted games, which take milliseconds
    each, so the per-task overhead is shared; 1 for LLM games, which take minutes).
    ``llm_cpus``: CPUs Ray books for a task with LLM seats (it mostly waits on the network).
    """

    address: str | None = None
    num_cpus: int | None = None
    chunk: int | None = None
    max_retries: int = 3
    llm_cpus: float = 0.25
    runtime_env: dict[str, Any] | None = None  # Ray's runtime environment for the game tasks


def init_ray(options: RayOptions) -> Any:
    """Connect to (or start) Ray once per process; returns the ``ray`` module."""
    ray = _import_ray()
    if ray.is_initialized():
        return ray
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "ignore_reinit_error": True}
    if options.address:
        kw["address"] = options.address
    elif options.num_cpus:
        kw["num_cpus"] = options.num_cpus
    try:
        ray.init(**kw)
    except Exception as exc:  # ConnectionError, a bad address, a version mismatch
        where = options.address or "a local Ray instance"
        raise ExecutorError(f"cannot start or reach Ray at {where}: {type(exc).__name__}: "
                            f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    return ray


# ---------------------------------------------------------------------------------------
# What travels to a worker
# ---------------------------------------------------------------------------------------
def portable_settings(settings: Any) -> Any:
    """The run settings without this process's LLM pools and HTTP clients (rebuilt in the worker).

    Seats that shared one ``LLMSettings`` (and so one pool) still share one after the trip.
    """
    llm = settings.llm
    personas = settings.personas
    judge = getattr(settings, "judge", None)
    if llm is None and not personas and judge is None:
        return settings
    fresh: dict[int, Any] = {}

    def remake(s: Any) -> Any:
        if s is None:
            return None
        if id(s) not in fresh:
            fresh[id(s)] = type(s)(**s.model_dump())
        return fresh[id(s)]

    new_llm = remake(llm)
    new_personas = {k: remake(v) for k, v in personas.items()} if personas else personas
    if judge is not None:
        return replace(settings, llm=new_llm, personas=new_personas, judge=remake(judge))
    return replace(settings, llm=new_llm, personas=new_personas)


def _pools(settings: Any) -> list[Any]:
    seen, out = set(), []
    for s in [settings.llm, getattr(settings, "judge", None), *(settings.personas or {}).values()]:
        pool = getattr(s, "pool", None)
        if pool is not None and id(pool) not in seen:
            seen.add(id(pool))
            out.append((s, pool))
    return out


@dataclass(frozen=True)
class _Chunk:
    tasks: tuple[Task, ...]
    ids: tuple[str, ...]
    agents: Any  # the parsed AgentsSpec (pickled as it is) — never a seat factory: that cannot travel
    settings: Any
    concurrency: int
    gates: bool  # LLM seats: limit requests per endpoint through the cluster's gates


def _die_once_if_asked() -> None:
    folder = os.environ.get(FAULT_ENV)
    if not folder:
        return
    try:
        fd = os.open(os.path.join(folder, "died"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    os._exit(17)  # the worker process dies in the middle of its task, as on a lost node


def iter_chunk(chunk: _Chunk) -> Iterator[tuple[Any, Any]]:
    """In a worker: play ``chunk``'s games, ``chunk.concurrency`` at a time, and yield
    ``(prepared game, summary)`` for each as it ends — a Ray streaming generator, so the
    driver writes every game (and advances progress) when it is done, not when the chunk is.

    Each game comes back as the rows the store writes (``saves.traces.prepare_game``: the
    trace checked, its events packed lean and compressed); the driver only inserts them.
    """
    from lab import runner
    from lab.session import packs_events

    settings = chunk.settings
    if chunk.gates:
        for s, pool in _pools(settings):
            pool.gate = _RayGates(s.concurrency)
    captured: dict[str, dict[str, Any]] = {}

    @packs_events  # packed below, in this process, by runner.prepared
    async def saver(trace: dict[str, Any]) -> None:
        captured[trace["game_id"]] = trace

    async def one(i: int) -> tuple[Any, Any]:
        summary = await runner.play_one(chunk.tasks[i], chunk.ids[i], chunk.agents, settings=settings,
                                        store=None, stream=False, saver=saver)
        # checked, packed and turned into rows here: less to send, less for the driver to do
        return runner.prepared(captured.pop(chunk.ids[i]), chunk.tasks[i]), summary

    loop = asyncio.new_event_loop()
    todo = iter(range(len(chunk.tasks)))
    running: set[asyncio.Task] = set()
    try:
        for i in itertools.islice(todo, max(1, chunk.concurrency)):
            running.add(loop.create_task(one(i)))
        sent = 0
        while running:
            done, running = loop.run_until_complete(asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED))
            for task in done:
                yield task.result()
                sent += 1
                if sent == 1 and len(chunk.tasks) > 1:
                    _die_once_if_asked()  # the test hook: die with games sent and games to go
                nxt = next(todo, None)
                if nxt is not None:
                    running.add(loop.create_task(one(nxt)))
    finally:
        for task in running:
            task.cancel()
        if running:
            loop.run_until_complete(asyncio.gather(*running, return_exceptions=True))
        loop.run_until_complete(settings.aclose())
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def play_chunk(chunk: _Chunk) -> list[tuple[Any, Any]]:
    """:func:`iter_chunk` whole: ``[(prepared game, summary)]`` once every game has ended."""
    return list(iter_chunk(chunk))


# ---------------------------------------------------------------------------------------
# Per-endpoint request limits across the cluster
# ---------------------------------------------------------------------------------------
class EndpointGate:
    """A Ray actor: at most ``limit`` requests in flight to one endpoint, cluster-wide.

    One per endpoint, named after it, detached (it outlives the worker that made it); the
    driver of a run sets its limit (:meth:`resize`) before the first game starts.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, int(limit))
        self._cond: asyncio.Condition | None = None
        self.in_flight = 0
        self.max_in_flight = 0
        self.granted = 0

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    async def acquire(self) -> bool:
        cond = self._condition()
        async with cond:
            await cond.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1
            self.granted += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return True

    async def release(self) -> None:
        cond = self._condition()
        async with cond:
            self.in_flight = max(0, self.in_flight - 1)
            cond.notify_all()

    async def resize(self, limit: int) -> None:
        cond = self._condition()
        async with cond:
            self.limit = max(1, int(limit))
            self.max_in_flight = self.in_flight
            self.granted = 0
            cond.notify_all()

    def stats(self) -> dict[str, int]:
        return {"limit": self.limit, "in_flight": self.in_flight, "max_in_flight": self.max_in_flight,
                "granted": self.granted}


def _endpoints_of(settings: Any) -> dict[str | None, int]:
    """Every endpoint the run's LLM seats may call, with the run's request limit."""
    out: dict[str | None, int] = {}
    for s in [settings.llm, getattr(settings, "judge", None), *(settings.personas or {}).values()]:
        if s is None:
            continue
        replicas = list(getattr(s, "base_urls", None) or [])
        limit = (getattr(s, "endpoint_concurrency", None) or s.concurrency) if len(replicas) > 1 else s.concurrency
        for u in replicas if len(replicas) > 1 else [s.resolved_base_url()]:
            out[u] = min(out.get(u, limit), limit)
    return out


def gate_name(endpoint: str | None) -> str:
    import hashlib

    return "calbench-gate-" + hashlib.sha256(str(endpoint or "default").encode()).hexdigest()[:16]


def endpoint_gate(endpoint: str | None, limit: int):
    """The cluster's gate actor for ``endpoint`` (made by the first worker that asks)."""
    ray = _import_ray()
    actor = ray.remote(num_cpus=0, max_concurrency=1000)(EndpointGate)
    return actor.options(name=gate_name(endpoint), namespace="calbench", get_if_exists=True,
                         lifetime="detached").remote(limit)


class _RayGates:
    """What an LLM pool holds in a Ray worker: ``await acquire(endpoint)`` / ``await release(endpoint)``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._actors: dict[str | None, Any] = {}

    def _actor(self, endpoint: str | None):
        if endpoint not in self._actors:
            self._actors[endpoint] = endpoint_gate(endpoint, self.limit)
        return self._actors[endpoint]

    async def acquire(self, endpoint: str | None) -> None:
        await self._actor(endpoint).acquire.remote()

    async def release(self, endpoint: str | None) -> None:
        await self._actor(endpoint).release.remote()


# ---------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------
class _Driver:
    """What every executor's driver does around the games it sends away.

    It claims tasks in the store before they are sent (``lab.lease.Claimer``, as the local
    runner does) and leaves the ones done or held by another live run; writes each game
    as it comes back (``lab.runner.BurstSaver``) and never a second copy of an id; saves the games
    of work that was lost as ``failed`` with the reason (``--resume`` plays them again);
    and at the end flushes and drops its claims.
    """

    def __init__(self, store: Any, settings: Any, agents_spec: Any, tasks: Sequence[Task], ids: Sequence[str],
                 *, progress: Callable[[Any], Any] | None, lease: tuple | None) -> None:
        from lab import runner

        self.store, self.settings, self.progress = store, settings, progress
        self.agents = runner.game_agents(runner.agents_of(agents_spec))  # parsed by run_cli_suite
        self.label = self.agents.label
        self.key = runner.settings_key(self.agents, settings)
        self.tasks, self.ids = list(tasks), list(ids)
        self.saver = runner.BurstSaver(store)
        self.written: set[str] = set()
        self.results: dict[str, Any] = {}
        self.claimer = None
        if lease is not None:
            from lab.lease import Claimer

            units, skip_done, run_pid = lease
            self.claimer = Claimer(store, self.key, self.tasks, self.ids, units, run_pid=run_pid,
                                   skip_done=skip_done)

    async def claim(self, indices: Sequence[int]) -> list[int]:
        """The indices among ``indices`` this run plays (claimed now, or stale)."""
        if self.claimer is None:
            return list(indices)
        return [i for i in indices if self.claimer.plays(await self.claimer.take(i))]

    async def record(self, game: Any, summary: Any) -> None:
        """``game``: a ``saves.traces.PreparedGame``."""
        from lab import runner

        gid = game.game_id
        if gid in self.written:  # a retried task that answered twice: the game is saved once
            return
        self.written.add(gid)
        await self.saver.add(game)
        self.results[gid] = summary
        if self.progress is not None:
            await runner._maybe_await(self.progress(summary))

    async def lost(self, indices: Sequence[int], reason: str) -> None:
        """The games at ``indices`` will not come back: each is saved ``failed`` with ``reason``."""
        from lab import runner
        from lab.gamespec import GameSpec
        from saves.traces import prepare_game

        for i in indices:
            task, gid = self.tasks[i], self.ids[i]
            spec = GameSpec(task, self.agents, self.settings.game_config(), gid, self.key,
                            extra_config={"agents_spec": self.label, "settings_key": self.key})
            trace = spec.failed_trace(ExecutorError(reason))
            summary = runner.GameSummary(gid, task.task_id, task.cost_mode, self.label, "failed",
                                         error=trace["error"], meetings_total=len(task.meetings))
            await self.record(prepare_game(trace), summary)

    async def close(self) -> None:
        await self.saver.flush()  # also on Ctrl-C: every finished game is kept
        if self.claimer is not None:
            await self.claimer.release()  # after the flush: a claim outlives its unsaved game

    def played(self) -> list[Any]:
        """The summaries of the games written, in task order."""
        order = {gid: i for i, gid in enumerate(self.ids)}
        return sorted(self.results.values(), key=lambda s: order.get(s.game_id, len(order)))


def ray_executor(options: RayOptions | None = None) -> Callable[..., Any]:
    """The ``executor`` for :func:`lab.runner.run_cli_suite`: :func:`play_on_ray` with ``options``."""
    return functools.partial(play_on_ray, options=options or RayOptions())


async def play_on_ray(tasks: Sequence[Task], ids: Sequence[str], agents_spec: Any, *, store, settings: Any,
                      concurrency: int = 1, progress: Callable[[Any], Any] | None = None,
                      options: RayOptions | None = None, lease: tuple | None = None) -> list[Any]:
    """Play ``tasks`` (with their game ``ids``) as Ray tasks; write every game to ``store`` here.

    Returns one ``GameSummary`` per game played, in task order.  ``concurrency`` is how many
    of a task's games run at once inside one Ray task (LLM games).  ``lease = (units,
    skip_done, run_pid)``: the driver claims every task in the store before sending it
    (:class:`_Driver`), leaves the ones done or held by another live run, and drops its
    claims at the end.
    """
    options = options or RayOptions()
    if callable(agents_spec):
        raise ExecutorError("--executor ray needs a persona spec (a seat factory cannot be sent to a worker)")
    ray = init_ray(options)
    from lab.runner import agents_of

    agents_spec = agents_of(agents_spec)  # run_cli_suite parsed it; the parsed spec is pickled to the workers
    uses_llm = agents_spec.uses_llm
    chunk_size = options.chunk or (max(1, concurrency) if uses_llm else 8)
    portable = portable_settings(settings)
    task_options: dict[str, Any] = {"max_retries": options.max_retries, "retry_exceptions": False,
                                    "num_cpus": options.llm_cpus if uses_llm else 1}
    if options.runtime_env:
        task_options["runtime_env"] = options.runtime_env
    remote = ray.remote(iter_chunk).options(num_returns="streaming", **task_options)
    if uses_llm:  # the cluster-wide request limit of every endpoint of the run, set before any game
        for endpoint, limit in _endpoints_of(settings).items():
            gate = endpoint_gate(endpoint, limit)
            await asyncio.wrap_future(gate.resize.remote(limit).future())
    driver = _Driver(store, settings, agents_spec, tasks, ids, progress=progress, lease=lease)
    streams: list[Any] = []

    async def follow(stream: Any, idx: list[int]) -> None:
        """Write each game of one Ray task as it arrives; what never came is saved failed."""
        try:
            async for ref in stream:
                game, summary = await ref
                await driver.record(game, summary)
        except Exception as exc:  # retries exhausted, the cluster lost: the games fail, --resume replays
            missing = [i for i in idx if driver.ids[i] not in driver.written]
            await driver.lost(missing, f"the Ray task was lost ({type(exc).__name__}: "
                                       f"{str(exc).splitlines()[0][:300]})")

    try:
        keep = await driver.claim(range(len(driver.tasks)))
        follows = []
        for c in range(0, len(keep), chunk_size):
            idx = keep[c:c + chunk_size]
            chunk = _Chunk(tuple(driver.tasks[i] for i in idx), tuple(driver.ids[i] for i in idx), agents_spec,
                           portable, max(1, concurrency) if uses_llm else 1, uses_llm)
            stream = remote.remote(chunk)
            streams.append(stream)
            follows.append(follow(stream, idx))
        await asyncio.gather(*follows)
    except BaseException:
        for stream in streams:
            try:
                ray.cancel(stream, force=True)
            except Exception:
                pass
        raise
    finally:
        await driver.close()
    return driver.played()


# ---------------------------------------------------------------------------------------
# Local worker processes (the local executor of a CPU-bound scripted suite)
# ---------------------------------------------------------------------------------------
def process_executor(processes: int, *, chunk: int = 8, ahead: int = 2) -> "ProcessExecutor":
    """The ``executor`` for :func:`lab.runner.run_cli_suite`: games in forked worker processes."""
    return ProcessExecutor(processes, chunk=chunk, ahead=ahead)


def _worker_main(tasks: Sequence[Task], ids: Sequence[str], agents_spec: Any, settings: Any, conn: Any,
                 parent_pid: int) -> None:
    """A forked worker: play the chunks ``(number, [task index, ...])`` the driver sends, answer
    each with ``("done", number, played)`` (as :func:`play_chunk` gives it) until it sends None."""
    import signal

    from lab.lease import die_with_parent

    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's: it ends this process
    # What the worker inherited (the suite's tasks, the modules) lives as long as it does:
    # the cyclic collector need not walk it again and again (lab.runner.settle_gc).
    from lab.runner import settle_gc

    settle_gc()
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            break
        if job is None:
            break
        number, idx = job
        chunk = _Chunk(tuple(tasks[i] for i in idx), tuple(ids[i] for i in idx), agents_spec, settings, 1, False)
        try:
            conn.send(("done", number, play_chunk(chunk)))
        except BaseException as exc:  # noqa: BLE001 - told to the driver, which fails these games
            from engine.redact import redact

            conn.send(("error", number, redact(f"{type(exc).__name__}: {exc}")))
    conn.close()


def _received(conn: Any) -> "asyncio.Future[Any]":
    """The next message on ``conn`` without blocking the event loop (EOFError: the worker is gone)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    fd = conn.fileno()

    def ready() -> None:
        loop.remove_reader(fd)
        if fut.done():
            return
        try:
            fut.set_result(conn.recv())
        except BaseException as exc:  # noqa: BLE001 - EOFError / OSError: the worker died
            fut.set_exception(exc)

    loop.add_reader(fd, ready)
    fut.add_done_callback(lambda _f: loop.remove_reader(fd))
    return fut


class ProcessExecutor:
    """Play a suite in ``processes`` forked workers; the calling process is the only writer.

    :meth:`start` forks the workers; :func:`lab.runner.run_cli_suite` calls it before it
    opens the database or draws progress, so no other thread exists at the fork (a fork
    copies only the calling thread, and a lock another thread held would stay held in the
    child forever).  Calling the executor without :meth:`start` starts it then.

    The driver hands each worker ``ahead`` chunks of ``chunk`` games at a time, claiming a
    chunk just before it is sent (so two resumed runs share a suite chunk by chunk), and
    writes the games as the workers send them back prepared (``saves.traces.prepare_game``).
    Workers hold no database connection, so they never queue for SQLite's write lock.  A
    worker that dies loses the chunks it held: their games are saved ``failed`` and the
    other workers play the rest.  Workers die with the driver (``lab.lease.die_with_parent``).
    """

    def __init__(self, processes: int, *, chunk: int = 8, ahead: int = 2) -> None:
        self.processes = max(1, processes)
        self.chunk = max(1, chunk)
        self.ahead = max(1, ahead)
        self.workers: list[tuple[Any, Any]] = []
        self._for: tuple[list[str], Any] | None = None  # (game ids, spec) the workers were forked with

    def start(self, tasks: Sequence[Task], ids: Sequence[str], agents_spec: Any, settings: Any) -> None:
        """Fork the workers for these games (they inherit the tasks; nothing is pickled)."""
        import multiprocessing as mp

        if self.workers:
            return
        if callable(agents_spec):
            raise ExecutorError("worker processes need a persona spec, not a seat factory")
        from lab.runner import agents_of

        agents_spec = agents_of(agents_spec)  # run_cli_suite parsed it; the workers inherit the parsed spec
        ctx = mp.get_context("fork")
        tasks, ids = list(tasks), list(ids)
        for _ in range(self.processes):
            here, there = ctx.Pipe()
            proc = ctx.Process(target=_worker_main, daemon=True,
                               args=(tasks, ids, agents_spec, settings, there, os.getpid()))
            proc.start()
            there.close()  # the worker's end lives in the worker only: its death closes the pipe
            self.workers.append((proc, here))
        self._for = (ids, agents_spec)

    def close(self) -> None:
        """End the workers (a clean end has told them already; otherwise the games in play are dropped)."""
        for proc, conn in self.workers:
            if proc.is_alive():
                proc.terminate()
            proc.join(timeout=5)
            conn.close()
        self.workers = []

    async def __call__(self, tasks: Sequence[Task], ids: Sequence[str], agents_spec: Any, *, store, settings: Any,
                       concurrency: int = 1, progress: Callable[[Any], Any] | None = None,
                       lease: tuple | None = None) -> list[Any]:
        if not self.workers:
            self.start(tasks, ids, agents_spec, settings)
        elif self._for is None or self._for[0] != list(ids):
            raise ExecutorError("the worker processes were started for another list of games")
        driver = _Driver(store, settings, self._for[1], tasks, ids, progress=progress, lease=lease)
        n, chunk = len(driver.tasks), self.chunk
        starts = iter(range(0, n, chunk))
        unsent: list[tuple[int, list[int]]] = []  # claimed chunks a dead worker never got
        lock = asyncio.Lock()

        async def next_job() -> tuple[int, list[int]] | None:
            async with lock:  # one claim at a time, in suite order
                if unsent:
                    return unsent.pop(0)
                for start in starts:
                    keep = await driver.claim(range(start, min(n, start + chunk)))
                    if keep:
                        return start, keep
                return None

        async def feed(proc: Any, conn: Any) -> None:
            held: dict[int, list[int]] = {}

            async def send_next() -> bool:
                """False when the worker is gone (the chunk goes to another worker)."""
                job = await next_job()
                if job is None:
                    return True
                try:
                    conn.send(job)
                except OSError:
                    unsent.append(job)
                    return False
                held[job[0]] = job[1]
                return True

            async def gone() -> None:
                proc.join(timeout=1)
                for idx in held.values():
                    await driver.lost(idx, f"the worker process died (exit code {proc.exitcode})")

            for _ in range(self.ahead):
                if not await send_next():
                    return await gone()
            while held:
                try:
                    kind, number, body = await _received(conn)
                except (EOFError, OSError):
                    return await gone()
                idx = held.pop(number)
                alive = await send_next()  # keep the worker busy while its games are written
                if kind == "error":
                    await driver.lost(idx, f"the worker process failed ({body})")
                else:
                    for game, summary in body:
                        await driver.record(game, summary)
                if not alive:
                    return await gone()
            try:
                conn.send(None)
            except OSError:
                pass

        try:
            await asyncio.gather(*(feed(proc, conn) for proc, conn in self.workers))
            for _start, idx in unsent:  # put back by a worker that died when every other one was done
                await driver.lost(idx, "its worker process died before it could play it")
            left = sum(len(range(start, min(n, start + chunk))) for start in starts)
            if left:
                raise ExecutorError(f"every worker process died; {left} game(s) were not played — "
                                    "run again with --resume")
        finally:
            self.close()  # Ctrl-C or an error here: the games in play are dropped, --resume replays them
            await driver.close()
        return driver.played()
