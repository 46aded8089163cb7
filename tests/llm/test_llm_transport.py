"""The client's transport over real loopback HTTP: streamed replies, the silence limit and the
whole-request deadline, what a retry after a timeout changes, replicas that are all down,
server-requested waits and numbers past 64 bits (issue 22 item 4, issue 24 items 9 and 12)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from personas.llm.client import complete, retry_after_seconds, safe_json
from calbench_devtools.mock_endpoint import MockLLMServer
from personas.llm.settings import LLMSettings

from test_llm_faults import obs_for, seated

MESSAGES = [{"role": "system", "content": "You are Agent 1."},
            {"role": "user", "content": "=== Round 1 of 3 · CHEAP_TALK · Meeting M0 · You are Agent 1 ===\nhello"}]


async def _gone(server: MockLLMServer, index: int = -1, tries: int = 400) -> None:
    """Wait until the mock has seen the client hang up on a slow answer (bounded)."""
    for _ in range(tries):
        rec = server.records[index]
        if rec.client_gone:
            return
        await asyncio.sleep(0.05)


# -- streaming and the silence limit ------------------------------------------------------
async def test_a_slow_model_that_keeps_streaming_outlives_the_timeout_and_succeeds(make_settings, task):
    """slowgen: every four characters take 50 ms, so the whole reply takes several times
    --timeout; streamed, no silence is ever that long, so the first attempt succeeds."""
    async with MockLLMServer(slowgen=0.05) as server:
        p, seat = await seated(make_settings(server, timeout=0.6, retries=0), task)
        reply = await p.speak(obs_for(task, seat))
        assert reply.error is None and reply.actions
        rec = server.records[-1]
        assert rec.stream and rec.status == 200 and not rec.client_gone
        assert rec.ended - rec.started > 0.6  # the answer took longer than the timeout, all of it streamed
        assert reply.extra["attempts"] == 1 and p.counters["timeouts"] == 0
        assert reply.extra["attempt_log"][0]["streamed"] is True
        assert reply.extra["attempt_log"][0]["outcome"] == "ok"


async def test_without_streaming_the_same_slow_model_times_out_and_the_retry_is_not_the_same_request(
        make_settings, task):
    async with MockLLMServer(slowgen=0.05) as server:
        p, seat = await seated(make_settings(server, timeout=0.6, retries=1, stream=False, max_tokens=400), task)
        reply = await p.speak(obs_for(task, seat))
        assert reply.error == "infra_error" and p.counters["timeouts"] == 2
        first, second = reply.extra["attempt_log"]
        assert first["outcome"] == second["outcome"] == "timeout"
        # the retry asks for half the reply and allows more time: never the losing request again
        assert (first["max_tokens"], second["max_tokens"]) == (400, 200)
        assert second["silence_s"] == pytest.approx(first["silence_s"] * 1.5)
        assert [r.max_tokens for r in server.records[-2:]] == [400, 200]


async def test_after_a_silence_the_retry_allows_a_longer_silence(make_settings, task):
    async with MockLLMServer() as server:
        p, seat = await seated(make_settings(server, timeout=0.4, retries=2), task)
        server.inject("hang", seconds=0.6)  # no answer at all for longer than 0.4 s, but less than 0.8 s
        server.inject("hang", seconds=0.6)
        reply = await p.speak(obs_for(task, seat))
        assert reply.error is None
        log = reply.extra["attempt_log"]
        assert [a["outcome"] for a in log] == ["timeout", "ok"]
        assert log[1]["silence_s"] == pytest.approx(0.8)
        assert "no answer for 0.4 s" in log[0]["detail"]


# -- issue 24.9: a slow drip is bounded by --timeout ---------------------------------------
async def test_a_one_byte_per_second_drip_is_cut_off_by_a_3_second_timeout():
    settings = None
    async with MockLLMServer() as server:
        settings = LLMSettings(base_url=server.base_url, timeout=3, retries=0)
        server.inject("drip", seconds=1.0)
        res = await complete(settings.pool.client(settings), MESSAGES, settings, model="m")
        assert res.failure == "timeout" and res.attempts == 1
        assert "no answer for 3 s" in res.failure_detail
        await _gone(server)
        rec = server.records[-1]
        assert rec.fault == "drip" and rec.client_gone and rec.bytes_sent < rec.bytes_total
        assert rec.bytes_sent <= 8  # about three bytes in three seconds: the client did not wait for the body
    await settings.pool.aclose()


async def test_a_stream_that_never_says_anything_is_bounded_by_the_request_deadline():
    async with MockLLMServer() as server:
        # 2 s of silence, not 0.5: on a loaded machine the reply's headers alone once took over
        # 0.5 s, and the test then saw "no answer" instead of "no first token"
        settings = LLMSettings(base_url=server.base_url, timeout=2.0, request_deadline=6.0, retries=0)
        server.inject("trickle", seconds=0.1)  # an empty chunk every 0.1 s: bytes, but no token
        try:
            res = await complete(settings.pool.client(settings), MESSAGES, settings, model="m")
        finally:
            await settings.pool.aclose()
        assert res.failure == "timeout"
        assert "no first token for 2 s" in res.failure_detail
        await _gone(server)
        assert server.records[-1].client_gone


async def test_useful_tokens_dripping_for_ever_stop_at_the_deadline():
    """A model that keeps streaming is never cut off by the silence limit, but the whole
    request is still bounded: here each token takes 0.2 s (< 0.5 s silence) and the reply
    would take far longer than the 1 s deadline."""
    async with MockLLMServer(slowgen=0.2) as server:
        settings = LLMSettings(base_url=server.base_url, timeout=0.5, request_deadline=1.0, retries=1,
                               max_tokens=300)
        try:
            res = await complete(settings.pool.client(settings), MESSAGES, settings, model="m")
        finally:
            await settings.pool.aclose()
        assert res.failure == "timeout" and res.attempts == 2
        first, second = res.attempt_log
        assert "longer than 1 s (the request deadline)" in first["detail"]
        assert (first["max_tokens"], second["max_tokens"]) == (300, 150)
        assert second["deadline_s"] == pytest.approx(1.5)


# -- issue 24.9: every replica down --------------------------------------------------------
def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


async def test_with_every_replica_down_a_call_gives_up_after_its_retry_budget():
    urls = [f"http://127.0.0.1:{_closed_port()}/v1" for _ in range(2)]
    settings = LLMSettings(base_urls=urls, timeout=0.3, retries=3, backoff_base=0.01)
    try:
        results = await asyncio.gather(*(complete(None, MESSAGES, settings, model="m") for _ in range(3)))
    finally:
        await settings.pool.aclose()
    for res in results:
        assert res.failure == "connection" and res.attempts == 4
        assert len(res.attempt_log) == 4
    details = [a.get("detail", "") for r in results for a in r.attempt_log]
    assert any("every endpoint of 2 is resting" in d for d in details)


def test_an_empty_element_in_base_url_is_refused(cli):
    rc, _out, err = cli("run", "--tasks", "canonical:0", "--agents", "imap,llm:m,imap,imap,imap",
                        "--base-url", "http://127.0.0.1:1/v1,,http://127.0.0.1:2/v1")
    assert rc == 2 and "empty element" in err and "Traceback" not in err
    with pytest.raises(ValueError, match="empty"):
        LLMSettings(base_urls=["http://127.0.0.1:1/v1", " "])


@pytest.mark.parametrize("headers, expected", [
    ({"retry-after-ms": "inf"}, 86400.0),
    ({"retry-after": "inf"}, 86400.0),
    ({"retry-after": "1e400"}, 86400.0),
    ({"retry-after-ms": "nan"}, None),
    ({"retry-after": "-inf"}, 0.0),
    ({"retry-after-ms": "1500"}, 1.5),
])
def test_server_requested_waits_are_finite(headers, expected):
    assert retry_after_seconds(headers) == expected


async def test_an_infinite_retry_after_is_capped_by_retry_after_max(make_settings, task):
    async with MockLLMServer() as server:
        p, seat = await seated(make_settings(server, retry_after_max=0.05), task)
        server.inject("429", retry_after=float("inf"))
        reply = await p.speak(obs_for(task, seat))
        assert reply.error is None and reply.extra["waits"] == [0.05]


# -- issue 24.12: integers past 64 bits ------------------------------------------------------
def test_safe_json_drops_integers_past_64_bits():
    assert safe_json({"a": 2**63 - 1, "b": 2**63, "c": [-(2**63), -(2**63) - 1], "d": float("inf")}) == {
        "a": 2**63 - 1, "b": None, "c": [-(2**63), None], "d": None}


@pytest.mark.parametrize("stream", [True, False])
async def test_usage_past_64_bits_neither_crashes_nor_reaches_the_trace(make_settings, task, stream):
    import orjson

    async with MockLLMServer() as server:
        p, seat = await seated(make_settings(server, stream=stream), task)
        server.inject("bigint")
        reply = await p.speak(obs_for(task, seat))
        assert reply.error is None and reply.actions
        assert reply.usage.get("prompt_tokens") is None and reply.usage.get("completion_tokens") is None
        orjson.dumps({"usage": reply.usage, "raw": reply.raw, "extra": reply.extra})  # what the store writes


# -- the same through `calbench run` ---------------------------------------------------------------
def test_calbench_run_plays_a_slow_streaming_model_and_drops_a_dripping_endpoint(cli, threaded_mock, tmp_path):
    """Over real loopback HTTP from the command line: with --timeout 0.5 a model that takes
    longer than that for every reply but streams all along plays the whole game without a
    single failure; then one request that drips one byte a second is dropped after --timeout 3
    (an infrastructure failure: exit 1), and the game still completes."""
    url, server = threaded_mock(slowgen=0.02)
    db = str(tmp_path / "slow.db")
    rc, out, err = cli("run", "--tasks", "canonical:0", "--agents", "imap,llm:slow,imap,imap,imap", "--base-url", url,
                       "--timeout", "0.5", "--llm-retries", "0", "--max-turns", "1", "--db", db, "--json")
    assert rc == 0, err
    (game,) = __import__("json").loads(out)["games"]
    assert game["status"] == "completed" and game["infra_failures"] == 0
    long = [r for r in server.records if r.stream and r.ended - r.started > 0.5]
    assert long and all(not r.client_gone for r in server.records)

    url2, drip = threaded_mock()
    drip.inject("drip", seconds=1.0, seat=1)
    rc, out, err = cli("run", "--tasks", "canonical:0", "--agents", "imap,llm:slow,imap,imap,imap", "--base-url", url2,
                       "--timeout", "3", "--llm-retries", "0", "--max-turns", "2", "--db", db, "--json")
    assert rc == 1 and "infrastructure failures" in err
    (game,) = __import__("json").loads(out)["games"]
    assert game["status"] == "completed" and game["infra_failures"] == 1
    rec = next(r for r in drip.records if r.fault == "drip")
    assert rec.bytes_sent < rec.bytes_total  # the client did not wait for the 300-odd bytes


async def test_a_long_prompt_read_slowly_by_a_local_server_is_not_silence(make_settings, task):
    """A loopback endpoint is asked for llama.cpp's prompt-reading progress events
    (return_progress): reading the prompt takes 1.5 s, three times the silence limit, but
    a progress event every 0.1 s keeps the request alive; the first attempt succeeds."""
    async with MockLLMServer(slowprompt=1.5) as server:
        p, seat = await seated(make_settings(server, timeout=0.5, retries=0), task)
        reply = await p.speak(obs_for(task, seat))
        assert reply.error is None and reply.extra["attempts"] == 1
        rec = server.records[-1]
        assert rec.progress and rec.stream and rec.ended - rec.started > 1.5
        assert reply.extra["attempt_log"][0]["first_token_ms"] > 1500
