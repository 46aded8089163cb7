"""The canonical suite (SPEC §2): 90 tasks, ids 0–89, recipe fixed in code.

* N=5 agents, S=16 slots, M=5 meetings, p=3 participants per meeting;
* task ``j`` (0–44) is uniform, task ``45+j`` is its varied twin: the same seed and
  structure arguments, so the same calendars, blocked slots, participants and speaker
  orders (costs are drawn last from the seed's stream, see :mod:`engine.generate`), and
  the same labels; only the costs differ (``[1]`` vs ``[1, 10, 100]``);
* task ``j`` uses seed ``j``; its per-agent densities (from {0.6, 0.8, 1.0}) and blocked
  counts (from {2, 4, 6}) are drawn from ``random.Random(<sha256 of "canonical-1:recipe:j">)``;
* difficulty = tertiles of the feasible fraction within each cost cell (uniform 0–44,
  varied 45–89): 15 easy, 15 medium, 15 hard per cell; twins share their fraction and so
  their difficulty.

Changing anything here changes the tasks: bump :data:`SUITE_VERSION` (it is stored in
every row under ``calbench.suite_version`` and so in every trace).

Everything is cached.  The annotated rows are stored beside this module
(``suites/canonical-1.jsonl.zst``, written by ``python -m calbench_devtools.canonical_rows``):
a process reads them (about a millisecond) instead of building the suite (about 0.1
CPU-second).  ``tests/engine/test_suite_stored.py`` rebuilds every row from the recipe and
requires the stored bytes to be the same, so the file can never drift from the code; without
the file (or with one that does not read) the rows are built, with the same result.
Building annotates (runs the oracle on) only the task asked for; the tertiles need every
task's feasible fraction, which is a microsecond-scale dynamic programme, so the whole
suite's structure is built once.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from engine.generate import _structural_task, annotate
from engine.model import Labels, Task, TaskError

__all__ = [
    "SUITE_VERSION",
    "CANONICAL_SIZE",
    "CANONICAL_PAIRS",
    "canonical_recipe",
    "canonical_task",
    "canonical_suite",
    "canonical_task_id",
]

SUITE_VERSION = "canonical-1"
CANONICAL_PAIRS = 45
CANONICAL_SIZE = 2 * CANONICAL_PAIRS
_SHAPE = {"num_agents": 5, "num_slots": 16, "num_meetings": 5, "participants_per_meeting": 3}
_DENSITIES = (0.6, 0.8, 1.0)
_BLOCKED = (2, 4, 6)


def canonical_task_id(i: int) -> str:
    return f"canonical-{i:03d}"


def canonical_recipe(i: int) -> dict[str, Any]:
    """The :func:`engine.generate.generate_scenario` arguments of canonical task ``i``."""
    if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < CANONICAL_SIZE:
        raise TaskError(f"canonical task {i!r} does not exist; ids are 0-{CANONICAL_SIZE - 1}.")
    j = i % CANONICAL_PAIRS
    digest = hashlib.sha256(f"{SUITE_VERSION}:recipe:{j}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    density = [rng.choice(_DENSITIES) for _ in range(_SHAPE["num_agents"])]
    blocked = [rng.choice(_BLOCKED) for _ in range(_SHAPE["num_agents"])]
    return {
        "seed": j,
        **_SHAPE,
        "density": density,
        "blocked": blocked,
        "cost_mode": "uniform" if i < CANONICAL_PAIRS else "varied",
    }


@lru_cache(maxsize=1)
def _structures() -> tuple[tuple[Task, ...], tuple[Any, ...], tuple[str, ...]]:
    """Every task without oracle fields, every feasible fraction, every difficulty."""
    from engine import oracle

    tasks = tuple(
        _structural_task(**canonical_recipe(i), task_id=canonical_task_id(i), suite_version=SUITE_VERSION)
        for i in range(CANONICAL_SIZE)
    )
    fractions = tuple(oracle.feasible_fraction(t) for t in tasks)
    difficulty: list[str] = []
    for lo in (0, CANONICAL_PAIRS):  # one config cell per cost setting
        cell = [f.value for f in fractions[lo:lo + CANONICAL_PAIRS]]
        difficulty.extend(oracle.difficulty_tertiles(cell))
    return tasks, fractions, tuple(difficulty)


def built_row(i: int) -> bytes:
    """Canonical task ``i``'s annotated row as JSON, built from the recipe (the oracle runs)."""
    tasks, fractions, difficulty = _structures()
    return orjson.dumps(annotate(tasks[i], difficulty=difficulty[i], fraction=fractions[i]).to_row())


#: the stored rows of this suite version, one JSON row a line, zstd-compressed
STORED_ROWS = Path(__file__).with_name("suites") / f"{SUITE_VERSION}.jsonl.zst"


@lru_cache(maxsize=1)
def _stored_rows() -> tuple[bytes, ...] | None:
    """The rows of :data:`STORED_ROWS`, or None when the file is absent or does not read as
    this suite (then :func:`built_row` builds them)."""
    try:
        import zstandard

        rows = tuple(zstandard.ZstdDecompressor().decompress(STORED_ROWS.read_bytes()).splitlines())
    except Exception:  # absent, damaged: build instead
        return None
    if len(rows) != CANONICAL_SIZE:
        return None
    return rows


@lru_cache(maxsize=None)
def _annotated(i: int) -> tuple[bytes, Task]:
    """Canonical task ``i``'s annotated row as JSON, and the task read from that JSON."""
    stored = _stored_rows()
    if stored is not None:
        try:
            task = Task.from_row(orjson.loads(stored[i]))
        except Exception:  # a damaged row: build it
            task = None
        if task is not None and task.task_id == canonical_task_id(i):  # another suite's row is never trusted
            return stored[i], task
    blob = built_row(i)
    return blob, Task.from_row(orjson.loads(blob))


def canonical_task(i: int) -> Task:
    """Canonical task ``i`` (0–89), oracle-annotated.  A fresh object on every call."""
    canonical_recipe(i)  # validates i
    blob, task = _annotated(i)
    # Fresh: its own row (read again from the JSON: a deep copy, several times cheaper than
    # copy.deepcopy), label dicts and cache; the calendars and meetings are immutable, so shared.
    return replace(task, row=orjson.loads(blob), labels=Labels(dict(task.labels.errands), dict(task.labels.meetings)),
                   cache={})


def canonical_suite() -> list[Task]:
    """All 90 canonical tasks, in id order."""
    return [canonical_task(i) for i in range(CANONICAL_SIZE)]
