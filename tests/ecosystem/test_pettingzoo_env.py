"""calbench.env(): a CalBench game as a PettingZoo AEC environment (issue 32, item 4).

The environment plays the engine's game loop (no copy of the rules): IMAP policies in every
seat give what ``calbench run --agents imap`` gives, an observation is the seat's view (the
engine's privacy boundary) and PettingZoo's own API test passes.
"""

from __future__ import annotations

import json
from importlib.util import find_spec

import pytest

import calbench

# Skipped without the extra; PettingZoo and Gymnasium are imported by the tests, not at collection.
pytestmark = [pytest.mark.extras, pytest.mark.skipif(find_spec("pettingzoo") is None,
                                                     reason="PettingZoo is not installed (pip install 'calbench[pettingzoo]')")]


def _play(env, policies):
    env.reset()
    for agent in env.agent_iter():
        _obs, _rew, term, trunc, _info = env.last()
        env.step(None if term or trunc else policies[agent](env, agent))
    return env.result.trace


def scripted_policy(protocol: str):
    from calbench.pettingzoo_env import scripted_policy as policy

    return policy(protocol)


def test_pettingzoo_api_test_passes():
    from pettingzoo.test import api_test

    env = calbench.env(task="canonical:0")
    try:
        api_test(env, num_cycles=200)
    finally:
        env.close()


def test_imap_policies_through_the_env_reproduce_calbench_run(tmp_path):
    run = calbench.run(tasks="canonical:0-9", agents="imap", db=str(tmp_path / "run.db"))
    assert len(run.records) == 10 and all(r["status"] == "completed" for r in run.records)
    from lab.archive import export_game

    for i, rec in enumerate(run.records):
        saved = json.loads(export_game(run.db, rec["game_id"]).text)
        env = calbench.env(task=f"canonical:{i}")
        try:
            trace = _play(env, {a: scripted_policy("imap") for a in env.possible_agents})
        finally:
            env.close()
        assert trace["task"]["task_id"] == rec["task_id"]
        for key in ("coordination_rate", "scheduled_meeting_ids", "realized_cost", "excess", "fairness",
                    "total_cheap_talk_messages", "vps"):
            assert trace["metrics"][key] == saved["metrics"][key], (i, key)
        assert trace["final_state"]["calendars"] == saved["final_state"]["calendars"], i
        moves = [(e["data"]["agent_id"], e["data"]["actions"]) for e in trace["events"] if e["type"] == "batch_applied"]
        saved_moves = [(e["data"]["agent_id"], e["data"]["actions"]) for e in saved["events"]
                       if e["type"] == "batch_applied"]
        assert moves == saved_moves, i


def test_an_observation_is_the_seats_own_view_and_the_mask_is_legal():
    import numpy as np

    env = calbench.env(task="canonical:0")
    try:
        env.reset()
        agent = env.agent_selection
        seat = int(agent.split("_")[1])
        obs = env.observe(agent)
        info = env.infos[agent]
        engine_obs = info["observation"]
        assert engine_obs.view.seat == seat
        # the calendar in the structured part and in words is this seat's, from the engine's view
        assert engine_obs.view.render() in obs["text"]
        cal = env.task.calendars[seat]
        assert [int(c) for c in obs["observation"]["calendar"]] == [
            0 if it is None else 3 if not hasattr(it, "blocked") else 2 if it.blocked else 1 for it in cal]
        # another seat's private errand labels never appear in this seat's text
        others = {lab.text for s in range(env.task.num_agents) if s != seat
                  for lab in env.task.labels.for_seat(s, set()).errands.values()} - {
                     lab.text for lab in env.task.labels.for_seat(seat, set()).errands.values()}
        assert others and not any(t in obs["text"] for t in others)
        assert env.observation_space(agent).contains(obs)
        # CHEAP_TALK menu: 0 (say nothing) and the slots this seat can hold
        assert obs["observation"]["phase"] == 1 and obs["action_mask"][0] == 1
        costs = obs["observation"]["slot_cost"]
        assert list(obs["action_mask"][1:]) == [int(c >= 0) for c in costs]
        # an illegal index is refused in one line, nothing is played
        bad = int(np.flatnonzero(obs["action_mask"] == 0)[0])
        with pytest.raises(ValueError, match="not legal"):
            env.step(bad)
    finally:
        env.close()


def test_rewards_add_up_to_minus_the_game_cost():
    env = calbench.env(task="canonical:3")
    try:
        env.reset()
        total = {a: 0.0 for a in env.possible_agents}
        for agent in env.agent_iter():
            _obs, _rew, term, trunc, _info = env.last()
            env.step(None if term or trunc else scripted_policy_for(env, agent))
            for a, r in env.rewards.items():
                total[a] += r
        per_seat = env.result.trace["metrics"]["per_seat"]
        assert any(row["cost_shown"] for row in per_seat)  # a game where somebody paid something
        for row in per_seat:
            assert total[f"seat_{row['agent_id']}"] == -row["cost_shown"]
    finally:
        env.close()


_POLICIES: dict = {}


def scripted_policy_for(env, agent):
    key = (id(env), agent)
    if key not in _POLICIES:
        _POLICIES[key] = scripted_policy("imap")
    return _POLICIES[key](env, agent)


def test_scripted_seats_beside_controlled_ones_and_menu_play():
    """Two seats through the env (menu actions), three scripted IMAP seats: the game ends, is scored."""
    import numpy as np

    env = calbench.env(task="canonical:1", seats=[0, 1], others="imap")
    try:
        assert env.possible_agents == ["seat_0", "seat_1"]
        env.reset()
        for agent in env.agent_iter():
            obs, _rew, term, trunc, _info = env.last()
            if term or trunc:
                env.step(None)
                continue
            legal = np.flatnonzero(obs["action_mask"])
            env.step(int(legal[-1]))  # the highest legal entry: a proposal, a move, a batch
        trace = env.result.trace
        assert [a["type"] for a in trace["config"]["agents"]] == ["env", "env", "imap", "imap", "imap"]
        assert trace["metrics"]["meetings_total"] == len(env.task.meetings)
    finally:
        env.close()


def test_step_before_reset_says_to_reset_first():
    """``env.step()`` before ``env.reset()`` raised a bare AttributeError (found by hand)."""
    import calbench

    env = calbench.env(task="canonical:0")
    try:
        with pytest.raises(RuntimeError, match=r"call env.reset\(\) before env.step\(\)"):
            env.step(0)
    finally:
        env.close()
