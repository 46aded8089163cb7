"""A cancel (ctrl+q, a stopped run) that meets a reply chunk in the same loop turn is not lost.

On Python 3.11, ``asyncio.wait_for`` returns the awaited result when the result and the
cancel land together, so the cancelled game played on and ``calbench-play``'s ctrl+q waited
for it forever (tests/tui/test_llm_seats.py::test_a_failing_llm_seat_is_shown_as_failed
hung after other app tests).  The LLM client's bounded read must let the cancel win.
"""

from __future__ import annotations

import asyncio

import pytest

from personas.llm.client import StreamTimeout, _bounded


async def test_a_cancel_that_lands_with_the_chunk_stops_the_reader():
    loop = asyncio.get_running_loop()
    chunk = loop.create_future()
    after: list[str] = []

    async def reader() -> None:
        got = await _bounded(chunk, 30.0, "silence", 30.0, "the next chunk")
        after.append(got)  # the game would play on from here
        await asyncio.sleep(3600)

    task = asyncio.create_task(reader())
    await asyncio.sleep(0)  # the reader now waits for its chunk
    chunk.set_result("data")
    task.cancel()  # in the same loop turn
    await asyncio.wait([task], timeout=10)  # a bound on a broken reader, not a speed check
    try:
        assert after == [], "the cancelled reader went on with the chunk"
        assert task.cancelled()
    finally:
        task.cancel()


async def test_silence_past_the_limit_is_a_stream_timeout():
    never = asyncio.get_running_loop().create_future()
    with pytest.raises(StreamTimeout):
        await _bounded(never, 0.01, "silence", 0.01, "the next chunk")


async def test_a_cancel_that_lands_as_an_endpoint_frees_takes_no_endpoint():
    """A request waiting for a busy endpoint (``wait_max`` set) is cancelled in the loop turn
    the endpoint is released: the cancel wins and the endpoint is not left held."""
    from personas.llm.endpoints import EndpointSet

    pool = EndpointSet(["http://127.0.0.1:9/v1"], 1)
    busy = await pool.acquire()
    got: list[object] = []

    async def waiter() -> None:
        got.append(await pool.acquire(wait_max=600))
        await asyncio.sleep(3600)  # the request would go on from here

    task = asyncio.create_task(waiter())
    for _ in range(5):
        await asyncio.sleep(0)  # the waiter now waits on the pool's condition
    await pool.release(busy)
    task.cancel()  # in the same loop turn
    await asyncio.wait([task], timeout=10)
    try:
        assert got == [], "the cancelled request went on with an endpoint"
        assert task.cancelled()
        assert pool.endpoints[0].in_flight == 0
    finally:
        task.cancel()
