"""One chat completion with our own retry loop (the SDK's ``max_retries`` is 0).

Why our own loop: ``Retry-After`` handling must be explicit and testable, and the
results must tell infrastructure failures apart from agent failures (DESIGN.md).

* 429, 408, 409 and 5xx answers, timeouts and connection errors are retried, up to
  ``settings.retries`` times.  The wait is the server's ``Retry-After`` (or
  ``retry-after-ms``) when it sends one — capped at ``retry_after_max`` — else an
  exponential backoff ``backoff_base · 2^k`` (capped at ``backoff_max``) with jitter
  from a seeded generator.
* A context-length error (HTTP 400 whose message says the prompt is too long, or 413)
  is **not** retried: the same prompt would fail again.
* Any other 4xx (a bad key, an unknown model) is not retried either.
* The run's semaphore is held only while a request is in flight, never while waiting.

The request goes out through ``AsyncOpenAI.post("/chat/completions", cast_to=ChatCompletion,
body=...)`` — the SDK's documented way to send a body as is — rather than
``chat.completions.create``, whose typed transform of the message list costs ~30 ms of
CPU per request on a long game thread (measured: 36 ms vs 5.5 ms per call for a
61-message thread against the loopback mock), which caps a process at ~30 requests/s.
The response, errors and timeouts are the SDK's own either way.  A client that is not an
``AsyncOpenAI`` (a test double) is called through ``chat.completions.create``.

:func:`complete` never raises for an HTTP problem: it returns a :class:`CallResult`
whose ``failure`` names the kind (``rate_limit``, ``server_error``, ``timeout``,
``connection``, ``context_length``, ``http_error``, ``bad_response``).
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import openai

from engine.redact import redact

from .settings import LLMSettings, RunPool

__all__ = ["CallResult", "complete", "classify", "retry_after_seconds", "RETRYABLE"]

RETRYABLE = frozenset({"rate_limit", "server_error", "timeout", "connection"})
_CONTEXT_RE = re.compile(
    r"context[_ ]length|context window|context size|maximum context|too many tokens|prompt is too long"
    r"|reduce the length|exceeds? the (?:model'?s? )?(?:maximum|max)|input is too long|token limit", re.I)


@dataclass
class CallResult:
    text: str | None = None
    reasoning: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    raw: dict[str, Any] | None = None
    latency_ms: float | None = None  # the last HTTP request (waiting for a concurrency slot excluded)
    queue_ms: float = 0.0  # time spent waiting for the run's concurrency slots
    wall_ms: float = 0.0  # the whole call, waits and retries included
    endpoint: str | None = None  # the base URL that answered last (several replicas: the one chosen)
    attempts: int = 0
    retried: list[str] = field(default_factory=list)  # failure kind of each retried attempt
    waits: list[float] = field(default_factory=list)  # seconds waited before each retry
    failure: str | None = None
    failure_detail: str | None = None
    status: int | None = None
    context_window: int | None = None  # stated by a context-length error, when it says

    @property
    def ok(self) -> bool:
        return self.failure is None


def retry_after_seconds(headers: Any) -> float | None:
    """The server's requested wait: ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return getattr(exc, "message", None) or str(exc)


def classify(exc: Exception) -> tuple[str, int | None]:
    """``(failure kind, HTTP status)`` of an exception raised by the SDK."""
    if isinstance(exc, openai.APITimeoutError):
        return "timeout", None
    if isinstance(exc, openai.APIConnectionError):
        return "connection", None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        code = str(getattr(exc, "code", "") or "")
        if status == 429:
            return "rate_limit", status
        if status >= 500 or status in (408, 409):
            return "server_error", status
        if status == 413 or code == "context_length_exceeded" or (status == 400 and _CONTEXT_RE.search(_error_message(exc))):
            return "context_length", status
        return "http_error", status
    return "bad_response", None


def _backoff(settings: LLMSettings, k: int, rng: random.Random) -> float:
    base = min(settings.backoff_max, settings.backoff_base * (2 ** k))
    return base * (0.5 + 0.5 * rng.random())


Sleep = Callable[[float], Awaitable[Any]]


_DEFAULT = object()


async def complete(client: Any, messages: list[dict[str, Any]], settings: LLMSettings, *, model: str,
                   pool: RunPool | None = None, rng: random.Random | None = None,
                   sleep: Sleep = asyncio.sleep, response_format: Any = _DEFAULT,
                   max_tokens: int | None = None) -> CallResult:
    """One chat completion for ``messages`` with the retry policy above.

    ``response_format``: the body's ``response_format`` (``None``: none); by default the
    settings' (``{"type": "json_object"}`` when ``structured`` is json_object, else none).
    ``max_tokens``: a smaller reply budget for this request (the context budget's), else the settings'.
    """
    pool = pool or settings.pool
    rng = rng or random.Random(0)
    params: dict[str, Any] = {"model": model, "messages": messages}
    if settings.temperature is not None:
        params["temperature"] = settings.temperature
    if max_tokens is not None or settings.max_tokens is not None:
        params[settings.max_tokens_param] = max_tokens if max_tokens is not None else settings.max_tokens
    if response_format is _DEFAULT:
        response_format = {"type": "json_object"} if settings.structured_mode() == "json_object" else None
    if response_format is not None:
        params["response_format"] = response_format
    if settings.extra_body:
        params.update(settings.extra_body)
    res = CallResult()
    t_start = time.perf_counter()
    replicas = pool.endpoint_set(settings)  # several base URLs of one model: personas/llm/endpoints.py
    failed_at: set[str] = set()
    for attempt in range(settings.retries + 1):
        res.attempts = attempt + 1
        exc: Exception | None = None
        completion = None
        tq = time.perf_counter()
        async with (replicas.use(failed_at) if replicas is not None else _one_endpoint()) as lease:
            url = lease.url if lease is not None else settings.resolved_base_url()
            res.endpoint = url
            async with pool.slot(url):
                t0 = time.perf_counter()
                res.queue_ms = round(res.queue_ms + (t0 - tq) * 1000, 3)
                try:
                    completion = await _send(pool.client_for(settings, url) if lease is not None else client,
                                             params, settings.timeout)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # classified below
                    exc = e
                res.latency_ms = round((time.perf_counter() - t0) * 1000, 3)
            if exc is not None and lease is not None:  # the endpoint is rested for retryable kinds
                lease.failure = classify(exc)[0]
                lease.detail = redact(f"{lease.failure}: {_error_message(exc)}")[:300]
                lease.retry_after = retry_after_seconds(getattr(getattr(exc, "response", None), "headers", None))
                failed_at.add(url)
        if exc is None:
            try:
                _fill_success(res, completion)
            except Exception as e:  # a body we cannot read as a completion
                res.failure, res.failure_detail = "bad_response", redact(_bad_response(e, completion))[:500]
            break
        kind, status = classify(exc)
        res.failure, res.status = kind, status
        res.failure_detail = redact(f"{kind}{f' (HTTP {status})' if status else ''}: {_error_message(exc)}")[:500]
        if kind == "context_length":
            from .context import window_from_error

            res.context_window = window_from_error(_error_message(exc), getattr(exc, "body", None))
        if kind not in RETRYABLE or attempt == settings.retries:
            break
        wait = retry_after_seconds(getattr(getattr(exc, "response", None), "headers", None))
        if replicas is not None and replicas.healthy():
            wait = 0.0  # the failing endpoint rests; another one takes the retry at once
        elif wait is not None:
            wait = min(wait, settings.retry_after_max)
        else:
            wait = _backoff(settings, attempt, rng)
        res.retried.append(kind)
        res.waits.append(round(wait, 3))
        await sleep(wait)
    res.wall_ms = round((time.perf_counter() - t_start) * 1000, 3)
    return res


@asynccontextmanager
async def _one_endpoint():
    yield None


async def _send(client: Any, params: dict[str, Any], timeout: float) -> Any:
    if isinstance(client, openai.AsyncOpenAI):
        from openai.types.chat import ChatCompletion

        return await client.post("/chat/completions", cast_to=ChatCompletion, body=params,
                                 options={"timeout": timeout})
    extra = {k: v for k, v in params.items() if k not in ("model", "messages", "temperature", "max_tokens",
                                                         "max_completion_tokens", "response_format")}
    known = {k: v for k, v in params.items() if k not in extra}
    return await client.chat.completions.create(**known, extra_body=extra or None, timeout=timeout)


async def fetch_models(client: Any, timeout: float = 10.0) -> Any:
    """``GET /models`` as plain JSON (None when the endpoint has no such route or fails)."""
    if not isinstance(client, openai.AsyncOpenAI):
        return None
    try:
        page = await client.models.list(timeout=timeout)
        return {"data": [m.model_dump(mode="json") for m in page.data]}
    except Exception:  # metadata is optional: no route, no JSON, no answer
        return None


class _NoChoices(ValueError):
    pass


def _bad_response(exc: Exception, completion: Any) -> str:
    """Plain words for a 200 answer that is not a usable completion."""
    if isinstance(exc, _NoChoices):
        return "the endpoint answered with no choices (\"choices\": [])"
    return f"the answer is not a chat completion ({type(exc).__name__}: {exc})"


def _fill_success(res: CallResult, completion: Any) -> None:
    choices = getattr(completion, "choices", None)
    if not choices:
        raise _NoChoices()
    choice = choices[0]
    if getattr(choice, "message", None) is None:
        raise ValueError("the first choice has no message")
    msg = choice.message
    res.text = msg.content
    extra = getattr(msg, "model_extra", None) or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
    res.reasoning = reasoning if isinstance(reasoning, str) else None
    res.finish_reason = choice.finish_reason
    res.usage = completion.usage.model_dump(mode="json", exclude_none=True) if completion.usage else None
    res.raw = completion.model_dump(mode="json", exclude_none=True)
    res.failure = res.failure_detail = None
    res.status = 200
