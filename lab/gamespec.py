"""One owner of a game's set-up: a :class:`GameSpec` says what a game is, and makes its session.

Every driver — the terminal app, the suite runner and its executors, the table of
``calbench serve``, the study runner — describes the game it is about to play as a
``GameSpec`` and plays it through :meth:`GameSpec.session` / :meth:`GameSpec.play`; this
module is the only place a :class:`lab.session.Session` is made.  What used to be done
by each driver its own way is here once:

* **the task**: :func:`resolve_task` reads one task reference (``canonical:3``,
  ``FILE.jsonl:ID``, ``seed:N`` — a generated scenario, which takes the cost setting);
* **the rules**: :func:`game_config` (the options every driver has) and
  :func:`saved_config` (a saved game's rules, for a resume);
* **the id**: ``engine.gameid.game_id`` (one scheme: random, or derived from a namespace
  and parts; see there for each driver's namespace);
* **the settings key** (what ``--resume`` and a run's claims match games on):
  :func:`settings_key`, a short hash of the fields that define the games (a suite's
  fields: ``lab.runner.RunSettings.key_fields``).  Keys saved by earlier versions
  (``play:...``, ``study:...``, ``serve``) stay as they are and are still read
  (:attr:`Resume.served` knows ``serve``);
* **the agents**: ``GameSpec.agents`` is the parsed ``personas.spec.AgentsSpec`` — each driver
  parses its agents once where it starts (the suite runner: ``lab.runner.agents_of``) and the
  label the game is filed under is derived from it (:attr:`GameSpec.label`);
* **human and remote seats**, recorded in the game's config (``human_seat``,
  ``remote_seats``) and read back by ``engine.seating.human_seats``;
* **a resume**: :func:`load_resume` — the saved game, its task, seats, rules, the LLM
  settings of each seat and the check that their endpoints answer, in one place;
* **closing the LLM pools** a driver opened: :func:`close_pools`.

The session itself (create the saved game, run, file its end) is ``lab/session.py``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from engine.events import LogicalClock
from engine.game import GameConfig
from engine.gameid import game_id
from engine.model import Task
from personas.spec import AgentsSpec

from .session import Saver, Session, SessionOutcome, failure_trace, fail_session, run_session, saved_trace

__all__ = ["GameSpec", "SetupError", "Resume", "game_id", "settings_key", "game_config", "saved_config",
           "resolve_task", "load_resume", "close_pools"]


class SetupError(ValueError):
    """A game that cannot be set up as asked (no such task, game or endpoint); one line."""


# ---------------------------------------------------------------------------------------
# The pieces: settings key, rules, task
# ---------------------------------------------------------------------------------------
def settings_key(fields: Mapping[str, Any]) -> str:
    """A short stable id of the settings that define a set of games (never a secret):
    ``--resume`` and a run's claims match games on it."""
    blob = json.dumps(dict(fields), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def game_config(*, max_turns: int = 15, retries: int = 3, channels: Iterable[str] = ("dm",),
                seat_timeout: float | None = None, deterministic: bool = False,
                nosy: Iterable[int] = ()) -> GameConfig:
    """The rules of a game from the options every driver has (``engine.game.GameConfig``)."""
    return GameConfig(max_turns_per_round=max_turns, decision_retries=retries, channels=tuple(channels),
                      seat_timeout=seat_timeout, deterministic=deterministic, nosy_agent_ids=tuple(nosy))


def saved_config(cfg: Mapping[str, Any], *, deterministic: bool = False) -> GameConfig:
    """The rules a saved game was played with (its ``config``), to continue it."""
    return game_config(max_turns=int(cfg.get("max_turns_per_round", 15)), retries=int(cfg.get("decision_retries", 3)),
                       channels=tuple(cfg.get("channels") or ("dm",)), deterministic=deterministic,
                       nosy=tuple(int(a) for a in cfg.get("nosy_agent_ids") or ()))


def seed_of_ref(ref: str | None) -> int | None:
    """The seed of a ``seed:N`` task reference (a generated scenario), else None."""
    if not ref or not ref.strip().lower().startswith("seed:"):
        return None
    try:
        return int(ref.strip()[5:].strip())
    except ValueError:
        return None


def resolve_task(ref: str | None, *, cost: str | None = None, seed: int | None = None, option: str = "") -> Task:
    """One task: ``seed:N`` is a generated scenario with the cost setting ``cost``; any other
    reference names one task (``canonical:7``, ``FILE.jsonl:ID``); none gives a generated
    scenario of ``seed`` (a random one without).  Raises :class:`SetupError` (one line;
    ``option``, e.g. ``"--task "``, names where the reference came from)."""
    from engine.generate import generate_scenario

    n = seed_of_ref(ref)
    if n is not None:
        return generate_scenario(n, cost_mode=cost) if cost else generate_scenario(n)
    if ref:
        from engine.model import TaskError
        from engine.taskref import TaskRefError, hydrate_labels, resolve_tasks

        try:
            tasks = resolve_tasks(ref)
        except (TaskRefError, TaskError, OSError) as exc:
            raise SetupError(str(exc)) from None
        if len(tasks) != 1:
            raise SetupError(f"{option}{ref!r} names {len(tasks)} tasks; name one (e.g. canonical:7)")
        return hydrate_labels(tasks[0])
    import random

    n = seed if seed is not None else random.randrange(1_000_000)
    return generate_scenario(n, cost_mode=cost) if cost else generate_scenario(n)


async def close_pools(*settings: Any) -> None:
    """Close the LLM connection pools of these settings (each pool once; None and
    settings without a pool are skipped; a pool that fails to close is left)."""
    seen: set[int] = set()
    for s in settings:
        pool = getattr(s, "pool", None)
        if pool is None or id(pool) in seen:
            continue
        seen.add(id(pool))
        try:
            await pool.aclose()
        except Exception:  # closing is best effort: the games are filed already
            pass


def _llm_config(seats: Sequence[Any]) -> dict[str, Any]:
    """``{"llm": [public settings per seat]}`` when a seat is an LLM (for ``--resume``), else ``{}``."""
    if not any(getattr(s, "kind", None) == "llm" for s in seats):
        return {}
    from personas.llm.restore import seats_llm_config

    return seats_llm_config(seats)


# ---------------------------------------------------------------------------------------
# The spec
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GameSpec:
    """What one game is, before its seats are made: task, who sits where, rules, id, key.

    ``agents`` is the parsed agents spec (``personas.spec.AgentsSpec``): each driver parses
    its agents once where it starts and hands the parsed value down; the text the game is
    filed under (``imap,llm:gpt-4o,...``) is its :attr:`label`;
    ``extra_config`` is merged into the trace's ``config`` (public settings only, never a
    key); ``human_seat`` / ``remote_seats`` are recorded there too (``human_seat`` first,
    ``remote_seats`` after the LLM settings); ``logical_clock`` gives the game a logical
    clock (deterministic timestamps).
    """

    task: Task
    agents: AgentsSpec
    config: GameConfig
    game_id: str
    settings_key: str
    extra_config: Mapping[str, Any] = field(default_factory=dict)
    human_seat: int | None = None
    remote_seats: tuple[int, ...] = ()
    logical_clock: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.agents, AgentsSpec):  # parsed once by the driver, never here
            raise TypeError(f"GameSpec.agents is a parsed AgentsSpec, not {type(self.agents).__name__}")

    @property
    def label(self) -> str:
        """The spec label the game is filed under (``saved.agents``)."""
        return self.agents.label

    def session(self, seats: Sequence[Any] = (), **more: Any) -> Session:
        """The session of this game with ``seats`` (none: a game that could not start);
        ``more`` is added to the recorded config last (e.g. the lobby of a table)."""
        extra = {**({"human_seat": self.human_seat} if self.human_seat is not None else {}),
                 **self.extra_config, **_llm_config(seats),
                 **({"remote_seats": sorted(self.remote_seats)} if self.remote_seats else {}), **more}
        return Session(self.task, seats, self.config, self.game_id, self.label, self.settings_key, extra,
                       clock=LogicalClock() if self.logical_clock else None)

    async def play(self, seats: Sequence[Any], *, store: Any = None, stream: bool = True,
                   listeners: Sequence[Any] = (), resume_upto: int | None = None, saver: Saver | None = None,
                   after: Any = None, owner: str = "calbench", more: Mapping[str, Any] | None = None) -> SessionOutcome:
        """Play the game to its end through ``lab.session.run_session`` (see there for each option)."""
        return await run_session(self.session(seats, **(more or {})), store=store, stream=stream,
                                 listeners=listeners, resume_upto=resume_upto, saver=saver, after=after, owner=owner)

    async def fail(self, exc: BaseException, *, store: Any = None, stream: bool = True,
                   saver: Saver | None = None) -> SessionOutcome:
        """File the game as failed before it started (its seats could not be made)."""
        return await fail_session(self.session(), exc, store=store, stream=stream, saver=saver)

    def failed_trace(self, exc: BaseException) -> dict[str, Any]:
        """The saved trace (with its ``saved`` key) of this game failed before it started."""
        session = self.session()
        return saved_trace(session, failure_trace(session, [], exc), "failed")

    def unplayed_trace(self, error: str, **more: Any) -> dict[str, Any]:
        """The saved trace of a game that never started and is filed ``stopped`` (a table's
        lobby that gave up), with ``more`` in its config."""
        session = self.session()
        trace = {"game_id": self.game_id, "config": {**session.config_json(), **more}, "events": [],
                 "stopped": True, "task": self.task.to_row(), "error": error}
        return saved_trace(session, trace, "stopped")


# ---------------------------------------------------------------------------------------
# Resume
# ---------------------------------------------------------------------------------------
@dataclass
class Resume:
    """A saved game to continue: what :func:`load_resume` read and checked."""

    trace: dict[str, Any]
    game_id: str
    task: Task
    agents: list[str]  # one name per seat
    human_seats: list[int]
    config: GameConfig  # the saved rules (turns, retries, channels, nosy seats)
    llm: dict[int, Any]  # seat -> LLMSettings it was saved with (overrides applied)
    upto: int  # keep the events up to this seq (the end of the last complete round)

    @property
    def saved(self) -> dict[str, Any]:
        return self.trace.get("saved") if isinstance(self.trace.get("saved"), dict) else {}

    @property
    def cfg(self) -> dict[str, Any]:
        return self.trace.get("config") if isinstance(self.trace.get("config"), dict) else {}

    @property
    def served(self) -> bool:
        """Played at a ``calbench serve`` table (remote seats); old saves have the key ``serve``."""
        cfg = self.cfg
        return (self.saved.get("settings_key") == "serve" or cfg.get("app") == "calbench-serve"
                or "remote_seats" in cfg)


async def load_resume(store: Any, ref: str, *, llm: Any = None, overrides: Mapping[str, Any] | None = None,
                      check_endpoints: bool = True, check_lease: bool = True, served: bool | None = None,
                      db: str | None = None) -> Resume:
    """Read the saved game ``ref`` (an id or a unique prefix) to continue it; :class:`SetupError` when it cannot be.

    Refused with one line: an unknown or ambiguous id, a completed game, one without a task
    row, one another live process plays (``check_lease``), an LLM seat whose saved settings
    are no longer valid or (``check_endpoints``) whose endpoint does not answer.  Each LLM
    seat gets back the settings it was saved with, laid over ``llm`` (which gives the pool),
    with ``overrides`` (options typed again; default: ``llm``'s ``base_url`` when given) winning.
    ``served``: True — only a game played at a ``calbench serve`` table (remote seats); False —
    never one (only ``serve`` can bring its remote players back); the refusal names the
    command that continues it (with ``--db db`` when given).
    """
    from engine.game import resume_point
    from engine.seating import human_seats
    from engine.taskref import hydrate_labels

    try:
        trace = await store.load_trace(ref)
    except Exception as exc:  # noqa: BLE001 - unknown or ambiguous id: the store says which
        raise SetupError(str(exc).splitlines()[0] if str(exc) else f"no game {ref!r}") from None
    gid = trace["game_id"]
    saved = trace.get("saved") if isinstance(trace.get("saved"), dict) else {}
    if saved.get("status") == "completed":
        raise SetupError(f"game {gid} is already completed; nothing to resume")
    if check_lease:
        from saves.lease import LeaseHeld, game_subject

        held = await store.lease(game_subject(gid))
        if held is not None and held["alive"]:  # another process plays it now: nothing touched
            raise SetupError(f"cannot resume: {LeaseHeld(held['subject'], held, 'game ' + gid[:8])}")
    if not isinstance(trace.get("task"), dict):
        raise SetupError(f"game {gid} has no task row, so it cannot be resumed")
    cfg = trace.get("config") if isinstance(trace.get("config"), dict) else {}
    task = hydrate_labels(Task.from_row(trace["task"]))
    names = [n.strip() for n in str(saved.get("agents") or "").split(",") if n.strip()]
    if len(names) != task.num_agents:
        names = [str(a.get("model") or a.get("type")) if isinstance(a, dict) else str(a)
                 for a in cfg.get("agents") or []]
    out = Resume(trace, gid, task, names, human_seats(cfg, saved.get("agents")), saved_config(cfg), {},
                 resume_point(trace.get("events") or []))
    if served is True and not out.served:
        raise SetupError(f"game {gid[:8]} was not served at a table; continue it with 'calbench-play --resume "
                         f"{gid[:8]}' (or 'calbench run --resume' for a suite)")
    if served is False and out.served:  # its other seats are people at other terminals
        raise SetupError(f"game {gid[:8]} was served to remote players ('calbench serve'); "
                         f"continue it with: calbench serve --resume {gid[:8]}"
                         + (f" --db {db}" if db else "") + " (new join codes are issued)")
    out.llm = await _resume_llm(gid, cfg, llm, overrides, check_endpoints)
    return out


async def endpoints_answer(settings: Sequence[Any], what: str = "") -> None:
    """Every endpoint these LLM settings call answers, else :class:`SetupError` — one line,
    after ``what`` — naming the one that does not (before a resumed game, before a suite)."""
    from personas.llm.restore import check_endpoints
    from personas.llm.settings import LLMConfigError

    try:
        await check_endpoints(list(settings))
    except LLMConfigError as exc:
        raise SetupError(f"{what}{exc}") from None


async def _resume_llm(gid: str, cfg: Mapping[str, Any], llm: Any, overrides: Mapping[str, Any] | None,
                      check: bool) -> dict[int, Any]:
    """The saved LLM settings per seat, and (``check``) every endpoint answering."""
    if not isinstance(cfg.get("llm"), list):
        return {}
    from personas.llm.restore import saved_llm_settings
    from personas.llm.settings import LLMConfigError, LLMSettings

    base = llm if isinstance(llm, LLMSettings) else LLMSettings()
    if overrides is None:  # --base-url given again: the endpoint moved
        overrides = {"base_url": base.base_url} if base.base_url else {}
    try:
        out = saved_llm_settings(cfg, base, overrides=overrides)
    except LLMConfigError as exc:
        raise SetupError(f"cannot resume game {gid[:8]}: {exc}") from None
    if out and check:
        await endpoints_answer(out.values(), f"cannot resume game {gid[:8]}: ")
    return out
