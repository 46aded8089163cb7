"""Several endpoints serving one model (replicas): spread the calls, rest the failing ones.

A lab serving its own model often runs several replicas (vLLM servers on several GPUs or
nodes), each with its own base URL.  An LLM seat can name them all (``base_urls`` in
its settings, ``--base-url URL1,URL2,...`` on the command line); every request then goes
through one :class:`EndpointSet` shared by the run:

* **spread**: a request goes to the endpoint with the fewest requests in flight (ties:
  the one that has served fewest so far), never above ``limit`` in flight per endpoint;
  when every endpoint is at its limit, the request waits for a slot.  A retry avoids the
  endpoints that already failed it, while another one is free.
* **rest, then retry**: an endpoint whose request fails with a retryable kind
  (connection refused, timeout, 5xx, 429) is *rested*: it gets no new request for a
  while — its ``Retry-After`` when it sent one, else ``rest_base · 2^(k-1)`` seconds for
  its k-th failure in a row, capped at ``rest_max``.  The failed request is retried by
  the client's retry loop and goes to another endpoint at once.  When the rest is over
  the endpoint gets one probe request at a time (the next request it is free for)
  until one succeeds, which clears its streak; it is never dropped.
  When every endpoint is resting, requests wait for the first to come back, so a
  blip on all replicas costs time, not games — but one attempt waits at most the
  seat's silence limit (``timeout``); then that attempt fails (``connection``: every
  replica resting) and counts against the call's retries, so with every replica down a
  call gives up after its retry budget with an infrastructure failure.
* **said, not silent**: every rest is logged (``logging`` warning naming the endpoint,
  the failure and the pause), and :meth:`EndpointSet.stats` gives per-endpoint
  requests, failures, rests and the last error (the run can print them).
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Callable, Collection, Sequence

__all__ = ["EndpointSet", "EndpointState", "Lease", "REST_KINDS", "split_urls", "AllResting"]

log = logging.getLogger("calbench.llm.endpoints")

#: failures that rest the endpoint (the request itself is retried elsewhere)
REST_KINDS = frozenset({"rate_limit", "server_error", "timeout", "connection"})


class AllResting(Exception):
    """No endpoint of the set could take a request within the caller's wait (one sentence)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.message = detail


def split_urls(raw: str | Sequence[str] | None) -> list[str]:
    """``"u1,u2"`` or ``["u1", "u2"]`` -> ``["u1", "u2"]`` (blanks and repeats dropped, order kept)."""
    if raw is None:
        return []
    parts = raw.split(",") if isinstance(raw, str) else list(raw)
    out: list[str] = []
    for p in parts:
        p = str(p).strip()
        if p and p not in out:
            out.append(p)
    return out


@dataclass
class EndpointState:
    url: str
    limit: int
    in_flight: int = 0
    requests: int = 0
    failures: int = 0
    streak: int = 0  # failures in a row
    rests: int = 0
    rested_until: float = 0.0
    last_error: str | None = None

    def public(self) -> dict[str, Any]:
        return {"url": self.url, "limit": self.limit, "in_flight": self.in_flight, "requests": self.requests,
                "failures": self.failures, "rests": self.rests, "last_error": self.last_error}


@dataclass
class Lease:
    """One request's hold on an endpoint; set ``failure`` (and ``retry_after``) before it ends."""

    endpoint: EndpointState
    failure: str | None = None
    detail: str | None = None
    retry_after: float | None = None

    @property
    def url(self) -> str:
        return self.endpoint.url


class EndpointSet:
    """The replicas of one model, shared by every seat and game of a run (one event loop)."""

    def __init__(self, urls: Sequence[str], limit: int, *, rest_base: float = 2.0, rest_max: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        urls = split_urls(urls)
        if not urls:
            raise ValueError("an endpoint set needs at least one base URL")
        self.endpoints = [EndpointState(u, max(1, int(limit))) for u in urls]
        self.rest_base = rest_base
        self.rest_max = rest_max
        self.clock = clock
        self._cond: asyncio.Condition | None = None

    @property
    def urls(self) -> list[str]:
        return [e.url for e in self.endpoints]

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    def healthy(self) -> list[EndpointState]:
        now = self.clock()
        return [e for e in self.endpoints if e.rested_until <= now]

    async def acquire(self, avoid: Collection[str] = (), wait_max: float | None = None) -> EndpointState:
        """An endpoint for one request; ``avoid``: URLs that already failed this request
        (used only when no other endpoint is free).  ``wait_max``: the longest wait for one
        while every endpoint rests or is busy; then :class:`AllResting` (the caller counts it
        as a failed attempt, so a call gives up after its retry budget instead of waiting for
        ever when every replica is down)."""
        if wait_max is None:
            return await self._acquire(avoid)
        try:
            # asyncio.timeout, not wait_for: a cancel that lands as an endpoint frees must win
            async with asyncio.timeout(max(0.0, wait_max)):
                return await self._acquire(avoid)
        except TimeoutError:
            errors = "; ".join(f"{e.url}: {e.last_error}" for e in self.endpoints if e.last_error) or "none recorded"
            raise AllResting(f"every endpoint of {len(self.endpoints)} is resting after failures or busy, and none "
                             f"came back within {wait_max:g} s (last errors: {errors})"[:500]) from None

    async def _acquire(self, avoid: Collection[str] = ()) -> EndpointState:
        cond = self._condition()
        async with cond:
            while True:
                now = self.clock()
                # back from a rest, an endpoint gets one probe request at a time until one succeeds
                free = [e for e in self.endpoints
                        if e.rested_until <= now and e.in_flight < (1 if e.streak else e.limit)]
                preferred = [e for e in free if e.url not in avoid]
                if preferred or free:
                    ep = min(preferred or free, key=lambda e: (e.in_flight, e.requests))
                    ep.in_flight += 1
                    ep.requests += 1
                    return ep
                resting = [e.rested_until for e in self.endpoints if e.rested_until > now]
                timeout = max(0.0, min(resting) - now) if resting else None
                try:
                    async with asyncio.timeout(timeout):
                        await cond.wait()
                except TimeoutError:
                    pass

    async def release(self, ep: EndpointState, failure: str | None = None, detail: str | None = None,
                      retry_after: float | None = None) -> None:
        cond = self._condition()
        async with cond:
            ep.in_flight -= 1
            if failure in REST_KINDS:
                ep.failures += 1
                ep.streak += 1
                ep.rests += 1
                pause = retry_after if retry_after is not None else self.rest_base * 2 ** (ep.streak - 1)
                pause = max(0.0, min(self.rest_max, pause))
                ep.rested_until = max(ep.rested_until, self.clock() + pause)
                ep.last_error = (detail or failure)[:300]
                others = len(self.endpoints) - 1
                log.warning("LLM endpoint %s rested for %.1f s after %s (%d failure(s) in a row); "
                            "%d other endpoint(s) take its requests", ep.url, pause, detail or failure,
                            ep.streak, others)
            elif failure is None:
                ep.streak = 0
            cond.notify_all()

    @asynccontextmanager
    async def use(self, avoid: Collection[str] = (), wait_max: float | None = None):
        """``async with endpoints.use() as lease:`` send to ``lease.url``; set ``lease.failure`` on failure."""
        ep = await self.acquire(avoid, wait_max)
        lease = Lease(ep)
        try:
            yield lease
        except BaseException:
            if lease.failure is None:
                lease.failure = "cancelled"
            raise
        finally:
            await asyncio.shield(self.release(ep, lease.failure, lease.detail, lease.retry_after))

    def stats(self) -> list[dict[str, Any]]:
        return [e.public() for e in self.endpoints]
