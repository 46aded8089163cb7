"""CalBench as a Python library: play suites, read saved games, step a game as an environment.

A thin layer over the lab (``lab/``): nothing here plays a game its own way, and nothing
here imports Textual.  Three entry points::

    import calbench
    res = calbench.run(tasks="canonical:0-4", agents="imap")   # plays through lab.runplan
    res.records[0]["coordination"]; res.to_pandas()             # one row per game (pandas optional)
    games = calbench.load_games(res.db)                         # what `calbench games` lists
    env = calbench.env(task="canonical:0")                      # PettingZoo AEC (extra: pettingzoo)

The Inspect AI task (extra ``inspect``) is ``calbench/calbench`` (:mod:`calbench.inspect_task`);
``calbench export --inspect`` writes saved games as Inspect logs.  See docs/ecosystem.md.
"""

from __future__ import annotations

from typing import Any

from .api import Games, RunResults, load_games, run

__all__ = ["run", "load_games", "env", "RunResults", "Games"]


def env(task: str = "canonical:0", **kwargs: Any):
    """A PettingZoo AEC environment of one game (:class:`calbench.pettingzoo_env.CalBenchEnv`;
    needs ``pip install 'calbench[pettingzoo]'``).  Keyword arguments are the env's."""
    try:
        from .pettingzoo_env import CalBenchEnv
    except ImportError as exc:
        if exc.name not in ("pettingzoo", "gymnasium", "numpy"):
            raise
        raise ImportError("calbench.env needs PettingZoo: pip install 'calbench[pettingzoo]'") from None
    return CalBenchEnv(task=task, **kwargs)
