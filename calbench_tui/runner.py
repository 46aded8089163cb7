"""The headless suite runner: many games, saved to the store, summarised (``calbench run``).

No Textual here; the CLI (``commands/run.py``) and the app both use this module.

* Each task is one game with the personas of ``agents_spec`` (one name for every seat,
  or a comma list with one per seat; see ``personas.registry``).
* Every game is saved.  Games with LLM or human seats are slow, so they are saved as
  they happen: ``create_game`` (status ``running``), events through the store's sink,
  ``finish_game``.  Scripted games take milliseconds; they are saved whole, in bursts
  (:class:`_BatchSaver`), which costs far less than a round trip to the database thread
  per phase.  A game whose persona or engine raises is saved ``failed`` with the error
  and the suite goes on; Ctrl-C marks running games ``stopped`` (finished ones are kept).
* ``resume=True`` marks games a crash left ``running`` under the same
  :func:`settings_key` as ``stopped`` and skips tasks already completed under it.
* ``concurrency`` games are in flight at once (asyncio): what LLM suites need.  Scripted
  suites are CPU-bound; :func:`run_cli_suite` splits them over forked processes, each
  with its own connection to the same WAL database.
* The oracle is solved once per task and shared by the full and scheduled-only lookups
  (:func:`prime_oracle`).

Summaries (:func:`summarise`) follow the paper's Table 2, grouped by persona spec and
cost setting: coordination (mean share of meetings scheduled), excess (levels, mean over
seats), messages per meeting (pooled: Σ messages / Σ scheduled participant-meetings),
fairness (mean over seats) and VPS (mean per game).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time
import traceback
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from engine.events import ListSink, wall_clock
from engine.game import GameConfig, run_game
from engine.model import Task

__all__ = ["RunSettings", "GameSummary", "RunError", "run_suite", "run_cli_suite", "summarise", "shard",
           "settings_key", "make_seats", "make_seats_for", "prime_oracle", "spec_uses_llm"]

# Settings added after runs were first saved, left out of the run's key at their default
# so that `calbench run --resume` still finds the games of an earlier version.
_LLM_KEY_DEFAULTS = {"structured": "auto", "history": "auto"}
# LLM settings that never change what a game is (secrets, plumbing, patience).
_LLM_KEY_EXCLUDE = {"api_key", "api_key_env", "concurrency", "timeout", "retries", "backoff_base",
                    "backoff_max", "retry_after_max"}


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

    def game_config(self) -> GameConfig:
        return GameConfig(max_turns_per_round=self.max_turns, decision_retries=self.retries,
                          channels=tuple(self.channels), seat_timeout=self.seat_timeout,
                          deterministic=self.deterministic)

    def key_fields(self, agents_spec: str) -> dict[str, Any]:
        """The settings that define a run (never keys): what :func:`settings_key` hashes."""
        d: dict[str, Any] = {
            "agents": agents_spec,
            "channels": list(self.channels),
            "max_turns": self.max_turns,
            "retries": self.retries,
            "deterministic": self.deterministic,
        }
        if self.judge is not None:
            d["judge"] = _llm_fields(self.judge)
        if spec_uses_llm(agents_spec):
            if self.llm is not None:
                d["llm"] = _llm_fields(self.llm)
            if self.personas:
                d["personas"] = {str(k): _llm_fields(v) for k, v in sorted(self.personas.items())}
        return d

    async def aclose(self) -> None:
        """Close the LLM clients of this run (one pool, shared by every seat)."""
        seen = set()
        for s in [self.llm, self.judge, *(self.personas or {}).values()]:
            pool = getattr(s, "pool", None)
            if pool is not None and id(pool) not in seen:
                seen.add(id(pool))
                await pool.aclose()


def settings_key(agents_spec: str, settings: RunSettings) -> str:
    """A short stable id of (agents, settings): ``--resume`` matches games on it."""
    blob = json.dumps(settings.key_fields(agents_spec), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _llm_fields(llm: Any) -> dict[str, Any]:
    raw = llm.public() if hasattr(llm, "public") else (llm.model_dump() if hasattr(llm, "model_dump") else dict(llm))
    out = {k: v for k, v in raw.items() if k not in _LLM_KEY_EXCLUDE and "secret" not in k and "key" != k[-3:]}
    for k, default in _LLM_KEY_DEFAULTS.items():  # settings added later: at their default, the key stays as it was
        if out.get(k) == default:
            out.pop(k)
    return out


def seat_llm_config(seats: Sequence[Any]) -> dict[str, Any]:
    """``{"llm": [per seat: public LLM settings or None]}`` for a game with LLM seats, else ``{}``.

    Recorded in the trace's config: model, endpoint (without credentials), sampling,
    timeout, retries, variant and the NAME of the key's environment variable — never a key
    (``LLMSettings.public`` has no key field to give).
    """
    out: list[dict[str, Any] | None] = []
    for s in seats:
        describe = getattr(s, "describe", None)
        out.append(describe() if getattr(s, "kind", None) == "llm" and callable(describe) else None)
    return {"llm": out} if any(x is not None for x in out) else {}


def spec_names(agents_spec: str) -> list[str]:
    return [p.strip() for p in agents_spec.split(",") if p.strip()]


def spec_streams(agents_spec: str) -> bool:
    """Whether games of this spec are slow enough that events should be saved as they happen."""
    return spec_uses_llm(agents_spec) or any(n.lower() == "human" for n in spec_names(agents_spec))


def spec_uses_llm(agents_spec: str) -> bool:
    """Whether any seat of the spec is an LLM (so LLM settings matter)."""
    return any(n.lower() == "llm" or n.lower().startswith("llm:") for n in spec_names(agents_spec))


# ---------------------------------------------------------------------------------------
# Seats
# ---------------------------------------------------------------------------------------
SeatFactory = Callable[[Task], Sequence[Any]]


def make_seats(agents_spec: str | SeatFactory, task: Task, settings: RunSettings) -> list[Any]:
    """The personas for one game (fresh objects every game: personas keep state).

    With a personas file, each LLM seat gets its own settings; a bare ``llm`` seat takes
    its model from there.
    """
    if callable(agents_spec):
        return list(agents_spec(task))
    return make_seats_for(agents_spec, task.num_agents, settings)


def make_seats_for(agents_spec: str, n: int, settings: RunSettings) -> list[Any]:
    """Personas for ``n`` seats from a spec string (raises the registry's errors)."""
    from personas.registry import make_personas

    names = spec_names(agents_spec)
    bare = [name.lower() == "llm" for name in names]
    if not settings.personas and not any(bare):
        return make_personas(agents_spec, n, llm=settings.llm)
    if len(names) == 1:
        names, bare = names * n, bare * n
    # Validate the seat count and names once, with a stand-in for bare "llm" seats.
    from personas.registry import parse_spec

    parse_spec(",".join("llm:_" if b else name for name, b in zip(names, bare)), n)
    out = []
    for seat, (name, is_bare) in enumerate(zip(names, bare)):
        seat_llm = (settings.personas or {}).get(seat, settings.llm)
        if is_bare:
            from personas.llm.factory import make_llm_persona

            out.append(make_llm_persona("llm", seat_llm))
        else:
            out.append(make_personas(name, 1, llm=seat_llm)[0])
    return out


def spec_label(agents_spec: str | SeatFactory) -> str:
    if callable(agents_spec):
        return str(getattr(agents_spec, "spec", getattr(agents_spec, "__name__", "custom")))
    from personas.registry import canonical_name

    # "IMAP, imap" and "imap,imap" are the same table: same label, same --resume key.
    return ",".join(canonical_name(p) for p in agents_spec.split(","))


def prime_oracle(task: Task) -> None:
    """Solve the full oracle once and let the scheduled-only oracle reuse it.

    When a game schedules every meeting, the scheduled-only oracle is the full one; the
    metrics look it up under the tuple of all meeting ids, so store the same result there.
    """
    from engine.metrics import oracle_cached

    full = oracle_cached(task, None)
    all_ids = tuple(sorted(m.id for m in task.meetings))
    task.cache.setdefault(("oracle", all_ids), full)
    ids_in_order = tuple(m.id for m in task.meetings)
    task.cache.setdefault(("oracle", ids_in_order), full)


# ---------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------
@dataclass
class GameSummary:
    """One game as the suite table sees it (``--json`` prints :meth:`to_json`)."""

    game_id: str
    task_id: str
    cost_mode: str
    agents: str
    status: str  # completed | failed | stopped | skipped
    coordination: float | None = None
    meetings_scheduled: int | None = None
    meetings_total: int | None = None
    excess_cost: float | None = None
    messages_per_meeting: float | None = None
    fairness: float | None = None
    vps: float | None = None
    error: str | None = None
    # For pooled summaries (not printed per game).
    seats: int = 0
    excess_sum: float = 0.0
    fairness_sum: float = 0.0
    messages: int = 0
    scheduled_participant_meetings: int = 0
    seconds: float = 0.0
    # Failures by whose fault (see :func:`failure_counts`); None: not known (a game read back
    # for --resume from the per-seat results, which keep no events).
    infra_failures: int | None = 0
    agent_failures: int | None = 0
    config_failures: int | None = 0  # context overflows (engine.usage.failure_counts)
    tokens: dict[str, int] | None = None  # LLM tokens of the game (engine.usage.token_usage)

    JSON_KEYS = ("game_id", "task_id", "cost_mode", "agents", "status", "coordination",
                 "meetings_scheduled", "meetings_total", "excess_cost", "messages_per_meeting",
                 "fairness", "vps", "infra_failures", "config_failures", "agent_failures", "tokens")

    def to_json(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.JSON_KEYS}
        if self.error:
            d["error"] = self.error
        return d

    @classmethod
    def from_trace(cls, trace: dict[str, Any], *, agents: str, status: str = "completed",
                   game_id: str | None = None) -> "GameSummary":
        m = trace.get("metrics") or {}
        cfg = trace.get("config") or {}
        task_row = trace.get("task") or {}
        per_seat = m.get("per_seat") or []
        cost_mode = m.get("cost_mode") or (task_row.get("calbench") or {}).get("cost_mode") or "?"
        infra, agent = failure_counts(trace.get("events") or [])
        from engine.usage import failure_counts as _classes, token_usage

        config = _classes(trace.get("events") or [])["configuration"]
        tok = token_usage(trace.get("events") or [], (trace.get("judge") or {}).get("records") or [])
        tokens = tok["total"] if tok["total"]["calls"] else None
        return cls(
            game_id=game_id or trace.get("game_id"),
            task_id=str(cfg.get("task_id", task_row.get("task_id"))),
            cost_mode=cost_mode,
            agents=agents,
            status=status,
            coordination=m.get("coordination_rate"),
            meetings_scheduled=m.get("meetings_scheduled"),
            meetings_total=m.get("meetings_total"),
            excess_cost=m.get("excess"),
            messages_per_meeting=m.get("messages_per_meeting"),
            fairness=m.get("fairness"),
            vps=m.get("vps"),
            seats=len(per_seat),
            excess_sum=sum(s.get("excess", 0) for s in per_seat),
            fairness_sum=sum(s.get("fairness", 0) for s in per_seat),
            messages=int(m.get("total_cheap_talk_messages", 0)),
            scheduled_participant_meetings=sum(s.get("meetings_scheduled", 0) for s in per_seat),
            infra_failures=infra, agent_failures=agent, config_failures=config, tokens=tokens,
        )

    @classmethod
    def from_seat_rows(cls, rows: list[dict[str, Any]], task: Task) -> "GameSummary":
        """From ``store.game_results`` rows (one per seat) of one saved game."""
        g = rows[0]
        seats = [r.get("seat") or {} for r in rows]
        n = len(seats)
        sent = sum(s.get("messages_sent") or 0 for s in seats)
        spm = sum(s.get("meetings_scheduled") or 0 for s in seats)
        excess = sum(s.get("excess") or 0 for s in seats)
        fairness = sum(s.get("fairness") or 0 for s in seats)
        total = len(task.meetings)
        coord = g.get("coordination")
        return cls(
            game_id=g["game_id"], task_id=str(g["task_id"]), cost_mode=g.get("cost_mode") or task.cost_mode,
            agents=g.get("agents") or "", status=g.get("status") or "completed", coordination=coord,
            meetings_scheduled=round(coord * total) if coord is not None else None, meetings_total=total,
            excess_cost=excess / n if n else None, messages_per_meeting=sent / spm if spm else float(sent),
            fairness=fairness / n if n else None, vps=sum(s.get("vps") or 0 for s in seats),
            seats=n, excess_sum=excess, fairness_sum=fairness, messages=sent, scheduled_participant_meetings=spm,
            infra_failures=None, agent_failures=None, config_failures=None,  # the per-seat results keep no events
        )


def failure_counts(events: Iterable[dict[str, Any]]) -> tuple[int, int]:
    """``(infrastructure failures, agent failures)`` of a game, counted from its events.

    * infrastructure: ``seat_timeout`` events — a seat that could not answer at all: the
      engine records them for ``Reply.error`` ``"seat_timeout"`` and ``"infra_error"`` (an
      LLM endpoint down or failing past its retries, a context-length error, a missing
      key met during a call) and for a persona call that timed out;
    * agent: ``parse_error`` events — the agent answered but got it wrong: unreadable
      output (``parse_error``), a persona exception (``seat_error``), a message that could
      not be delivered (``undeliverable``) and actions sent in the wrong phase
      (``ignored_actions``).  All are the agent's mistakes, so all count.
    """
    infra = agent = 0
    for e in events:
        t = e.get("type")
        if t == "seat_timeout":
            infra += 1
        elif t == "parse_error":
            agent += 1
    return infra, agent


def summarise(games: Iterable[GameSummary]) -> list[dict[str, Any]]:
    """Table 2 rows, one per (persona spec, cost mode), over completed games.

    ``coordination`` is the mean share of meetings scheduled (0–1; the table shows %),
    ``excess`` and ``fairness`` are means over seats (levels), ``messages_per_meeting``
    is pooled (Σ messages / Σ scheduled participant-meetings) and ``vps`` is the mean
    game VPS.  ``failed`` counts games that could not be played.  ``infra_failures`` and
    ``agent_failures`` sum the games' :func:`failure_counts` (played and failed games;
    games read back for ``--resume`` add nothing), and ``games_with_infra_failures``
    counts the games with at least one infrastructure failure.
    """
    groups: dict[tuple[str, str], list[GameSummary]] = {}
    failed: dict[tuple[str, str], int] = {}
    fails: dict[tuple[str, str], list[int]] = {}
    for g in games:
        k = (g.agents, g.cost_mode)
        f = fails.setdefault(k, [0, 0, 0, 0])
        f[0] += g.infra_failures or 0
        f[1] += g.agent_failures or 0
        f[2] += 1 if g.infra_failures else 0
        f[3] += g.config_failures or 0
        if g.status == "completed":
            groups.setdefault(k, [])
            groups[k].append(g)
        elif g.status == "failed":
            failed[k] = failed.get(k, 0) + 1
            groups.setdefault(k, [])
    out = []
    for (persona, mode), gs in sorted(groups.items(), key=lambda kv: (_mode_rank(kv[0][1]), kv[0][0])):
        n = len(gs)
        seats = sum(g.seats for g in gs)
        spm = sum(g.scheduled_participant_meetings for g in gs)
        msgs = sum(g.messages for g in gs)
        out.append({
            "persona": persona,
            "cost_mode": mode,
            "games": n,
            "failed": failed.get((persona, mode), 0),
            "coordination": _mean([g.coordination for g in gs]),
            "excess": (sum(g.excess_sum for g in gs) / seats) if seats else None,
            "messages_per_meeting": (msgs / spm) if spm else (float(msgs) if n else None),
            "fairness": (sum(g.fairness_sum for g in gs) / seats) if seats else None,
            "vps": _mean([g.vps for g in gs]),
            "infra_failures": fails.get((persona, mode), [0, 0, 0, 0])[0],
            "config_failures": fails.get((persona, mode), [0, 0, 0, 0])[3],
            "agent_failures": fails.get((persona, mode), [0, 0, 0, 0])[1],
            "games_with_infra_failures": fails.get((persona, mode), [0, 0, 0, 0])[2],
        })
    return out


def _mode_rank(mode: str) -> tuple[int, str]:
    return ({"uniform": 0, "varied": 1}.get(mode, 2), mode)


def _mean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


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
        return [str(uuid.uuid4()) for _ in tasks]
    seen: dict[str, int] = {}
    out = []
    for t in tasks:
        n = seen.get(t.task_id, 0)
        seen[t.task_id] = n + 1
        out.append(str(uuid.uuid5(uuid.NAMESPACE_URL, f"calbench-run:{key}:{t.task_id}:{n}")))
    return out


class RunError(Exception):
    """A suite that cannot start as asked (the CLI shows the message as a user error)."""


async def run_suite(
    tasks: Sequence[Task],
    agents_spec: str | SeatFactory,
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
    label = spec_label(agents_spec)
    key = settings_key(label, settings)
    tasks = list(tasks)
    ids = _game_ids(key, tasks, settings.deterministic)
    if resume:
        tasks, ids = await prepare_resume(store, key, tasks, ids)
    elif settings.deterministic:
        await _refuse_saved_ids(store, key, ids)
    return await _play_all(tasks, ids, agents_spec, store=store, concurrency=concurrency, settings=settings,
                           progress=progress)


async def prepare_resume(store, key: str, tasks: list[Task], ids: list[str]) -> tuple[list[Task], list[str]]:
    """Mark games left ``running`` under ``key`` as stopped; drop tasks completed under it."""
    for gid in await store.running_game_ids(key):
        await store.mark_status(gid, "stopped")
    done = set(await store.completed_task_ids(key))
    keep = [i for i, t in enumerate(tasks) if t.task_id not in done]
    return [tasks[i] for i in keep], [ids[i] for i in keep]


async def _refuse_saved_ids(store, key: str, ids: list[str]) -> None:
    """Deterministic ids repeat: a second run into the same database must say so up front."""
    if not ids:
        return
    done = {g["game_id"] for g in await store.list_games(settings_key=key, status="completed")}
    clash = sum(1 for gid in ids if gid in done)
    if clash:
        raise RunError(f"{clash} of these deterministic games are already saved in {store.path}; "
                       "add --resume to skip them, or use another --db")


def _task_row_for_store(task: Task) -> dict[str, Any]:
    """The row as saved at game start: the original keys plus hydrated labels (no deep copy)."""
    if not (task.labels.errands or task.labels.meetings):
        return task.row
    cb = dict(task.row.get("calbench") or {})
    cb["labels"] = task.labels.to_json()
    return {**task.row, "calbench": cb}


class _BatchSaver:
    """Saves finished scripted games whole, ``size`` games per flush (one transaction each).

    Scripted games are pure CPU and take a few milliseconds, so their events are not
    streamed one by one (a hand-over to the database thread per event costs more than the
    game).  Each game is written whole by ``store.import_trace`` (status, agents and
    settings key under the trace's ``saved`` key).  Flushing every game made the worker
    processes of a suite queue for SQLite's single writer lock (measured: IMAP suite
    1.41–1.49 s with size 1, 1.16–1.26 s with size 8); so a kill loses at most the last
    ``size`` finished games (tens of milliseconds of work) and the one in play, which
    ``--resume`` plays again.
    """

    def __init__(self, store, size: int = 8) -> None:
        self.store = store
        self.size = size
        self.pending: list[dict[str, Any]] = []

    async def add(self, trace: dict[str, Any]) -> None:
        self.pending.append(trace)
        if len(self.pending) >= self.size:
            await self.flush()

    async def flush(self) -> None:
        pending, self.pending = self.pending, []
        for trace in pending:
            if not await self.store.import_trace(trace):
                # The same (deterministic) id is saved already: replace it unless it is completed.
                gid = trace["game_id"]
                old = [g for g in await self.store.list_games(task_id=trace["config"].get("task_id"))
                       if g["game_id"] == gid]
                if old and old[0]["status"] == "completed":
                    raise RunError(f"game {gid} is already saved and completed")
                await self.store.delete_game(gid)
                await self.store.import_trace(trace)


async def _play_all(tasks: list[Task], ids: list[str], agents_spec: str | SeatFactory, *, store,
                    concurrency: int, settings: RunSettings, progress: Progress | None) -> list[GameSummary]:
    label = spec_label(agents_spec)
    key = settings_key(label, settings)
    config = settings.game_config()
    extra = {"agents_spec": label, "settings_key": key}
    results: list[GameSummary | None] = [None] * len(tasks)
    next_index = iter(range(len(tasks)))
    stream = settings.stream_events
    if stream is None:  # LLM and human seats: save events as they happen; scripted: in bursts
        stream = isinstance(agents_spec, str) and spec_streams(agents_spec)
    saver = None if stream else _BatchSaver(store)

    def saved(trace: dict[str, Any], status: str) -> dict[str, Any]:
        return {**trace, "saved": {"agents": label, "settings_key": key, "status": status, "source": "calbench"}}

    async def play(i: int) -> GameSummary:
        task, gid = tasks[i], ids[i]
        t0 = time.perf_counter()
        cfg_json = {**config.to_json(), **extra, "task_id": task.task_id}
        if stream:
            await store.create_game(gid, task_row=_task_row_for_store(task), config=cfg_json, agents=label,
                                    settings_key=key, started_at=wall_clock())
        sink = store.sink(gid, durable=True) if stream else ListSink()
        try:
            seats = make_seats(agents_spec, task, settings)
            prime_oracle(task)
            game_extra = {**extra, **seat_llm_config(seats)}
            result = await run_game(task, seats, config, sink, game_id=gid, extra_config=game_extra)
            if settings.judge is not None:  # paper I.2: measurement after the game, stored beside the VPS
                from personas.llm.judge import judge_trace

                await judge_trace(result.trace, task, settings.judge)
            if stream:
                await sink.aclose()
                await store.finish_game(gid, result.trace)
            else:
                await saver.add(saved(result.trace, "completed"))
            s = GameSummary.from_trace(result.trace, agents=label, game_id=gid)
        except asyncio.CancelledError:
            if stream:
                await _close_quietly(sink)
                await store.mark_status(gid, "stopped")
            raise
        except Exception as exc:  # a broken persona or an engine bug: record it, go on
            err = f"{type(exc).__name__}: {exc}"
            trace = {"game_id": gid, "config": cfg_json, "events": [] if stream else list(sink.events),
                     "final_state": None, "metrics": None, "ended_at": wall_clock(), "stopped": False,
                     "task": _task_row_for_store(task), "error": err,
                     "error_traceback": traceback.format_exc(limit=10)}
            if stream:
                await _close_quietly(sink)  # the events so far are in the database already
                await store.finish_game(gid, trace, status="failed")
            else:
                await saver.add(saved(trace, "failed"))
            s = GameSummary(gid, task.task_id, task.cost_mode, label, "failed", error=err,
                            meetings_total=len(task.meetings))
        s.seconds = time.perf_counter() - t0
        return s

    async def worker() -> None:
        for i in next_index:
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
        if saver is not None:
            await saver.flush()  # also on Ctrl-C: the finished games are kept
    return [r for r in results if r is not None]


async def _close_quietly(sink) -> None:
    try:
        await sink.aclose()
    except Exception:
        pass


# ---------------------------------------------------------------------------------------
# The command-line driver: open the store, show progress, optionally use processes
# ---------------------------------------------------------------------------------------
class _ProgressBar:
    """A rich progress bar on stderr: games done, rate, ETA (quiet when stderr is no terminal)."""

    def __init__(self, total: int, label: str, enabled: bool = True) -> None:
        self.total = total
        self.label = label
        self.failed = 0
        self.done = 0
        self._p = None
        if not enabled or total == 0 or not sys.stderr.isatty():
            return
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)
        from rich.text import Text

        class Rate(ProgressColumn):
            def render(self, task):  # noqa: D401 - rich API
                el = task.elapsed or 0.0
                return Text(f"{task.completed / el:6.1f} games/s" if el > 0 and task.completed else "   – games/s",
                            style="progress.data.speed")

        console = Console(stderr=True)
        if not console.is_terminal:
            return
        self._p = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), Rate(),
                           TextColumn("ETA"), TimeRemainingColumn(), TimeElapsedColumn(), console=console,
                           transient=False, refresh_per_second=8)
        self._task = self._p.add_task(label, total=total)

    def __enter__(self) -> "_ProgressBar":
        if self._p is not None:
            self._p.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._p is not None:
            self._p.stop()

    def advance(self, s: GameSummary) -> None:
        self.done += 1
        if s.status == "failed":
            self.failed += 1
        if self._p is not None:
            desc = self.label + (f" [red]{self.failed} failed[/red]" if self.failed else "")
            self._p.update(self._task, advance=1, description=desc)


def run_cli_suite(tasks: Sequence[Task], agents_spec: str, *, db: str, settings: RunSettings,
                  concurrency: int = 1, resume: bool = False, processes: int = 1,
                  show_progress: bool = True) -> list[GameSummary]:
    """What ``calbench run`` does: play the suite into the database at ``db``.

    Returns the games played now plus, with ``resume``, the games of these tasks already
    completed under the same settings (so the table covers the whole suite).
    ``processes > 1`` splits the suite over that many forked processes, each writing to
    the same WAL database through its own connection (worth it for CPU-bound scripted
    suites; an LLM suite waits on the network and uses ``concurrency`` instead).
    """
    tasks = list(tasks)
    todo, ids, previous = asyncio.run(_prepare(tasks, agents_spec, db=db, settings=settings, resume=resume))
    procs = max(1, min(processes, len(todo)))
    if procs > 1 and "fork" not in _mp_methods():
        procs = 1
    if procs == 1:
        with _ProgressBar(len(todo), spec_label(agents_spec), enabled=show_progress) as bar:
            played = asyncio.run(_play_with_store(todo, ids, agents_spec, db=db, settings=settings,
                                                  concurrency=concurrency, progress=bar.advance))
    else:
        played = _play_in_processes(todo, ids, agents_spec, db=db, settings=settings, concurrency=concurrency,
                                    processes=procs, show_progress=show_progress)
    return previous + played


def _mp_methods() -> list[str]:
    import multiprocessing as mp

    return mp.get_all_start_methods()


async def _open_store(db: str):
    from saves.store import Store

    return await Store.open(db)


async def _prepare(tasks: list[Task], agents_spec: str, *, db: str, settings: RunSettings, resume: bool):
    """Resume bookkeeping before any game starts: (tasks to play, their ids, previous games)."""
    key = settings_key(spec_label(agents_spec), settings)
    ids = _game_ids(key, tasks, settings.deterministic)
    store = await _open_store(db)
    try:
        if resume:
            todo, todo_ids = await prepare_resume(store, key, tasks, ids)
            return todo, todo_ids, await _previous_games(store, key, tasks, todo)
        if settings.deterministic:
            await _refuse_saved_ids(store, key, ids)
        return tasks, ids, []
    finally:
        await store.close()


async def _play_with_store(tasks, ids, agents_spec, *, db, settings, concurrency, progress):
    store = await _open_store(db)
    try:
        return await _play_all(tasks, ids, agents_spec, store=store, concurrency=concurrency,
                               settings=settings, progress=progress)
    finally:
        await settings.aclose()
        await store.close()


def _child_main(tasks, ids, agents_spec, db, settings, concurrency, queue) -> None:
    """One forked worker: play its share, report each game on ``queue``, then ``None``."""
    try:
        asyncio.run(_play_with_store(tasks, ids, agents_spec, db=db, settings=settings,
                                     concurrency=concurrency, progress=queue.put))
    except KeyboardInterrupt:
        pass  # running games were marked stopped on the way out
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        queue.put(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        queue.put(None)
        queue.close()
        queue.join_thread()


def _play_in_processes(tasks, ids, agents_spec, *, db, settings, concurrency, processes,
                       show_progress) -> list[GameSummary]:
    import multiprocessing as mp
    import queue as queue_mod

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    per_proc = max(1, concurrency // processes)
    procs = []
    for p in range(processes):
        idx = list(range(p, len(tasks), processes))
        procs.append(ctx.Process(target=_child_main, daemon=True,
                                 args=([tasks[i] for i in idx], [ids[i] for i in idx], agents_spec, db,
                                       settings, per_proc, q)))
    for pr in procs:  # fork before the progress bar starts its thread
        pr.start()
    results: dict[str, GameSummary] = {}
    errors: list[str] = []
    open_children = processes
    try:
        with _ProgressBar(len(tasks), spec_label(agents_spec), enabled=show_progress) as bar:
            gone = False
            while open_children:
                try:
                    item = q.get(timeout=0.1 if gone else 0.5)
                except queue_mod.Empty:
                    if gone:
                        break  # every worker has exited and their messages are read
                    gone = not any(pr.is_alive() for pr in procs)
                    continue
                if item is None:
                    open_children -= 1
                elif isinstance(item, tuple):
                    errors.append(item[1])
                else:
                    results[item.game_id] = item
                    bar.advance(item)
    except KeyboardInterrupt:
        for pr in procs:  # the children got the same Ctrl-C; let them mark their games stopped
            pr.join(timeout=10)
        raise
    for pr in procs:
        pr.join(timeout=30)
    if open_children:  # a worker died without saying goodbye (killed, out of memory, ...)
        codes = ", ".join(str(pr.exitcode) for pr in procs if pr.exitcode)
        errors.append(f"{open_children} worker process(es) died (exit code {codes or 'unknown'}); "
                      f"{len(results)} of {len(tasks)} games were reported — run again with --resume")
    if errors:
        raise RunError("a worker process failed: " + "; ".join(errors))
    order = {gid: i for i, gid in enumerate(ids)}
    return sorted(results.values(), key=lambda s: order.get(s.game_id, len(order)))


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
