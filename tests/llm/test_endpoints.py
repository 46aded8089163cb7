"""Several endpoints of one model: spread with a per-endpoint limit, failing ones rested then retried."""

from __future__ import annotations

import asyncio
import logging

import pytest

from personas.llm.endpoints import EndpointSet, split_urls


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_split_urls():
    assert split_urls(" http://a/v1, http://b/v1,,http://a/v1 ") == ["http://a/v1", "http://b/v1"]
    assert split_urls(None) == [] and split_urls(["x", "y"]) == ["x", "y"]
    with pytest.raises(ValueError):
        EndpointSet([], 2)


async def test_requests_spread_and_never_exceed_the_limit():
    eps = EndpointSet(["a", "b", "c"], limit=2)
    peak = {u: 0 for u in eps.urls}

    async def call():
        async with eps.use() as lease:
            ep = lease.endpoint
            peak[ep.url] = max(peak[ep.url], ep.in_flight)
            await asyncio.sleep(0.01)

    await asyncio.gather(*[call() for _ in range(30)])
    stats = {s["url"]: s for s in eps.stats()}
    assert sorted(s["requests"] for s in stats.values()) == [10, 10, 10]
    assert max(peak.values()) == 2 and all(s["in_flight"] == 0 for s in stats.values())


async def test_a_failing_endpoint_is_rested_logged_and_used_again(caplog):
    clock = Clock()
    eps = EndpointSet(["good", "bad"], limit=4, rest_base=5, rest_max=60, clock=clock)
    with caplog.at_level(logging.WARNING, logger="calbench.llm.endpoints"):
        ep = await eps.acquire()
        while ep.url != "bad":
            await eps.release(ep)
            ep = await eps.acquire()
        await eps.release(ep, "connection", "connection: refused")
    assert "bad" in caplog.text and "rested for 5.0 s" in caplog.text
    # while it rests, everything goes to the other endpoint
    for _ in range(5):
        lease = await eps.acquire()
        assert lease.url == "good"
        await eps.release(lease)
    # a second failure in a row rests it twice as long; then it comes back
    clock.t += 5.1
    got = []
    for _ in range(4):
        e = await eps.acquire()
        got.append(e.url)
    assert "bad" in got  # rested, not dropped
    bad = next(e for e in eps.endpoints if e.url == "bad")
    await eps.release(bad, "server_error", "HTTP 503")
    assert bad.rested_until == pytest.approx(clock.t + 10)
    for e in eps.endpoints:
        while e.in_flight:
            await eps.release(e)
    clock.t += 10.1
    e = await eps.acquire()
    while e.url != "bad":
        await eps.release(e)
        e = await eps.acquire()
    await eps.release(e)  # a success clears the streak
    assert bad.streak == 0 and bad.failures == 2 and bad.rests == 2


async def test_retry_after_sets_the_rest_and_all_resting_means_waiting_not_failing():
    eps = EndpointSet(["only"], limit=1, rest_base=100)
    e = await eps.acquire()
    loop = asyncio.get_running_loop()
    t0 = loop.time()  # before the rest starts: a slow machine between release and acquire cannot end it unseen
    await eps.release(e, "rate_limit", "429", retry_after=0.05)
    e = await eps.acquire()  # waits for the rest to end, then gets it
    assert loop.time() - t0 >= 0.04
    await eps.release(e)


# -- whole games over real HTTP to several loopback mock endpoints ------------------------------
async def test_a_game_over_three_replicas_one_down_one_failing(task, monkeypatch, caplog):
    from engine.game import GameConfig, run_game
    from personas.llm.factory import LLMSettings, make_llm_persona
    from calbench_devtools.mock_endpoint import MockLLMServer

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    a = await MockLLMServer(latency=0.01).start()  # a game lasts several rests
    b = await MockLLMServer(latency=0.01).start()
    down = await MockLLMServer().start()
    down_url = down.base_url
    await down.stop()  # nothing listens there any more: connection refused
    b.inject("500", count=2)  # b answers its first two requests with a 500
    settings = LLMSettings(base_urls=[a.base_url, b.base_url, down_url], endpoint_concurrency=2, concurrency=8,
                           backoff_base=0.01)
    try:
        pool = settings.pool
        # the replicas rest only briefly in a test
        eps = pool.endpoint_set(settings)
        eps.rest_base, eps.rest_max = 0.02, 0.05
        with caplog.at_level(logging.WARNING, logger="calbench.llm.endpoints"):
            seats = [make_llm_persona("llm:mock-model", settings) for _ in range(task.num_agents)]
            res = await run_game(task, seats, GameConfig(deterministic=True))
        assert res.metrics["coordination_rate"] == 1.0
        assert not [e for e in res.trace["events"] if e["type"] in ("parse_error", "seat_timeout")]
        stats = {s["url"]: s for s in pool.endpoint_stats()}
        assert len(a.records) > 0 and len(b.records) > 2  # both live replicas served the game
        assert stats[down_url]["failures"] >= 1 and stats[down_url]["rests"] >= 1  # tried, failed, rested
        assert stats[down_url]["requests"] >= 2  # and tried again after its rest: never dropped
        assert stats[b.base_url]["failures"] == 2 and stats[b.base_url]["rests"] == 2
        assert down_url in caplog.text and b.base_url in caplog.text  # every rest is said, not silent
        assert sum(s["in_flight"] for s in stats.values()) == 0
        assert a.max_in_flight <= 2 and b.max_in_flight <= 2
        # recorded in the trace's settings: the replicas, never a key
        assert res.trace["config"]["agents"][0]["model"] == "llm:mock-model"
    finally:
        await settings.pool.aclose()
        await a.stop()
        await b.stop()


def test_command_line_takes_a_comma_list_of_replicas(tmp_path, capsys, monkeypatch):
    from calbench_cli.cli import main

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    rc = main(["run", "--tasks", "canonical:0", "--agents", "llm:m", "--db", str(tmp_path / "x.db"),
               "--base-url", "http://127.0.0.1:9/v1,not-a-url", "--max-turns", "1"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "not-a-url" in err
    rc = main(["run", "--tasks", "canonical:0", "--agents", "llm:m", "--db", str(tmp_path / "x.db"),
               "--base-url", "http://127.0.0.1:9/v1,http://127.0.0.1:10/v1", "--endpoint-concurrency", "0"])
    assert rc == 2 and "--endpoint-concurrency must be at least 1" in capsys.readouterr().err


def test_personas_file_names_replicas_and_a_seat_of_its_own(tmp_path):
    from personas.llm.factory import LLMSettings, load_personas_file

    f = tmp_path / "p.toml"
    f.write_text('[defaults]\nbase_urls = ["http://r1:8000/v1", "http://r2:8000/v1"]\nendpoint_concurrency = 3\n'
                 '[seats.0]\nmodel = "m"\n[seats.1]\nmodel = "m"\nbase_url = "http://other:9000/v1"\n')
    seats = load_personas_file(f, LLMSettings())
    eps = seats[0].pool.endpoint_set(seats[0])
    assert eps.urls == ["http://r1:8000/v1", "http://r2:8000/v1"] and eps.endpoints[0].limit == 3
    assert seats[0].resolved_base_url() == "http://r1:8000/v1"
    assert seats[1].pool.endpoint_set(seats[1]) is None and seats[1].resolved_base_url() == "http://other:9000/v1"
