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

**Timeouts (one rule, docs/llm.md "Timeouts").**  Replies are streamed (``stream``, default
on), and ``timeout`` is the longest *silence* allowed: to connect and get the answer's
headers, to the first token, and between two useful stream events (a token of content or
reasoning, the finish reason, the usage, or — from a loopback server such as llama.cpp's,
which is asked for them — progress while it reads the prompt) — keep-alive comments and
empty chunks do not count.  A slow model that streams steadily is never cut off, however long it takes, up to
the whole-request ``deadline()`` (``request_deadline``, else 10 x ``timeout``), which bounds
everything (a server that drips one byte a second, or one useless chunk at a time).  An
endpoint that answers a streamed request with a plain JSON body is read within the same
limits.  Without streaming (``stream = false``, or a client that is not an ``AsyncOpenAI``)
the whole request must finish within ``timeout``.  A retry after a timeout never repeats
the losing request: after a silence the next attempt allows twice the silence; after the
deadline (or a non-streamed timeout) it asks for half the reply tokens (not below 64) and
allows 1.5 x the time.  Each attempt is recorded (``CallResult.attempt_log``).

Numbers from the endpoint (``usage``, a 400's ``n_ctx``, ``/v1/models``) past the 64-bit
range are dropped (``safe_json``), so no store or trace writer ever meets them.

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

from engine.redact import redact, redact_obj

from .endpoints import AllResting as _AllResting
from .settings import LLMSettings, RunPool

__all__ = ["CallResult", "complete", "classify", "failure_words", "retry_after_seconds", "RETRYABLE", "StreamTimeout", "safe_json",
           "MIN_RETRY_TOKENS"]

#: Characters of one streamed reply read at most (far above what a seat reads: engine.actions.MAX_REPLY_CHARS);
#: past it the stream is closed and the reply counts as cut off (``finish_reason: length``).
MAX_STREAM_CHARS = 1_000_000
#: The smallest reply budget a retry after a timeout lowers ``max_tokens`` to.
MIN_RETRY_TOKENS = 64
#: The longest server-requested wait honoured at all (``Retry-After: inf`` is capped here,
#: then by ``retry_after_max``).
_RETRY_AFTER_CAP = 86400.0
_INT64 = 2**63 - 1


class StreamTimeout(Exception):
    """A request that outlived one of its limits: ``kind`` is ``silence`` (streamed: no useful
    event for that long), ``total`` (not streamed: no whole answer within ``timeout``) or
    ``deadline`` (the whole-request deadline)."""

    def __init__(self, kind: str, seconds: float, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.seconds = seconds
        self.message = detail


def safe_json(value: Any) -> Any:
    """``value`` with every integer outside the signed 64-bit range replaced by None (and
    non-finite floats too): what an endpoint sends may not crash a store or a trace."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if -_INT64 - 1 <= value <= _INT64 else None
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, dict):
        return {k: safe_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [safe_json(v) for v in value]
    return value

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
    max_tokens: int | None = None  # the reply budget of the last attempt (a retry after a timeout lowers it)
    streamed: bool = False  # the last attempt's reply came as a stream
    first_token_ms: float | None = None  # the last attempt: from sending to the first useful stream event
    #: one entry per attempt: endpoint, outcome, latency, limits and reply budget it ran with
    attempt_log: list[dict[str, Any]] = field(default_factory=list)

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
            return _finite_wait(float(ms) / 1000.0)
    except (TypeError, ValueError, OverflowError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return _finite_wait(float(value))
    except (TypeError, ValueError, OverflowError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return _finite_wait(when.timestamp() - time.time())


def _finite_wait(seconds: float) -> float | None:
    """A wait in ``[0, 1 day]``; NaN is no wait at all (None), ``inf`` the cap."""
    if seconds != seconds:
        return None
    return min(_RETRY_AFTER_CAP, max(0.0, seconds))


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
    if isinstance(exc, (StreamTimeout, asyncio.TimeoutError)):
        return "timeout", None
    if isinstance(exc, _AllResting):
        return "connection", None
    if type(exc).__name__ in ("ReadTimeout", "ConnectTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException"):
        return "timeout", None  # the transport's own (httpx) timeouts while a stream is read
    if type(exc).__name__ in ("ReadError", "RemoteProtocolError", "ConnectError", "NetworkError"):
        return "connection", None
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
                   max_tokens: int | None = None, sampling: dict[str, Any] | None = None) -> CallResult:
    """One chat completion for ``messages`` with the retry and timeout policy above.

    ``response_format``: the body's ``response_format`` (``None``: none); by default the
    settings' (``{"type": "json_object"}`` when ``structured`` is json_object, else none).
    ``max_tokens``: a smaller reply budget for this request (the context budget's), else the settings'.
    ``sampling``: the sampling fields of this request (the seat's, see ``LLMPersona.sampling``),
    else the settings' (:meth:`LLMSettings.sampling`).
    """
    pool = pool or settings.pool
    rng = rng or random.Random(0)
    params: dict[str, Any] = {"model": model, "messages": messages}
    if settings.extra_body:  # first, so nothing CalBench sets can be replaced (reserved keys are refused too)
        params.update(settings.extra_body)
    params.update(settings.sampling() if sampling is None else sampling)
    budget = max_tokens if max_tokens is not None else settings.max_tokens
    if response_format is _DEFAULT:
        response_format = {"type": "json_object"} if settings.structured_mode() == "json_object" else None
    if response_format is not None:
        params["response_format"] = response_format
    silence = float(settings.timeout)
    deadline = float(settings.deadline())
    res = CallResult()
    t_start = time.perf_counter()
    replicas = pool.endpoint_set(settings)  # several base URLs of one model: personas/llm/endpoints.py
    failed_at: set[str] = set()
    for attempt in range(settings.retries + 1):
        res.attempts = attempt + 1
        exc: Exception | None = None
        completion = None
        tq = time.perf_counter()
        if budget is not None:
            params[settings.max_tokens_param] = budget
        res.max_tokens = budget
        entry: dict[str, Any] = {"attempt": attempt + 1, "max_tokens": budget, "silence_s": round(silence, 3),
                                 "deadline_s": round(deadline, 3)}
        res.first_token_ms = None
        res.streamed = False
        try:
            lease_cm = replicas.use(failed_at, wait_max=silence) if replicas is not None else _one_endpoint()
            async with lease_cm as lease:
                url = lease.url if lease is not None else settings.resolved_base_url()
                res.endpoint = url
                async with pool.slot(url):
                    t0 = time.perf_counter()
                    res.queue_ms = round(res.queue_ms + (t0 - tq) * 1000, 3)
                    try:
                        completion = await _send(pool.client_for(settings, url) if lease is not None else client,
                                                 params, settings, res, silence=silence, deadline=deadline,
                                                 url=url)
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
        except _AllResting as e:  # no replica came back within the wait: this attempt is lost
            exc = e
            res.latency_ms = 0.0
            res.queue_ms = round(res.queue_ms + (time.perf_counter() - tq) * 1000, 3)
        entry.update(endpoint=_public_url(res.endpoint), latency_ms=res.latency_ms, streamed=res.streamed)
        if res.first_token_ms is not None:
            entry["first_token_ms"] = res.first_token_ms
        res.attempt_log.append(entry)
        if exc is None:
            try:
                if not isinstance(completion, CallResult):
                    _fill_success(res, completion)
            except Exception as e:  # a body we cannot read as a completion
                res.failure, res.failure_detail = "bad_response", redact(_bad_response(e, completion))[:500]
            entry.update(outcome=res.failure or "ok", finish_reason=res.finish_reason, status=res.status)
            break
        kind, status = classify(exc)
        res.failure, res.status = kind, status
        res.failure_detail = redact(f"{kind}{f' (HTTP {status})' if status else ''}: {_error_message(exc)}")[:500]
        entry.update(outcome=kind, status=status, detail=res.failure_detail[:200])
        if kind == "context_length":
            from .context import window_from_error

            res.context_window = _safe_int(window_from_error(_error_message(exc),
                                                             safe_json(getattr(exc, "body", None))))
        if kind not in RETRYABLE or attempt == settings.retries:
            break
        if kind == "timeout":  # never the same losing request again
            silence, deadline, budget = _after_timeout(exc, silence, deadline, budget)
        wait = retry_after_seconds(getattr(getattr(exc, "response", None), "headers", None))
        if isinstance(exc, _AllResting):
            wait = 0.0  # the attempt already waited for a replica
        elif replicas is not None and replicas.healthy():
            wait = 0.0  # the failing endpoint rests; another one takes the retry at once
        elif wait is not None:
            wait = min(wait, settings.retry_after_max)
        else:
            wait = _backoff(settings, attempt, rng)
        res.retried.append(kind)
        res.waits.append(round(wait, 3))
        await sleep(wait)
    res.wall_ms = round((time.perf_counter() - t_start) * 1000, 3)
    return _redacted(res)


def _redacted(res: CallResult) -> CallResult:
    """The gate where an endpoint's reply enters the game (issue 35, 1): the reply's text, its
    reasoning and the raw body lose every known key in every form ``engine.redact`` knows
    (an endpoint may echo the key, or a model write it spaced, reversed, as hex ...), before
    any seat reads it, any screen or remote player sees it or any store keeps it."""
    if res.text:
        res.text = redact(res.text)
    if res.reasoning:
        res.reasoning = redact(res.reasoning)
    if res.raw is not None:
        res.raw = redact_obj(res.raw)
    return res


def _after_timeout(exc: Exception, silence: float, deadline: float, budget: int | None
                   ) -> tuple[float, float, int | None]:
    """The limits of the next attempt after a timeout (see the module docstring)."""
    if isinstance(exc, StreamTimeout) and exc.kind == "silence":
        silence = silence * 2
        return silence, max(deadline, silence), budget
    if budget is not None:
        budget = max(MIN_RETRY_TOKENS, budget // 2) if budget > MIN_RETRY_TOKENS else budget
    total = not isinstance(exc, StreamTimeout) or exc.kind == "total"  # a whole answer that came too late
    return silence * 1.5 if total else silence, deadline * 1.5, budget


def _safe_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= _INT64 else None


def _public_url(url: str | None) -> str | None:
    from .settings import _without_credentials

    return _without_credentials(url)


@asynccontextmanager
async def _one_endpoint():
    yield None


async def _bounded(aw: Awaitable[Any], seconds: float, kind: str, limit: float, what: str) -> Any:
    if seconds <= 0:
        if hasattr(aw, "close"):
            aw.close()
        raise StreamTimeout(kind, limit, what)
    try:
        # asyncio.timeout, not wait_for: on Python 3.11, wait_for returns the result when the
        # awaited chunk lands in the same loop turn as a cancel (ctrl+q), and the cancel is lost
        async with asyncio.timeout(seconds):
            return await aw
    except TimeoutError:
        raise StreamTimeout(kind, limit, what) from None


async def _send(client: Any, params: dict[str, Any], settings: LLMSettings, res: CallResult, *,
                silence: float, deadline: float, url: str | None = None) -> Any:
    """One HTTP request within the limits; a streamed reply comes back already in ``res``."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    end = t0 + deadline

    def limit(last: float, phase: str) -> tuple[float, str, float, str]:
        if end <= last + silence:
            return (end - loop.time(), "deadline", deadline,
                    f"the whole request took longer than {deadline:g} s (the request deadline)")
        return last + silence - loop.time(), "silence", silence, f"no {phase} for {silence:g} s"

    if isinstance(client, openai.AsyncOpenAI):
        from openai.types.chat import ChatCompletion

        if not settings.stream:
            left, kind, lim, what = limit(t0, "answer")
            if kind == "silence":  # not streamed: the silence limit bounds the whole answer
                kind, what = "total", f"no complete answer within {silence:g} s (not streamed)"
            return await _bounded(client.post("/chat/completions", cast_to=ChatCompletion, body=params,
                                              options={"timeout": silence}), min(left, silence), kind, lim, what)
        return await _stream(client, params, res, loop, t0, limit, progress=is_local(url))
    extra = {k: v for k, v in params.items() if k not in ("model", "messages", "temperature", "max_tokens",
                                                         "max_completion_tokens", "response_format")}
    known = {k: v for k, v in params.items() if k not in extra}
    left, kind, lim, what = limit(t0, "answer")
    if kind == "silence":
        kind, what = "total", f"no complete answer within {silence:g} s (not streamed)"
    return await _bounded(client.chat.completions.create(**known, extra_body=extra or None, timeout=silence),
                          min(left, silence), kind, lim, what)


def is_local(url: str | None) -> bool:
    """An endpoint on this machine (loopback): a local server such as llama.cpp's."""
    if not url:
        return False
    import ipaddress
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _stream(client: Any, params: dict[str, Any], res: CallResult, loop, t0: float, limit, *,
                  progress: bool = False) -> CallResult:
    """Send with ``stream: true`` and read the events, each within the silence limit.

    ``progress`` (a loopback endpoint): also ask for ``return_progress``, llama.cpp's events
    while it reads a long prompt — on a slow CPU reading a 3k-token prompt takes minutes, and
    each progress event is a sign of life like a token.  Remote APIs are not sent the field
    (OpenAI refuses unknown fields)."""
    from openai import AsyncStream
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    body = {**params, "stream": True, "stream_options": {"include_usage": True}}
    if progress:
        body["return_progress"] = True
    left, kind, lim, what = limit(t0, "answer")
    stream = await _bounded(
        client.post("/chat/completions", cast_to=ChatCompletion, body=body, options={"timeout": lim},
                    stream=True, stream_cls=AsyncStream[ChatCompletionChunk]), left, kind, lim, what)
    try:
        response = getattr(stream, "response", None)
        ctype = (response.headers.get("content-type", "") if response is not None else "").lower()
        if response is not None and "event-stream" not in ctype:  # the server ignored "stream": a plain body
            left, kind, lim, what = limit(t0, "answer")
            raw = await _bounded(response.aread(), left, kind, lim, what)
            import json as _json

            completion = ChatCompletion.model_validate(safe_json(_json.loads(raw)))
            _fill_success(res, completion)
            return res
        text: list[str] = []
        reasoning: list[str] = []
        finish = None
        usage = None
        meta: dict[str, Any] = {}
        chunks = 0
        last = t0
        seen_useful = False
        size = 0
        it = stream.__aiter__()
        while True:
            left, kind, lim, what = limit(last, "token" if seen_useful else "first token")
            try:
                chunk = await _bounded(it.__anext__(), left, kind, lim, what)
            except StopAsyncIteration:
                break
            useful = bool((getattr(chunk, "model_extra", None) or {}).get("prompt_progress"))  # reading the prompt
            if not meta:
                meta = {"id": getattr(chunk, "id", None), "model": getattr(chunk, "model", None),
                        "created": getattr(chunk, "created", None)}
            if getattr(chunk, "usage", None) is not None:
                usage = chunk.usage.model_dump(mode="json", exclude_none=True)
                useful = True
            for ch in getattr(chunk, "choices", None) or []:
                chunks += 1
                delta = getattr(ch, "delta", None)
                if delta is not None:
                    if getattr(delta, "content", None):
                        text.append(delta.content)
                        size += len(delta.content)
                        useful = True
                    extra = getattr(delta, "model_extra", None) or {}
                    r = extra.get("reasoning_content") or extra.get("reasoning")
                    if isinstance(r, str) and r:
                        reasoning.append(r)
                        useful = True
                if getattr(ch, "finish_reason", None):
                    finish = ch.finish_reason
                    useful = True
            if size > MAX_STREAM_CHARS:  # a reply no seat reads whole: stop reading, keep the head
                finish = "length"
                break
            if useful:
                seen_useful = True
                last = loop.time()
                if res.first_token_ms is None and (text or reasoning or finish):
                    res.first_token_ms = round((last - t0) * 1000, 3)
    finally:
        try:
            await stream.close()
        except Exception:  # the connection is gone already
            pass
    if not chunks:
        raise _NoChoices("the endpoint's stream carried no choices")
    res.streamed = True
    res.text = "".join(text)
    res.reasoning = "".join(reasoning) or None
    res.finish_reason = finish
    res.usage = safe_json(usage) if usage else None
    message: dict[str, Any] = {"role": "assistant", "content": res.text}
    if res.reasoning:
        message["reasoning_content"] = res.reasoning
    res.raw = safe_json({**{k: v for k, v in meta.items() if v is not None}, "object": "chat.completion",
                         "streamed": True, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                         **({"usage": res.usage} if res.usage else {})})
    res.failure = res.failure_detail = None
    res.status = 200
    return res


async def fetch_models(client: Any, timeout: float = 10.0) -> Any:
    """``GET /models`` as plain JSON (None when the endpoint has no such route or fails)."""
    if not isinstance(client, openai.AsyncOpenAI):
        return None
    try:
        page = await client.models.list(timeout=timeout)
        return safe_json({"data": [m.model_dump(mode="json") for m in page.data]})
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
    res.usage = safe_json(completion.usage.model_dump(mode="json", exclude_none=True)) if completion.usage else None
    res.raw = safe_json(completion.model_dump(mode="json", exclude_none=True))
    res.failure = res.failure_detail = None
    res.status = 200


def failure_words(res: CallResult, settings: LLMSettings) -> str | None:
    """Why a call failed, in words a person at the table can act on (issue 22 item 8), e.g.
    "timed out after 120 s, 5 tries; the endpoint answers slowly".  Nothing private: the
    kind of failure, the limits and the number of tries."""
    if res.ok or not res.failure:
        return None
    n = res.attempts
    tries = f"{n} {'try' if n == 1 else 'tries'}"
    kind = res.failure
    if kind == "timeout":
        return f"timed out after {settings.timeout:g} s, {tries}; the endpoint answers slowly"
    if kind == "connection":
        return f"could not reach the endpoint, {tries}; is the model server running?"
    if kind == "rate_limit":
        return f"the endpoint kept answering 'too many requests', {tries}"
    if kind == "server_error":
        return f"the endpoint kept failing (HTTP {res.status or '5xx'}), {tries}"
    if kind == "http_error":
        return f"the endpoint refused the request (HTTP {res.status}); check the model name and the key"
    if kind == "bad_response":
        return "the endpoint's answer was not a chat completion"
    if kind == "context_length":
        return "the conversation no longer fits the model's context"
    return None
