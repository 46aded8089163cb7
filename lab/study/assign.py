"""Who plays what: a participant's games from the study design and their arrival number.

Participants are numbered 0, 1, 2, ... in order of arrival (simulated ones separately).

``latin`` (counterbalanced).  With C conditions and P seat positions, one *cycle* is
``C × P`` participants.  The orders are a balanced Latin square (Williams design: each
condition also follows every other equally often, first-order carry-over) whenever the
cycle can hold one: C rows when C is even; when C is odd a Williams design needs 2C rows
(a cyclic square and its mirror), which a cycle holds when P is even; otherwise the C rows
of a cyclic square (each condition equally often at each position, carry-over not balanced;
``study check`` says which: :func:`order_design`).  Participant ``p`` takes row
``p mod C`` of the square, of the mirror half when ``p div C`` is odd (Williams pair only):
the condition at position ``i`` of the order is ``rows[row][i]``.  Task block ``i`` (the
pool's i-th run of ``games_per_condition`` tasks) is always played at position ``i``, so over a cycle every condition meets every
block equally often.  The seat is ``seats[(p // C + i) mod P]`` at position ``i``: over a
cycle every condition is played from every seat position equally often.

``random``: order, blocks and seats drawn per participant from ``Random(seed, p)``.
``fixed``: everyone plays the conditions in the file's order, block i at position i, at
each condition's own seat.

The practice game, if any, comes first, at the first game's seat, with the first
condition's partners.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

from .model import Study, condition_task, pool_tasks

__all__ = ["Game", "latin_square", "williams_rows", "order_design", "assignment", "cycle_length"]


@dataclass(frozen=True)
class Game:
    """One game of a participant's plan."""

    index: int          # 0 = practice when there is one
    condition: str
    task_ref: str       # how to find the task again: "pool:K" or "practice"
    task_id: str
    seat: int
    practice: bool
    position: int       # position in the condition order (-1 for practice)
    block: int          # task block (-1 for practice)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _zigzag(n: int) -> list[int]:
    """Williams' first row: 0, 1, n-1, 2, n-2, ..."""
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    return first


def latin_square(n: int) -> list[list[int]]:
    """Rows of a Latin square on 0..n-1: Williams (balanced for first-order carryover) for even
    n, cyclic for odd n."""
    if n <= 0:
        return []
    if n % 2 == 0:
        first = _zigzag(n)
        return [[(x + r) % n for x in first] for r in range(n)]
    return [[(r + i) % n for i in range(n)] for r in range(n)]


def williams_rows(n: int) -> list[list[int]]:
    """A Williams design on 0..n-1 (every condition follows every other equally often): the n
    rows of :func:`latin_square`'s balanced square for even n; for odd n, 2n rows (the rows
    built from 0, 1, n-1, 2, n-2, ... and each of them reversed)."""
    if n <= 0 or n % 2 == 0:
        return latin_square(n)
    first = _zigzag(n)
    rows = [[(x + r) % n for x in first] for r in range(n)]
    return rows + [row[::-1] for row in rows]


def order_design(study: Study) -> tuple[str, list[list[int]]]:
    """The condition orders of ``latin`` assignment and their name: ``("williams", rows)`` when the
    cycle can hold a Williams design (C even, or C odd with an even number of seat positions),
    else ``("cyclic", rows)``.  See the module docstring."""
    c = len(study.conditions)
    if c == 1:
        return "single", [[0]]
    if c % 2 == 0 or len(seat_positions(study) or [0]) % 2 == 0:
        return "williams", williams_rows(c)
    return "cyclic", latin_square(c)


def seat_positions(study: Study) -> list[int] | None:
    return list(study.assignment.seats) if study.assignment.seats else None


def cycle_length(study: Study) -> int:
    """Participants per counterbalancing cycle."""
    c = len(study.conditions)
    if study.assignment.method != "latin":
        return c
    return c * len(seat_positions(study) or [0])


def assignment(study: Study, participant_index: int, tasks: list[Any] | None = None) -> list[Game]:
    """The participant's games in playing order (practice first)."""
    if participant_index < 0:
        raise ValueError("participant numbers start at 0")
    if tasks is None:
        tasks = pool_tasks(study)
    conds = study.conditions
    c, g = len(conds), study.tasks.games_per_condition
    seats = seat_positions(study)
    method = study.assignment.method
    p = participant_index
    if method == "latin":
        rows = order_design(study)[1]
        order = rows[p % c + c * ((p // c) % (len(rows) // c))]
        blocks = list(range(c))
        seat_at = [(seats[(p // c + i) % len(seats)] if seats else conds[order[i]].seat) for i in range(c)]
    elif method == "random":
        rng = random.Random(f"{study.assignment.seed}:{p}")
        order = list(range(c))
        rng.shuffle(order)
        blocks = list(range(c))
        rng.shuffle(blocks)
        seat_at = [(rng.choice(seats) if seats else conds[order[i]].seat) for i in range(c)]
    else:
        order = list(range(c))
        blocks = list(range(c))
        seat_at = [(seats[0] if seats else conds[i].seat) for i in range(c)]
    games: list[Game] = []
    if study.tasks.practice:
        from .model import practice_task

        t = condition_task(study, conds[order[0]], practice_task(study))
        games.append(Game(0, conds[order[0]].name, "practice", t.task_id, seat_at[0], True, -1, -1))
    for i in range(c):
        for k in range(g):
            ti = blocks[i] * g + k
            t = condition_task(study, conds[order[i]], tasks[ti])
            games.append(Game(len(games), conds[order[i]].name, f"pool:{ti}", t.task_id, seat_at[i],
                              False, i, blocks[i]))
    return games
