"""Whole games with LLM seats over real HTTP to the loopback mock endpoint."""

from __future__ import annotations

import asyncio
import json

from llmkit import decisions_as_named, load_doubles, small_task

from engine.game import GameConfig, run_game
from engine.oracle import solve
from engine.reflection import reflection_vps
from personas.llm.factory import LLMSettings, make_llm_persona
from calbench_devtools.mock_endpoint import MockLLMServer
from personas.llm.prompts import HEADER_RE

doubles = load_doubles()


def events(trace, *types):
    return [e for e in trace["events"] if e["type"] in types]


async def test_all_llm_game(mock, make_settings, task):
    settings = make_settings(mock, reflection=True)
    seats = [make_llm_persona("llm:mock-model", settings) for _ in range(task.num_agents)]
    res = await run_game(task, seats, GameConfig(deterministic=True))
    decisions_as_named(res.trace)
    m = res.metrics
    assert m["coordination_rate"] == 1.0 and m["excess"] == 0.0
    assert m["total_cheap_talk_messages"] > 0
    assert not events(res.trace, "parse_error", "seat_timeout")
    assert res.trace["config"]["agents"][0] == {"type": "llm", "kind": "llm", "model": "llm:mock-model", "variant": None}

    for reg in events(res.trace, "agent_registered"):
        seat = reg["data"]["agent_id"]
        assert f"You are Agent {seat}" in reg["data"]["system_prompt"]
        assert reg["data"]["system_prompt"] == seats[seat].messages[0]["content"]

    # The thread is append-only: system, then (user, assistant) pairs, and the user
    # messages are exactly the prompts the engine recorded, in order.
    for seat, p in enumerate(seats):
        roles = [x["role"] for x in p.messages]
        assert roles[0] == "system" and roles[1:] == ["user", "assistant"] * ((len(roles) - 1) // 2)
        sent = [e["data"]["prompt_sent"] for e in events(res.trace, "turn_start", "decide_start")
                if e["data"]["agent_id"] == seat]
        assert [x["content"] for x in p.messages if x["role"] == "user"] == sent
        for text in sent:
            h = HEADER_RE.match(text.splitlines()[0])
            assert h and int(h.group("seat")) == seat
        assert not any("Reflection after Round" in x["content"] for x in p.messages)  # outside the thread

    end = events(res.trace, "turn_end")[0]["data"]
    assert end["usage"]["prompt_tokens"] > 0 and end["latency_ms"] >= 0
    assert end["raw_api_response"]["choices"][0]["message"]["role"] == "assistant"
    assert "headers" not in json.dumps(end["raw_api_response"]).lower()
    assert end["extra"]["counters"]["requests"] >= 1 and end["extra"]["attempts"] == 1

    st = mock.stats()
    assert st["by_status"] == {200: st["requests"]}
    assert len({r.conversation for r in mock.records if r.phase != "REFLECTION"}) == task.num_agents
    assert st["prefix_reuse_weighted"] > 0.8  # each request extends the seat's previous one

    refl = events(res.trace, "reflection")
    assert len(refl) == task.num_agents * len(task.meetings)
    assert all(len(row) == task.num_slots for e in refl for row in e["data"]["deltas"].values())
    v = reflection_vps(task, res.trace["events"])
    assert v["reflections"] == len(refl) and v["calibrated_total"] > 0
    assert v["calibrated_total"] <= v["raw_total"]


async def test_mixed_llm_and_plan_personas(mock, make_settings):
    task = small_task(4, num_agents=5, num_slots=10, participants_per_meeting=3)
    plan = dict(solve(task).assignments)
    leads = {m.speaker_order[0] for m in task.meetings}
    settings = make_settings(mock)
    seats = [doubles.PlanPersona(plan) if a in leads else make_llm_persona("llm:mock", settings)
             for a in range(task.num_agents)]
    llm_seats = [a for a in range(task.num_agents) if a not in leads]
    assert any(a in m.participants for m in task.meetings for a in llm_seats)
    res = await run_game(task, seats, GameConfig(deterministic=True))
    decisions_as_named(res.trace)
    assert res.metrics["coordination_rate"] == 1.0
    # the LLM seats followed the announced slots
    for e in events(res.trace, "batch_applied"):
        if e["data"]["agent_id"] in llm_seats and e["data"]["phase"] == "DECISION":
            sched = [a for a in e["data"]["actions"] if a["type"] == "schedule"][0]
            assert sched["slot"] == plan[sched["meeting_id"]]


async def test_mixed_llm_and_scripted_imap(mock, make_settings):
    from personas.scripted.imap import IMAPPersona

    task = small_task(2, num_slots=10)
    settings = make_settings(mock)
    seats = [make_llm_persona("llm:mock", settings) if a % 2 == 0 else IMAPPersona() for a in range(task.num_agents)]
    res = await run_game(task, seats, GameConfig(deterministic=True))
    decisions_as_named(res.trace)
    assert not events(res.trace, "parse_error", "seat_timeout")
    senders = {e["data"]["from_agent"] % 2 for e in events(res.trace, "dm_sent")}
    assert senders == {0, 1}  # both kinds talked
    assert res.metrics["meetings_scheduled"] >= 1


async def test_the_api_key_never_reaches_the_trace(mock, make_settings, monkeypatch, task):
    secret = "sk-calbench-test-5f0c1e9a-only-in-the-environment"
    monkeypatch.setenv("CALBENCH_TEST_KEY", secret)
    settings = make_settings(mock, api_key_env="CALBENCH_TEST_KEY", reflection=True)
    seats = [make_llm_persona("llm:mock", settings) for _ in range(task.num_agents)]
    res = await run_game(task, seats, GameConfig(deterministic=True),
                         extra_config={"llm": [p.describe() for p in seats]})
    # the key was really sent (with every chat request and the one /v1/models look-up)
    assert mock.auth_headers_seen == mock.stats()["requests"] + mock.models_requests > 0
    assert mock.models_requests == 1
    blob = json.dumps(res.trace)
    assert secret not in blob and secret[8:30] not in blob
    assert res.trace["config"]["llm"][0]["api_key_env"] == "CALBENCH_TEST_KEY"
    assert secret not in repr(mock.records) + json.dumps(mock.stats())


async def test_one_concurrency_limit_for_every_game_of_a_run():
    async with MockLLMServer(latency=0.03) as server:
        settings = LLMSettings(base_url=server.base_url, concurrency=2)
        tasks = [small_task(s) for s in (1, 2, 3)]
        games = [run_game(t, [make_llm_persona("llm:mock", settings) for _ in range(t.num_agents)],
                          GameConfig(deterministic=True)) for t in tasks]
        results = await asyncio.gather(*games)
        await settings.pool.aclose()
    assert all(r.metrics["coordination_rate"] == 1.0 for r in results)
    assert settings.pool.max_in_flight == 2 and server.max_in_flight <= 2


async def test_variant_is_recorded(mock, make_settings, task):
    settings = make_settings(mock)
    seats = [make_llm_persona("llm:mock+nosy-highpressure" if a == 1 else "llm:mock", settings)
             for a in range(task.num_agents)]
    res = await run_game(task, seats, GameConfig(deterministic=True))  # nosy seats derived from the variant
    reg = {e["data"]["agent_id"]: e["data"] for e in events(res.trace, "agent_registered")}
    assert reg[1]["variant"] == "nosy-highpressure" and reg[1]["is_nosy_agent"]
    assert not reg[0]["is_nosy_agent"]
    assert events(res.trace, "game_start")[0]["data"]["nosy_agent_ids"] == [1]
    assert res.trace["config"]["nosy_agent_ids"] == [1]
    assert reg[0]["variant"] is None
    assert "press them to say what is there" in reg[1]["system_prompt"]
    assert "press them" not in reg[0]["system_prompt"]
    assert res.trace["config"]["agents"][1]["variant"] == "nosy-highpressure"


async def test_redteam_seat_is_nosy_and_configured_ids_are_kept(mock, make_settings, task):
    settings = make_settings(mock)
    seats = [make_llm_persona("llm:mock+redteam" if a == 2 else "llm:mock", settings)
             for a in range(task.num_agents)]
    res = await run_game(task, seats, GameConfig(deterministic=True, nosy_agent_ids=(0,)))
    reg = {e["data"]["agent_id"]: e["data"] for e in events(res.trace, "agent_registered")}
    assert [a for a in sorted(reg) if reg[a]["is_nosy_agent"]] == [0, 2]
    assert events(res.trace, "game_start")[0]["data"]["nosy_agent_ids"] == [0, 2]
