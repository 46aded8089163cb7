"""Every fault the loopback endpoint can produce, and how LLM seats and the game handle it."""

from __future__ import annotations

import time

import pytest
from llmkit import decisions_as_named

from engine.game import GameConfig, run_game
from engine.observe import (
    DecisionObservation,
    SeatBriefing,
    TurnObservation,
    meeting_view,
    seat_view,
)
from personas.llm.factory import make_llm_persona
from calbench_devtools.mock_endpoint import MockLLMServer


def obs_for(task, seat, *, decision=False, attempt=0, rejection=None):
    view = seat_view(seat, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm",))
    m = task.meetings[0]
    mv = meeting_view(m, seat, task.labels)
    if decision:
        return DecisionObservation(view, 0, mv, (), attempt, 3, rejection)
    return TurnObservation(view, 0, 0, 15, mv, True, ())


async def seated(settings, task, seat=None):
    seat = task.meetings[0].speaker_order[0] if seat is None else seat
    p = make_llm_persona("llm:mock", settings)
    view = seat_view(seat, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm",))
    await p.register(SeatBriefing(view, 15, 3, len(task.meetings)))
    return p, seat


async def test_429_with_retry_after_is_waited_out(mock, make_settings, task):
    p, seat = await seated(make_settings(mock, backoff_base=5.0), task)  # backoff would be much longer
    mock.inject("429", retry_after=1)
    t0 = time.perf_counter()
    reply = await p.speak(obs_for(task, seat))
    waited = time.perf_counter() - t0
    assert waited >= 1.0  # at least the server's Retry-After ...
    assert reply.extra["waits"] == [1.0]  # ... and no more: not our 5 s backoff
    assert reply.error is None and reply.actions  # the lead offers its slots
    assert reply.extra["retried"] == ["rate_limit"] and reply.extra["waits"] == [1.0]
    assert p.counters["rate_limited"] == 1 and p.counters["requests"] == 2 and p.counters["infra_failures"] == 0
    assert mock.stats()["by_status"] == {200: 1, 429: 1}


async def test_500_is_retried_with_backoff(mock, make_settings, task):
    p, seat = await seated(make_settings(mock), task)
    mock.inject("500", count=2)
    reply = await p.speak(obs_for(task, seat))
    assert reply.error is None and reply.extra["retried"] == ["server_error", "server_error"]
    assert p.counters["server_errors"] == 2 and mock.stats()["by_status"] == {200: 1, 500: 2}


async def test_a_timeout_is_retried(mock, make_settings, task):
    p, seat = await seated(make_settings(mock, timeout=0.3), task)
    mock.inject("hang", seconds=30)
    reply = await p.speak(obs_for(task, seat))
    assert reply.error is None and reply.extra["retried"] == ["timeout"]
    assert p.counters["timeouts"] == 1
    assert mock.records[0].status == 0 and mock.records[0].ended == 0.0  # the hung request was not waited out


async def test_a_context_length_400_teaches_the_window_and_the_call_is_fitted_again(mock, make_settings, task):
    """A 400 saying the context is exceeded is not retried as is: the window is learned from
    its text, the request is fitted again (here: a smaller reply budget, round 0 has nothing
    to digest) and sent once more."""
    p, seat = await seated(make_settings(mock, retries=4), task)
    mock.inject("context_length")
    reply = await p.speak(obs_for(task, seat))
    assert reply.error is None and reply.actions
    assert mock.stats()["by_status"] == {200: 1, 400: 1}
    assert p.counters["context_length"] == 1 and p.counters["context_overflow"] == 0
    assert p.counters["infra_failures"] == 0 and p.counters["agent_failures"] == 0
    ctx = reply.extra["context"]
    assert p.context_window == 4096 and ctx["window"] == 4096 and ctx["window_source"] == "error"
    assert ctx["reply_tokens"] < 1024


async def test_a_context_that_cannot_hold_the_round_is_a_configuration_failure(make_settings, task):
    """Not even the system prompt and this round fit: ``context_overflow`` (configuration),
    never an infrastructure or agent failure, and later calls fail at once, without a request."""
    from calbench_devtools.mock_endpoint import MockLLMServer

    async with MockLLMServer(context_limit=900) as small:
        p, seat = await seated(make_settings(small, retries=4), task)
        reply = await p.speak(obs_for(task, seat))
        assert reply.error == "context_overflow" and reply.error_detail.startswith("context_overflow:")
        assert "context window of 900 tokens" in reply.error_detail
        assert small.stats()["by_status"] == {400: 1}  # the one that taught the window
        assert p.counters["context_length"] == 1 and p.counters["context_overflow"] == 1
        assert p.counters["config_failures"] == 1
        assert p.counters["infra_failures"] == 0 and p.counters["agent_failures"] == 0
        assert p.context_window == 900 and reply.extra["failure"] == "context_overflow"
        again = await p.decide(obs_for(task, seat, decision=True))
        assert again.error == "context_overflow"
        assert small.stats()["requests"] == 1


async def test_an_auth_error_is_not_retried(mock, make_settings, task):
    p, seat = await seated(make_settings(mock), task)
    mock.inject("unauthorized")
    reply = await p.speak(obs_for(task, seat))
    assert reply.error == "infra_error" and "HTTP 401" in reply.error_detail
    assert mock.stats()["requests"] == 1 and p.counters["http_errors"] == 1


async def test_retries_run_out(mock, make_settings, task):
    p, seat = await seated(make_settings(mock, retries=2), task)
    mock.inject("500", count=3)
    reply = await p.speak(obs_for(task, seat))
    assert reply.error == "infra_error" and reply.extra["failure"] == "server_error"
    assert mock.stats()["requests"] == 3 and p.counters["server_errors"] == 3
    # the next prompt says the turn was lost
    assert "connection problem" in p.prompt(obs_for(task, seat))


@pytest.mark.parametrize("fault, words", [
    ("prose", "no JSON object"),
    ("empty", "the reply was empty"),
    # a reply cut off at max_tokens is now closed and used, or unreadable: tests/llm/test_llm_play.py
])
async def test_unreadable_replies_are_agent_failures(mock, make_settings, task, fault, words):
    p, seat = await seated(make_settings(mock), task)
    mock.inject(fault)
    reply = await p.speak(obs_for(task, seat))
    assert reply.error == "parse_error" and words in reply.error_detail
    assert reply.text is not None and reply.raw is not None
    assert p.counters["parse_errors"] == 1 and p.counters["agent_failures"] == 1 and p.counters["infra_failures"] == 0
    nxt = p.prompt(obs_for(task, seat))
    assert "could not be read" in nxt and nxt.splitlines()[0].startswith("=== Round 1")


async def test_fenced_json_is_read(mock, make_settings, task):
    p, seat = await seated(make_settings(mock), task)
    mock.inject("fenced")
    reply = await p.speak(obs_for(task, seat))
    assert reply.error is None and reply.actions and "```json" in reply.text


async def test_faults_in_a_game(mock, make_settings, task):
    """Infra failure in CHEAP_TALK = a pass; in DECISION = a failed decision; invalid batch = a
    retry with the exact conflict; prose = a parse error.  The game always finishes."""
    m0, m1 = task.meetings[0], task.meetings[1]
    lead0, resp0, other1 = m0.speaker_order[0], m0.speaker_order[1], m1.speaker_order[1]
    settings = make_settings(mock, retries=1)
    # The responder's first turn is lost (a pass).  The unanswered message stays in its
    # thread, so it answers the offer at its next turn and the round still coordinates.
    mock.inject("500", count=2, seat=resp0, phase="CHEAP_TALK")
    mock.inject("invalid_batch", seat=lead0, phase="DECISION")
    # every call of its decision fails: 3 lost calls that use no decision retry (issue 31), then
    # the 4 attempts; 2 requests each (retries=1)
    mock.inject("500", count=14, seat=other1, phase="DECISION")
    mock.inject("prose", seat=other1, phase="CHEAP_TALK")
    seats = [make_llm_persona("llm:mock", settings) for _ in range(task.num_agents)]
    res = await run_game(task, seats, GameConfig(deterministic=True))
    decisions_as_named(res.trace)
    ev = res.trace["events"]
    timeouts = [e["data"] for e in ev if e["type"] == "seat_timeout"]
    assert {(d["phase"], d["agent_id"]) for d in timeouts} == {("CHEAP_TALK", resp0), ("DECISION", other1)}
    assert all(d["error"] == "infra_error" for d in timeouts)
    rejected = [e["data"] for e in ev if e["type"] == "batch_rejected"]
    assert rejected[0]["agent_id"] == lead0
    assert rejected[0]["conflict_description"] == "Expected exactly 1 schedule action, got 2"
    retry_prompt = [e["data"]["prompt_sent"] for e in ev if e["type"] == "decide_start"
                    and e["data"]["agent_id"] == lead0 and e["data"]["round"] == 0][1]
    assert "Expected exactly 1 schedule action, got 2" in retry_prompt and "retry 1 of 3" in retry_prompt
    assert any(e["type"] == "parse_error" and e["data"]["agent_id"] == other1 for e in ev)
    outcomes = [e["data"]["coordinated"] for e in ev if e["type"] == "resolution"]
    assert outcomes == [True, False, True]  # round 0 recovers; round 1 fails on the lost decision
    assert any(e["type"] == "batch_rolled_back" and e["data"]["round"] == 1 for e in ev)
    assert ev[-1]["type"] == "game_end"
    # infrastructure and agent failures are counted apart
    total = {k: sum(p.counters[k] for p in seats) for k in ("infra_failures", "parse_errors", "server_errors")}
    assert total["infra_failures"] == 1 + 7 and total["parse_errors"] == 1 and total["server_errors"] == 2 + 14
    lost = [e["data"] for e in ev if e["type"] == "decide_end" and e["data"]["agent_id"] == other1
            and e["data"]["status"] == "failed"]
    # three re-asks that use no decision retry, then the four attempts — failed calls, not
    # rejected batches (no rule refused one: none was written)
    assert [d["retry_count"] for d in lost] == [0, 0, 0, 0, 1, 2, 3]
    assert not [e for e in ev if e["type"] == "batch_rejected" and e["data"]["agent_id"] == other1]
    assert mock.pending_faults == 0


async def test_a_chaos_game_is_reproducible_and_finishes(make_settings, task):
    outcomes = []
    for _ in range(2):
        async with MockLLMServer(policy="chaos", seed=11, retry_after=0.05) as server:
            settings = make_settings(server)
            seats = [make_llm_persona("llm:mock", settings) for _ in range(task.num_agents)]
            res = await run_game(task, seats, GameConfig(deterministic=True))
            st = server.stats()
        assert res.trace["events"][-1]["type"] == "game_end"
        parse = sum(1 for e in res.trace["events"] if e["type"] == "parse_error")
        assert parse == sum(p.counters["parse_errors"] for p in seats) + sum(
            1 for e in res.trace["events"] if e["type"] == "parse_error" and e["data"]["error"] == "undeliverable")
        assert sum(p.counters["infra_failures"] for p in seats) == 0  # retries absorbed the HTTP faults
        outcomes.append((st["faults"], st["by_status"], res.metrics["meetings_scheduled"]))
    assert outcomes[0] == outcomes[1]
    assert sum(outcomes[0][0].values()) >= 3


async def test_config_error_during_a_turn_is_an_infrastructure_failure(mock, make_settings, task, monkeypatch):
    """A missing key met at the first call (no start-up check in this path) is infra_error →
    seat_timeout, never a parse_error (agent failure); the other seats play over HTTP."""
    from engine.game import GameConfig, run_game
    from personas.llm.factory import LLMSettings, make_llm_persona

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("CALBENCH_MISSING_KEY", raising=False)
    good = make_settings(mock)
    broken = LLMSettings(api_key_env="CALBENCH_MISSING_KEY", reflection=True)  # remote endpoint, no key
    seats = [make_llm_persona("llm:m", broken if a == 0 else good) for a in range(task.num_agents)]
    res = await run_game(task, seats, GameConfig(deterministic=True, max_turns_per_round=2))
    ev = res.trace["events"]
    mine = [e for e in ev if e["type"] in ("seat_timeout", "parse_error") and e["data"]["agent_id"] == 0]
    assert mine and all(e["type"] == "seat_timeout" and e["data"]["error"] == "infra_error" for e in mine)
    assert "CALBENCH_MISSING_KEY" in mine[0]["data"]["detail"]
    assert seats[0].counters["infra_failures"] == len(mine) and seats[0].counters["agent_failures"] == 0
    assert len(mock.records) > 0
    await broken.pool.aclose()
