"""The headless suite runner: many games, saved to the store, summarised (``calbench run``).

No Textual here; the CLI (``commands/run.py``) and the app both call :func:`run_suite`.

* Each task is one game with the personas of ``agents_spec`` (one spec string for every
  seat, or a comma list with one per seat; see ``personas.registry``).
* Every game is saved: ``create_game`` when it starts, its events through the store's
  sink while it runs, ``finish_game`` with the full trace at the end.  A game whose
  persona or engine raises is saved ``failed`` with the error and the suite goes on; a
  cancelled suite (Ctrl-C) marks its running games ``stopped``.
* ``resume=True`` skips tasks already completed in the store under the same
  :func:`RunSettings.settings_key` and marks games a crash left ``running`` as ``stopped``
  (their tasks run again).
* ``concurrency`` games are in flight at once (asyncio).  That is what LLM suites need;
  scripted suites are CPU-bound, and the CLI may split them over processes instead
  (see :func:`run_suite_processes`).

Summaries (:func:`summarise`) follow the paper's Table 2, grouped by persona spec and
cost setting: coordination (mean share of meetings scheduled), excess (levels, mean over
seats), messages per meeting (pooled: Σ messages / Σ scheduled participant-meetings),
fairness (mean over seats) and VPS (mean per game).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import traceback
import uuid
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any, Awaitable, Callable, Iterable, Sequence

from engine.events import wall_clock
from engine.game import GameConfig, run_game
from engine.model import Task

__all__ = ["RunSettings", "GameSummary", "run_suite", "summarise", "shard", "settings_key",
           "make_seats", "prime_oracle"]

# Fields of the LLM settings that never define a run (secrets, plumbing).
_LLM_KEY_EXCLUDE = {"api_key", "api_key_env", "concurrency", "llm_concurrency", "timeout",
                    "client", "http_client", "max_retries", "retries"}


@dataclass(frozen=True)
class RunSettings:
    """Everything besides the tasks and the agents that decides how a suite is played."""

    channels: tuple[str, ...] = ("dm",)
    max_turns: int = 15
    retries: int = 3
    deterministic: bool = False
    seat_timeout: float | None = None
    llm: Any = None  # personas.llm.factory.LLMSettings, or None

    def game_config(self) -> GameConfig:
        return GameConfig(max_turns_per_round=self.max_turns, decision_retries=self.retries,
                          channels=tuple(self.channels), seat_timeout=self.seat_timeout,
                          deterministic=self.deterministic)

    def key_fields(self, agents_spec: str) -> dict[str, Any]:
        """The settings that define a run (never keys): what ``settings_key`` hashes."""
        d: dict[str, Any] = {
            "agents": agents_spec,
            "channels": list(self.channels),
            "max_turns": self.max_turns,
            "retries": self.retries,
            "deterministic": self.deterministic,
        }
        llm = _llm_fields(self.llm)
        if llm is not None and _spec_uses_llm(agents_spec):
            d["llm"] = llm
        return d


def settings_key(agents_spec: str, settings: RunSettings) -> str:
    """A short stable id of (agents, settings): ``--resume`` matches games on it."""
    blob = json.dumps(settings.key_fields(agents_spec), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _llm_fields(llm: Any) -> dict[str, Any] | None:
    if llm is None:
        return None
    if is_dataclass(llm):
        raw = asdict(llm)
    elif hasattr(llm, "model_dump"):
        raw = llm.model_dump()
    elif isinstance(llm, dict):
        raw = dict(llm)
    else:
        raw = {k: v for k, v in vars(llm).items() if not k.startswith("_")}
    out = {}
    for k, v in raw.items():
        lk = k.lower()
        if lk in _LLM_KEY_EXCLUDE or "secret" in lk or "password" in lk or lk.endswith("api_key"):
            continue
        if k in ("personas", "personas_file") and v:
            out[k] = _file_digest(v)
            continue
        out[k] = v
    return out


def _file_digest(path: Any) -> str:
    try:
        with open(path, "rb") as fh:
            return f"{path}#{hashlib.sha256(fh.read()).hexdigest()[:12]}"
    except OSError:
        return str(path)


def _spec_uses_llm(agents_spec: str) -> bool:
    """Whether any seat of the spec is not a scripted protocol (so LLM settings matter)."""
    try:
        from personas.registry import is_scripted  # type: ignore[attr-defined]
    except ImportError:
        is_scripted = None
    parts = [p.strip() for p in agents_spec.split(",") if p.strip()]
    if is_scripted is not None:
        return not all(is_scripted(p) for p in parts)
    scripted = {"imap", "sdmap", "sd-map", "dsm-welfare", "dsm-private", "dsm_welfare", "dsm_private",
                "passive"}
    return not all(p.lower() in scripted for p in parts)


# ---------------------------------------------------------------------------------------
# Seats
# ---------------------------------------------------------------------------------------
SeatFactory = Callable[[Task], Sequence[Any]]


def make_seats(agents_spec: str | SeatFactory, task: Task, settings: RunSettings):
    """The personas for one game (fresh objects every game: personas keep state)."""
    if callable(agents_spec):
        return list(agents_spec(task))
    from personas.registry import make_personas

    return make_personas(agents_spec, task.num_agents, llm=settings.llm)


def spec_label(agents_spec: str | SeatFactory) -> str:
    if callable(agents_spec):
        return str(getattr(agents_spec, "spec", getattr(agents_spec, "__name__", "custom")))
    return agents_spec


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

    JSON_KEYS = ("game_id", "task_id", "cost_mode", "agents", "status", "coordination",
                 "meetings_scheduled", "meetings_total", "excess_cost", "messages_per_meeting",
                 "fairness", "vps")

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
        )


def summarise(games: Iterable[GameSummary]) -> list[dict[str, Any]]:
    """Table 2 rows, one per (persona spec, cost mode), over completed games.

    ``coordination`` is the mean share of meetings scheduled (0–1; the table shows %),
    ``excess`` and ``fairness`` are means over seats (levels), ``messages_per_meeting``
    is pooled (Σ messages / Σ scheduled participant-meetings) and ``vps`` is the mean
    game VPS.  ``failed`` counts games that could not be played.
    """
    groups: dict[tuple[str, str], list[GameSummary]] = {}
    failed: dict[tuple[str, str], int] = {}
    for g in games:
        k = (g.agents, g.cost_mode)
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


def _game_id(key: str, task: Task, position: int, deterministic: bool, taken: set[str]) -> str:
    if not deterministic:
        return str(uuid.uuid4())
    n = 0
    while True:
        gid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"calbench-run:{key}:{task.task_id}:{position}:{n}"))
        if gid not in taken:
            taken.add(gid)
            return gid
        n += 1


async def run_suite(
    tasks: Sequence[Task],
    agents_spec: str | SeatFactory,
    *,
    store,
    concurrency: int = 1,
    settings: RunSettings | None = None,
    progress: Progress | None = None,
    resume: bool = False,
    existing_game_ids: Iterable[str] = (),
) -> list[GameSummary]:
    """Play every task, save each game to ``store``, return one summary per game played.

    With ``resume`` the tasks already completed under the same settings key are skipped
    (they are not in the returned list) and games left ``running`` are marked ``stopped``.
    """
    settings = settings or RunSettings()
    label = spec_label(agents_spec)
    key = settings_key(label, settings)
    config = settings.game_config()
    tasks = list(tasks)
    if resume:
        for gid in await _maybe_await(store.running_game_ids(key)):
            await _maybe_await(store.mark_status(gid, "stopped"))
        done = set(await _maybe_await(store.completed_task_ids(key)))
        tasks = [t for t in tasks if t.task_id not in done]
    taken = set(existing_game_ids)
    results: list[GameSummary | None] = [None] * len(tasks)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(tasks)):
        queue.put_nowait(i)

    async def play(i: int) -> GameSummary:
        task = tasks[i]
        gid = _game_id(key, task, i, settings.deterministic, taken)
        t0 = time.perf_counter()
        seats = make_seats(agents_spec, task, settings)
        agents_json = [{"type": getattr(s, "kind", None), "model": getattr(s, "model", None),
                        "variant": getattr(s, "variant", None)} for s in seats]
        extra = {"agents_spec": label, "settings_key": key}
        await _maybe_await(store.create_game(
            gid, task_row=task.row, config={**config.to_json(), **extra, "task_id": task.task_id},
            agents=agents_json, settings_key=key, started_at=wall_clock()))
        sink = store.sink(gid, durable=False)
        try:
            prime_oracle(task)
            result = await run_game(task, seats, config, sink, game_id=gid, extra_config=extra)
            await _close_sink(sink)
            await _maybe_await(store.finish_game(gid, result.trace))
            s = GameSummary.from_trace(result.trace, agents=label, game_id=gid)
        except asyncio.CancelledError:
            await _close_sink(sink, quiet=True)
            await _maybe_await(store.mark_status(gid, "stopped"))
            raise
        except Exception as exc:  # a broken persona or engine bug: record it, go on
            await _close_sink(sink, quiet=True)
            err = f"{type(exc).__name__}: {exc}"
            trace = {"game_id": gid, "config": {**config.to_json(), **extra, "task_id": task.task_id},
                     "events": [], "final_state": None, "metrics": None, "started_at": None,
                     "ended_at": wall_clock(), "stopped": False, "task": task.row,
                     "error": err, "error_traceback": traceback.format_exc(limit=8)}
            await _maybe_await(store.finish_game(gid, trace, status="failed"))
            s = GameSummary(gid, task.task_id, task.cost_mode, label, "failed", error=err,
                            meetings_total=len(task.meetings))
        s.seconds = time.perf_counter() - t0
        return s

    async def worker() -> None:
        while True:
            try:
                i = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            s = await play(i)
            results[i] = s
            if progress is not None:
                await _maybe_await(progress(s))

    k = max(1, min(int(concurrency), len(tasks) or 1))
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
    return [r for r in results if r is not None]


async def _close_sink(sink, quiet: bool = False) -> None:
    close = getattr(sink, "aclose", None) or getattr(sink, "flush", None)
    if close is None:
        return
    try:
        await _maybe_await(close())
    except Exception:
        if not quiet:
            raise
