"""Reflection calls (paper F.3): the game-loop hook and reflection-calibrated VPS."""

from __future__ import annotations

import asyncio

from llmkit import load_doubles

from engine.game import GameConfig, run_game
from engine.model import Task
from engine.reflection import ReflectionObservation, clean_deltas, reflection_vps

doubles = load_doubles()

E = lambda i: {"errand_id": i, "cost": 1}  # noqa: E731
TASK = Task.from_row({
    "task_id": "refl", "seed": 1,
    "calendars": [[E(1), None, None, None], [None, E(2), None, None], [None, None, None, E(3)]],
    "meetings": [{"id": 1, "participants": [0, 1]}, {"id": 2, "participants": [1, 2]}],
})
PLAN = {1: 2, 2: 0}


class Reflecting(doubles.PlanPersona):
    """PlanPersona that answers reflection calls from a script: {round: answer}."""

    def __init__(self, answers):
        super().__init__(PLAN)
        self.answers = answers
        self.asked: list[ReflectionObservation] = []

    async def reflect(self, obs):
        self.asked.append(obs)
        ans = self.answers.get(obs.round)
        if isinstance(ans, Exception):
            raise ans
        return ans


async def play(seats, **cfg):
    return await run_game(TASK, seats, GameConfig(deterministic=True, **cfg))


async def test_hook_records_reflection_events_and_skips_personas_without_it():
    s0 = Reflecting({0: {"deltas": {"1": [-3, 3, 0, -3], "2": [3, 0, 0, 0]}, "text": "t0"},
                     1: {"deltas": {"1": [0, 0, 3, 0], "agent 2": [0, 0, 0, 9]}}})
    s1 = Reflecting({})  # answers None: skipped
    s2 = doubles.PlanPersona(PLAN)  # no reflect method: skipped
    res = await play([s0, s1, s2])
    refl = [e for e in res.trace["events"] if e["type"] == "reflection"]
    assert [(e["data"]["round"], e["data"]["agent_id"]) for e in refl] == [(0, 0), (1, 0)]
    # recorded right after each round's resolution
    types = [e["type"] for e in res.trace["events"]]
    assert types[types.index("reflection") - 1] == "resolution"
    assert refl[0]["data"]["deltas"] == {"1": [-3, 3, 0, -3], "2": [3, 0, 0, 0]}
    assert refl[0]["data"]["text"] == "t0" and refl[0]["data"]["phase"] == "RESOLUTION"
    assert refl[1]["data"]["deltas"] == {"1": [0, 0, 3, 0], "2": [0, 0, 0, 3]}  # clamped to ±3
    assert any("clamped" in p for p in refl[1]["data"]["problems"])
    # the observation is the seat's own: its calendar after resolution, the others as targets
    obs = s0.asked[0]
    assert obs.view.seat == 0 and obs.targets == (1, 2) and obs.is_participant
    assert obs.view.calendar[2] is not None  # meeting 1 was placed at slot 2
    assert len(s1.asked) == 2  # asked, answered None


async def test_reflection_vps_by_hand():
    s0 = Reflecting({0: {"deltas": {"1": [-3, 3, 0, -3], "2": [3, 0, 0, 0]}},
                     1: {"deltas": {"1": [0, 0, 3, 0]}}})
    res = await play([s0, Reflecting({}), doubles.PlanPersona(PLAN)])
    assert res.metrics["meetings_scheduled"] == 2
    v = reflection_vps(TASK, res.trace["events"], floor=1.0)
    # round 0, observer 0 -> target 1: three full moves, all toward the truth (free, occupied, free)
    # round 0, observer 0 -> target 2: +3 on a free slot: raw 1, calibrated 0
    # round 1, observer 0 -> target 1: +3 on slot 2, occupied since round 0 put meeting 1 there
    assert v["per_target"][1] == {"target": 1, "raw": 4.0, "calibrated": 4.0, "excess_calibrated": 3.0}
    assert v["per_target"][2] == {"target": 2, "raw": 1.0, "calibrated": 0.0, "excess_calibrated": 0.0}
    assert v["raw_total"] == 5.0 and v["calibrated_total"] == 4.0 and v["excess_calibrated_total"] == 3.0
    assert v["reflections"] == 2 and v["failed"] == 0
    # participant pairs: round 0 (0,1) are both participants; round 1 observer 0 is not
    assert v["participant_pairs_calibrated"] == 3.0
    # the paper's five-slot floor by default
    assert reflection_vps(TASK, res.trace["events"])["excess_calibrated_total"] == 0.0


async def test_a_failing_or_slow_reflection_is_recorded_and_the_game_goes_on():
    class Slow(Reflecting):
        async def reflect(self, obs):
            await asyncio.sleep(5)

    s0 = Reflecting({0: RuntimeError("boom")})
    res = await play([s0, Slow({}), doubles.PlanPersona(PLAN)], seat_timeout=0.2)
    refl = [e["data"] for e in res.trace["events"] if e["type"] == "reflection"]
    assert {(d["agent_id"], d["error"]) for d in refl if d["round"] == 0} == {(0, "seat_error"), (1, "seat_timeout")}
    assert res.metrics["meetings_scheduled"] == 2
    assert reflection_vps(TASK, res.trace["events"])["failed"] == 3  # 2 in round 0, the slow one in round 1


def test_clean_deltas():
    d, problems = clean_deltas({"0": [1] * 4, "1": [1, 2], "x": [], "7": [0] * 4, 2: "no"},
                               seat=0, num_agents=3, num_slots=4)
    assert d == {"1": [1, 2, 0, 0]}
    assert len(problems) == 5
    assert clean_deltas(None, seat=0, num_agents=3, num_slots=4) == ({}, [])
    assert clean_deltas([1, 2], seat=0, num_agents=3, num_slots=4)[0] == {}
