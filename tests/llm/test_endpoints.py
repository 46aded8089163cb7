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
    await eps.release(e, "rate_limit", "429", retry_after=0.05)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    e = await eps.acquire()  # waits for the rest to end, then gets it
    assert loop.time() - t0 >= 0.04
    await eps.release(e)
