"""``calbench.run`` and ``calbench.load_games``: the lab's suite runner and game list, as values.

:func:`run` is what ``calbench run`` does — ``lab.runplan.plan_run`` then
``lab.runplan.play_run`` (the same checks, the same executors, the same database) — and
returns the per-game rows ``calbench run --json`` prints.  :func:`load_games` is what
``calbench games --json`` lists (``lab.archive.list_games``).  Both work where an event loop
already runs (a notebook): the lab's call then runs in a worker thread.  Mistakes raise
``lab.gamespec.SetupError`` (a ``ValueError``) with the command line's one-line message.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence, TypeVar

T = TypeVar("T")

__all__ = ["Records", "RunResults", "Games", "run", "load_games"]


class Records:
    """Rows as plain dicts (``.records``), and as a pandas DataFrame when pandas is installed."""

    records: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.records[i]

    def to_pandas(self):
        """The rows as a ``pandas.DataFrame`` (one row per game); ImportError names the package."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("to_pandas() needs pandas: pip install pandas (records are plain dicts without it)") \
                from None
        return pd.DataFrame.from_records(self.records)


@dataclass
class RunResults(Records):
    """A suite played by :func:`run`.

    ``records``: one dict per game (``lab.summary.GameSummary.to_json``: game_id, task_id,
    cost_mode, agents, status, coordination, meetings_scheduled, meetings_total,
    excess_cost, messages_per_meeting, fairness, vps and the failure counts);
    ``summary``: the Table 2 rows (``lab.summary.summarise``); ``db``: the database the
    games were saved to (``calbench games --db DB`` lists them); ``fidelity``: the DSM
    fidelity played.
    """

    records: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    db: str
    fidelity: str = "ours"
    failed: int = 0
    games: list[Any] = field(default_factory=list, repr=False)  # the lab's GameSummary objects


@dataclass
class Games(Records):
    """Saved games as ``calbench games --json`` lists them (one dict per game, oldest first)."""

    records: list[dict[str, Any]]
    db: str


def _off_the_loop(fn: Callable[[], T]) -> T:
    """``fn()``, in a worker thread when this thread already runs an event loop (a Jupyter
    notebook does): the lab's calls start their own loop (``asyncio.run``), which a running
    loop forbids."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn()
    with ThreadPoolExecutor(1, thread_name_prefix="calbench") as pool:
        return pool.submit(fn).result()


def _llm_settings(llm: Any, base_url: str | None) -> Any:
    """``LLMSettings`` from a settings object, a dict of its fields or None (+ ``base_url``)."""
    if llm is None and base_url is None:
        return None
    from personas.llm.settings import LLMSettings

    if llm is None:
        llm = LLMSettings()
    elif isinstance(llm, dict):
        llm = LLMSettings(**llm)
    if base_url is not None:
        llm = llm.model_copy(update={"base_url": base_url})
    return llm


def run(tasks: str = "canonical", agents: str = "imap", *, db: str | None = None,
        channels: Sequence[str] = ("dm",), max_turns: int = 15, retries: int = 3,
        deterministic: bool = False, concurrency: int | None = None, fidelity: str | None = None,
        llm: Any = None, base_url: str | None = None, resume: bool = False) -> RunResults:
    """Play the tasks ``tasks`` with the seats ``agents`` and save every game, as ``calbench run``.

    ``tasks``: a task reference (``canonical``, ``canonical:0-9``, ``seed:7``,
    ``FILE.jsonl``...); ``agents``: one persona name for every seat or one per seat
    (``imap``, ``imap,llm:gpt-4o-mini,imap,imap,imap``).  ``db``: the save database (default:
    a new file in a temporary folder, kept: its path is ``RunResults.db``).  ``llm``: the
    LLM seats' settings (``personas.llm.settings.LLMSettings`` or a dict of its fields;
    ``base_url`` is a shortcut for one of them).  The other options are ``calbench run``'s.
    """
    from lab.runplan import play_run, plan_run

    if db is None:
        db = os.path.join(tempfile.mkdtemp(prefix="calbench-"), "calbench.db")
    plan = plan_run(tasks, agents, channels=channels, max_turns=max_turns, retries=retries,
                    deterministic=deterministic, concurrency=concurrency)
    settings = _llm_settings(llm, base_url)
    result = _off_the_loop(lambda: play_run(plan, db=db, llm=settings, fidelity=fidelity, resume=resume))
    return RunResults(records=[g.to_json() for g in result.games], summary=result.summary, db=result.db,
                      fidelity=result.fidelity, failed=result.failed, games=list(result.games))


def load_games(db: str, *, status: str | None = None, task: str | None = None) -> Games:
    """The games saved in ``db`` (optionally only those with ``status`` or of task ``task``),
    as ``calbench games --json`` lists them; none when there is no database there."""
    from lab.archive import list_games

    return Games(records=_off_the_loop(lambda: list_games(db, status=status, task=task)), db=db)
