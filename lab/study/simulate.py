"""Simulated participants: scripted humans that run a whole study before any person does
(oTree's bots).  ``calbench study check --dry-run`` plays one counterbalancing cycle of
them into the database, marked ``simulated``.

A simulated participant consents, reads, answers the quiz (the first question wrong on the
first try, so retries are exercised, then right; right at once when its ``max_attempts`` is 1), answers every questionnaire item from a
seeded random generator, plays its seat with the study's ``simulated_protocol`` behind the
same :class:`lab.study.seat.StudySeat` as a person — ``person-like`` (the default:
:class:`personas.person_like.PersonLikePersona`, which sees the seat's events as the
participant's screen does and acts through the same quick actions: proposes a slot free for it
in the meetings it leads, sometimes types the offer, answers cost requests, accepts, sometimes
misses a turn; seeded by the study seed, the participant and the game) or a scripted protocol
persona (``imap``, ``sdmap``, ``dsm-welfare``, ``dsm-private``) — and
fills the belief grid: for each slot it has heard a typed statement about it marks the
direction of that statement (±2), elsewhere 0 (no idea), with seeded ±1 noise on a few
cells.  Everything is reproducible from the study seed and the participant id.
"""

from __future__ import annotations

import random
from typing import Any, Sequence

from personas.person_like import PERSON_LIKE, PersonLikePersona

from .model import Study
from .seat import BeliefRequest

__all__ = ["SimulatedDriver", "simulated_ids"]


def simulated_ids(n: int) -> list[str]:
    return [f"sim-{i + 1:03d}" for i in range(n)]


class SimulatedDriver:
    simulated = True

    def __init__(self, study: Study, participant: str) -> None:
        self.study = study
        self.participant = participant
        self.rng = random.Random(f"{study.study.seed}:{participant}")
        self.code: str | None = None
        self.seen: list[str] = []
        self.person: PersonLikePersona | None = None  # the seat of the game in play, when person-like

    async def consent(self, text: str) -> bool:
        self.seen.append("consent")
        return True

    async def instructions(self, text: str) -> None:
        self.seen.append("instructions")

    async def quiz(self, questions: Sequence[Any]) -> list[dict[str, Any]]:
        self.seen.append("quiz")
        out = []
        for k, q in enumerate(questions):
            attempt = 1
            if k == 0 and len(q.choices) > 1 and (q.max_attempts is None or q.max_attempts > 1):
                out.append({"item": k, "response": (q.answer + 1) % len(q.choices), "attempt": attempt})
                attempt += 1
            out.append({"item": k, "response": q.answer, "attempt": attempt})
        return out

    async def questionnaire(self, q, *, game=None) -> list[dict[str, Any]]:
        self.seen.append(f"questionnaire:{q.id}")
        out = []
        for it in q.items:
            if it.type == "likert":
                v: Any = self.rng.randint(1, it.points)
            elif it.type == "choice":
                v = self.rng.choice(it.choices)
            else:
                v = "" if it.optional else "(simulated answer)"
            out.append({"item": it.id, "response": v})
        return out

    async def beliefs(self, ctx, req: BeliefRequest) -> dict[int, list[int]]:
        heard: dict[int, dict[int, int]] = {t: {} for t in req.targets}
        for m in req.messages:
            p = getattr(m, "payload", None) or {}
            if m.sender not in heard or not isinstance(p, dict):
                continue
            if p.get("kind") == "cost_request":  # IMAP: the sender's own feasible slots
                for k in p.get("slots") or ():
                    if isinstance(k, int):
                        heard[m.sender][k] = 2
            costs = p.get("costs")
            if isinstance(costs, dict):  # IMAP costs: a number = feasible, null = not
                for k, v in costs.items():
                    try:
                        heard[m.sender][int(k)] = 2 if v is not None else -2
                    except (TypeError, ValueError):
                        pass
        grid = {}
        for t in req.targets:
            row = [heard[t].get(k, 0) for k in range(req.num_slots)]
            for k in range(req.num_slots):
                if self.rng.random() < 0.1:
                    row[k] = max(-3, min(3, row[k] + self.rng.choice((-1, 1))))
            grid[t] = row
        return grid

    def human_persona(self, ctx) -> Any:
        policy = self.study.study.simulated_protocol
        if policy == PERSON_LIKE:
            self.person = PersonLikePersona(ctx.game.seat, seed=f"{self.study.study.seed}:{self.participant}:"
                                                               f"{ctx.game.index}")
            return self.person
        from personas.registry import make_personas

        self.person = None
        return make_personas(policy, 1)[0]

    def draft(self):
        return None

    def listeners(self, ctx):
        # the person-like seat reads the game as a participant's screen does: the seat's events
        return (self.person.sink,) if self.person is not None else ()

    async def game_started(self, ctx) -> None:
        self.seen.append(f"game:{ctx.game.index}")

    async def game_over(self, ctx, outcome) -> None:
        pass

    async def thanks(self, code: str, **info: Any) -> None:
        self.code = code
        self.seen.append("thanks")
