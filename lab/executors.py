"""Executors: where the games of a suite are played (``calbench run --executor local|ray``).

* ``local`` (the default) is the suite runner as it always was: asyncio in this process,
  scripted suites split over forked processes (:func:`lab.runner.run_cli_suite`).
* ``ray`` plays the games as Ray tasks on a cluster (or on a Ray instance it starts on
  this machine).  Every game still goes through :func:`lab.session.run_session`, in a
  Ray worker, with no store there: the finished trace comes back to the driver, and the
  **driver is the only writer of the store**.  Results stream back as Ray tasks end and
  are written at once (in bursts of a few games, like the local runner's scripted
  suites), so ``--resume``, progress, summaries and reports work exactly as with local.

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
import os
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from engine.model import Task

__all__ = ["EXECUTORS", "RAY_MISSING", "ExecutorError", "RayOptions", "ray_available", "play_on_ray",
           "EndpointGate"]

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
    agents: Any  # the spec (AgentsSpec or str) — never a seat factory: that cannot travel
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
    os._exit(17)  # the worker process dies in the middle of a game, as on a lost node


def play_chunk(chunk: _Chunk) -> list[tuple[dict[str, Any], Any, Any]]:
    """In a Ray worker: play ``chunk``'s games; ``[(trace with its saved key, summary, packed events)]``.

    A finished game's events come back packed (``saves.store.encode_events``), its trace
    with ``events`` empty; the driver stores the pack as it is."""
    return asyncio.run(_play_chunk(chunk))


async def _play_chunk(chunk: _Chunk) -> list[tuple[dict[str, Any], Any, Any]]:
    from lab import runner
    from saves.store import BLOB_STATUSES, encode_events

    settings = chunk.settings
    if chunk.gates:
        for s, pool in _pools(settings):
            pool.gate = _RayGates(s.concurrency)
    captured: dict[str, dict[str, Any]] = {}

    async def saver(trace: dict[str, Any]) -> None:
        captured[trace["game_id"]] = trace

    out: list[tuple[dict[str, Any], Any, Any]] = []
    next_index = iter(range(len(chunk.tasks)))
    _die_once_if_asked()

    async def worker() -> None:
        for i in next_index:
            summary = await runner.play_one(chunk.tasks[i], chunk.ids[i], chunk.agents, settings=settings,
                                            store=None, stream=False, saver=saver)
            trace = captured.pop(chunk.ids[i])
            encoded = None
            if trace["saved"]["status"] in BLOB_STATUSES and trace.get("events"):
                # pack the events here (lean, compressed): less to send, less for the driver to do
                encoded = encode_events(trace["events"], trace.get("task"))
                trace = {**trace, "events": []}
            out.append((trace, summary, encoded))

    try:
        k = max(1, min(chunk.concurrency, len(chunk.tasks)))
        await asyncio.gather(*[worker() for _ in range(k)])
    finally:
        await settings.aclose()
    return out


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
class _PackedSaver:
    """The driver's writer: finished games in bursts of ``size``, their events packed by the worker.

    Like the local runner's burst writer (``lab.runner._BatchSaver``): a game id saved
    already is replaced unless it is completed (a deterministic rerun of a failed game).
    """

    def __init__(self, store: Any, size: int = 8) -> None:
        self.store = store
        self.size = size
        self.pending: list[tuple[dict[str, Any], Any]] = []

    async def add(self, trace: dict[str, Any], encoded: Any = None) -> None:
        self.pending.append((trace, encoded))
        if len(self.pending) >= self.size:
            await self.flush()

    async def flush(self) -> None:
        pending, self.pending = self.pending, []
        for trace, encoded in pending:
            if await self.store.import_trace(trace, encoded=encoded):
                continue
            gid = trace["game_id"]
            old = [g for g in await self.store.list_games(task_id=trace["config"].get("task_id"))
                   if g["game_id"] == gid]
            if old and old[0]["status"] == "completed":
                continue  # saved and completed already (an earlier run): never a second copy
            await self.store.delete_game(gid)
            await self.store.import_trace(trace, encoded=encoded)


def ray_executor(options: RayOptions | None = None) -> Callable[..., Any]:
    """The ``executor`` for :func:`lab.runner.run_cli_suite`: :func:`play_on_ray` with ``options``."""
    import functools

    return functools.partial(play_on_ray, options=options or RayOptions())


async def play_on_ray(tasks: Sequence[Task], ids: Sequence[str], agents_spec: Any, *, store, settings: Any,
                      concurrency: int = 1, progress: Callable[[Any], Any] | None = None,
                      options: RayOptions | None = None, lease: tuple | None = None) -> list[Any]:
    """Play ``tasks`` (with their game ``ids``) as Ray tasks; write every game to ``store`` here.

    Returns one ``GameSummary`` per game played, in task order.  ``concurrency`` is how many
    of a task's games run at once inside one Ray task (LLM games).  ``lease = (units,
    skip_done, run_pid)``: the driver claims every task in the store before sending it
    (``lab.lease.Claimer``, as the local runner does), leaves the ones done or held by
    another live run, and drops its claims at the end.
    """
    from lab import runner
    from lab.session import Session, failure_trace, saved_trace

    options = options or RayOptions()
    if callable(agents_spec):
        raise ExecutorError("--executor ray needs a persona spec (a seat factory cannot be sent to a worker)")
    ray = init_ray(options)
    from personas.spec import AgentsSpec

    agents_spec = AgentsSpec.parse(agents_spec) if isinstance(agents_spec, str) else agents_spec
    uses_llm = agents_spec.uses_llm
    chunk_size = options.chunk or (max(1, concurrency) if uses_llm else 8)
    portable = portable_settings(settings)
    task_options: dict[str, Any] = {"max_retries": options.max_retries, "retry_exceptions": False,
                                    "num_cpus": options.llm_cpus if uses_llm else 1}
    if options.runtime_env:
        task_options["runtime_env"] = options.runtime_env
    remote = ray.remote(play_chunk).options(**task_options)
    if uses_llm:  # the cluster-wide request limit of every endpoint of the run, set before any game
        for endpoint, limit in _endpoints_of(settings).items():
            gate = endpoint_gate(endpoint, limit)
            await asyncio.wrap_future(gate.resize.remote(limit).future())
    label = runner.spec_label(agents_spec)
    key = runner.settings_key(label, settings)
    tasks, ids = list(tasks), list(ids)
    claimer = None
    if lease is not None:
        from lab.lease import Claimer

        units, skip_done, run_pid = lease
        claimer = Claimer(store, key, tasks, ids, units, run_pid=run_pid, skip_done=skip_done)
        keep = [i for i in range(len(tasks)) if claimer.plays(await claimer.take(i))]
        tasks, ids = [tasks[i] for i in keep], [ids[i] for i in keep]
    chunks = [_Chunk(tuple(tasks[i:i + chunk_size]), tuple(ids[i:i + chunk_size]), agents_spec, portable,
                     max(1, concurrency) if uses_llm else 1, uses_llm)
              for i in range(0, len(tasks), chunk_size)]
    refs = {remote.remote(c): c for c in chunks}
    futures = {asyncio.wrap_future(ref.future()): ref for ref in refs}
    saver = _PackedSaver(store)
    written: set[str] = set()
    results: dict[str, Any] = {}

    async def record(trace: dict[str, Any], summary: Any, encoded: Any = None) -> None:
        gid = trace["game_id"]
        if gid in written:  # a retried task that answered twice: the game is saved once
            return
        written.add(gid)
        await saver.add(trace, encoded)
        results[gid] = summary
        if progress is not None:
            await runner._maybe_await(progress(summary))

    try:
        pending = set(futures)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for fut in done:
                chunk = refs[futures[fut]]
                try:
                    played = fut.result()
                except Exception as exc:  # retries exhausted, the cluster lost: the games fail, --resume replays
                    reason = f"the Ray task was lost ({type(exc).__name__}: {str(exc).splitlines()[0][:300]})"
                    for task, gid in zip(chunk.tasks, chunk.ids):
                        session = Session(task, [], settings.game_config(), gid, label, key,
                                          {"agents_spec": label, "settings_key": key})
                        trace = failure_trace(session, [], ExecutorError(reason))
                        summary = runner.GameSummary(gid, task.task_id, task.cost_mode, label, "failed",
                                                     error=trace["error"], meetings_total=len(task.meetings))
                        await record(saved_trace(session, trace, "failed"), summary)
                    continue
                for trace, summary, encoded in played:
                    await record(trace, summary, encoded)
    except BaseException:
        for ref in refs:
            try:
                ray.cancel(ref, force=True)
            except Exception:
                pass
        raise
    finally:
        await saver.flush()  # also on Ctrl-C: every finished game is kept
        if claimer is not None:
            await claimer.release()  # after the flush: a claim outlives its unsaved game
    order = {gid: i for i, gid in enumerate(ids)}
    return sorted(results.values(), key=lambda s: order.get(s.game_id, len(order)))

