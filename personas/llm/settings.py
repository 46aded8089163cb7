"""Settings for LLM seats, and the pool of resources all seats of one run share.

``LLMSettings`` is what the command line, the environment and a personas file decide:
the endpoint (``base_url``, else ``$OPENAI_BASE_URL``, else the SDK's default), the
*name* of the environment variable holding the key (never the key itself), the model,
sampling settings, timeouts, retries and a concurrency limit.

Every ``LLMSettings`` carries a :class:`RunPool`: one semaphore bounding the requests in
flight and one ``AsyncOpenAI`` client per endpoint.  Settings derived with
:meth:`LLMSettings.derive` (per-seat overrides from a personas file) share their parent's
pool, so the concurrency limit holds for the whole run.  Make one ``LLMSettings`` per run
(per event loop) and ``await settings.pool.aclose()`` at the end.

The API key is read from the environment when a client is made and lives only inside
that client object: it is not a field, never serialised, never logged.
"""

from __future__ import annotations

import asyncio
import os
from contextlib import asynccontextmanager
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

__all__ = ["LLMSettings", "LLMConfigError", "RunPool", "DEFAULT_KEY_ENV"]

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
#: Key sent to a local endpoint (vLLM, Ollama, llama.cpp, the mock) when none is set.
PLACEHOLDER_KEY = "not-needed"


#: Request fields CalBench sets itself; a personas file's ``extra_body`` may not replace them
#: (issue 24.16: ``model`` and ``messages`` there made a seat play with no prompt).
RESERVED_BODY_KEYS = frozenset({
    "model", "messages", "stream", "stream_options", "response_format", "n", "max_tokens",
    "max_completion_tokens", "tools", "tool_choice", "functions", "function_call", "temperature", "top_p",
    "frequency_penalty", "presence_penalty", "repeat_penalty", "seed", "stop", "logprobs", "top_logprobs",
    "prompt", "user"})
#: Sampling settings sent with every request when set (per seat: a personas file's [seats.N]).
SAMPLING_FIELDS = ("temperature", "top_p", "frequency_penalty", "presence_penalty", "repeat_penalty", "seed", "stop")


def _setting_hint(keys: list[str]) -> str:
    own = [k for k in keys if k in SAMPLING_FIELDS or k == "max_tokens"]
    return f" (use the setting{'s' if len(own) > 1 else ''} {', '.join(own)} instead)" if own else ""


class LLMConfigError(ValueError):
    """A setting that cannot work (no key for a remote endpoint, a bad file); one clear sentence."""


class RunPool:
    """Shared by all LLM seats of a run: the request semaphore and the HTTP clients."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self._semaphore: asyncio.Semaphore | None = None
        self._clients: dict[tuple, Any] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests = 0
        # Context windows per (endpoint, model): from /v1/models, or ("error", endpoint, model)
        # learned from a 400 by one seat, so the run's other seats need not hit it too.
        self.model_windows: dict[tuple, int | None] = {}
        # The structured-output form an endpoint settled on per (endpoint, model, kind of call).
        self.formats: dict[tuple, int] = {}
        # The prompt-token estimate per (endpoint, model), calibrated by every seat's usage.
        self.estimators: dict[tuple, Any] = {}
        #: cluster-wide limits per endpoint (the Ray executor sets it: lab/executors.py);
        #: an object with ``async acquire(endpoint)`` and ``async release(endpoint)``
        self.gate: Any = None
        self._endpoint_sets: dict[tuple, Any] = {}

    @property
    def semaphore(self) -> asyncio.Semaphore:
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.concurrency)
        return self._semaphore

    @asynccontextmanager
    async def slot(self, endpoint: str | None = None):
        """Hold one of the run's ``concurrency`` request slots (and the cluster's, for ``endpoint``)."""
        async with self.semaphore:
            gate = self.gate
            if gate is not None:
                await gate.acquire(endpoint)
            self.in_flight += 1
            self.requests += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                yield
            finally:
                self.in_flight -= 1
                if gate is not None:
                    await asyncio.shield(gate.release(endpoint))

    def endpoint_set(self, settings: "LLMSettings"):
        """The run's :class:`~personas.llm.endpoints.EndpointSet` for settings naming several
        base URLs (one per distinct list and limit), else None."""
        urls = settings.base_urls
        if not urls or len(urls) < 2:
            return None
        limit = settings.endpoint_concurrency or settings.concurrency
        key = (tuple(urls), limit)
        found = self._endpoint_sets.get(key)
        if found is None:
            from .endpoints import EndpointSet

            found = self._endpoint_sets[key] = EndpointSet(urls, limit)
        return found

    def endpoint_stats(self) -> list[dict[str, Any]]:
        """Per endpoint of every replica set of the run: requests, failures, rests, last error."""
        return [st for eps in self._endpoint_sets.values() for st in eps.stats()]

    def client(self, settings: "LLMSettings"):
        """The ``AsyncOpenAI`` client for ``settings``' endpoint (made once per endpoint)."""
        return self.client_for(settings, settings.resolved_base_url())

    def client_for(self, settings: "LLMSettings", base_url: str | None):
        """The ``AsyncOpenAI`` client for ``base_url`` with ``settings``' key and timeout."""
        key = (base_url, settings.api_key_env, settings.timeout)
        if key not in self._clients:
            from openai import AsyncOpenAI

            self._clients[key] = AsyncOpenAI(api_key=settings.resolve_api_key(), base_url=base_url,
                                             timeout=settings.timeout, max_retries=0)
        return self._clients[key]

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            await c.close()


#: Upper bounds of the settings' numbers (seconds, tokens, counts).
_UPPER = {"max_tokens": 1_000_000, "timeout": 86_400.0, "retries": 100, "backoff_base": 3_600.0,
          "backoff_max": 86_400.0, "retry_after_max": 86_400.0, "concurrency": 10_000,
          "endpoint_concurrency": 10_000, "context_window": 100_000_000}


class LLMSettings(BaseModel):
    """How an LLM seat reaches its model.  All fields are safe to record in a trace."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    model: str | None = Field(None, description="model name at the endpoint, e.g. gpt-4o-mini, llama3.1:8b")
    variant: str | None = Field(None, description="prompt variant: nosy-highpressure or redteam")
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint; default $OPENAI_BASE_URL")
    api_key_env: str = Field(DEFAULT_KEY_ENV, description="name of the environment variable holding the key")
    temperature: float | None = Field(None, ge=0, le=2, description="None: the endpoint's default (a small model's DECISION: 0, personas.llm.persona)")
    max_tokens: int | None = Field(1024, ge=1)
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    top_p: float | None = Field(None, gt=0, le=1, description="nucleus sampling; None: the endpoint's default")
    frequency_penalty: float | None = Field(None, ge=-2, le=2, description="OpenAI-style frequency penalty")
    presence_penalty: float | None = Field(None, ge=-2, le=2, description="OpenAI-style presence penalty")
    repeat_penalty: float | None = Field(None, gt=0, le=10, description="llama.cpp/vLLM repetition penalty "
                                                                        "(1 = none); not an OpenAI parameter")
    seed: int | None = Field(None, ge=0, le=2**63 - 1, description="sampling seed, for servers that honour it")
    stop: list[str] | None = Field(None, max_length=8, description="stop sequences (at most 8)")
    timeout: float = Field(120.0, gt=0, description="seconds of silence allowed: to connect, to the first token, "
                                                    "and between two streamed tokens")
    request_deadline: float | None = Field(None, gt=0, description="seconds for one whole HTTP request; None: "
                                                                   "10 x timeout")
    stream: bool = Field(True, description="stream replies (the silence limit then applies between tokens)")
    retries: int = Field(4, ge=0, description="retries after a 429, 5xx, timeout or connection error")
    backoff_base: float = Field(1.0, ge=0, description="first backoff in seconds; doubles per retry")
    backoff_max: float = Field(30.0, ge=0)
    retry_after_max: float = Field(120.0, ge=0, description="longest Retry-After honoured, seconds")
    concurrency: int = Field(8, ge=1, description="requests in flight across all seats of the run")
    base_urls: list[str] | None = Field(None, description="several endpoints serving the same model (replicas): "
                                                          "calls are spread over them; base_url is the first")
    endpoint_concurrency: int | None = Field(None, ge=1, description="with base_urls: requests in flight per "
                                                                     "endpoint (default: concurrency)")
    reflection: bool = Field(False, description="ask each seat for belief changes after every round (paper F.3)")
    json_mode: bool = Field(False, description='old name of structured="json_object" (kept for personas files)')
    structured: Literal["auto", "json_schema", "json_object", "off"] = Field(
        "auto", description="reply format constraint: auto tries the envelope's JSON schema (json_schema, then "
                            "json_object + schema) and falls back; off sends none and reads replies leniently")
    context_window: int | None = Field(None, ge=256, description="the model's context in tokens; None: learn it "
                                                                 "from the endpoint (/v1/models or its 400)")
    history: Literal["auto", "digest", "full"] = Field(
        "auto", description="earlier rounds in the thread: auto keeps them in full until the context would "
                            "overflow, then digests the oldest; digest always digests finished rounds; full never")
    prompt: Literal["auto", "full", "compact"] = Field(
        "auto", description="prompt profile: full (every explanation), compact (the same rules and information in "
                            "fewer tokens, for small context windows), auto (compact when the window is under 4,096 "
                            "tokens)")
    max_calls_per_round: int | None = Field(None, ge=1, description="CHEAP_TALK calls per round for an LLM seat; "
                                                                    "past it the seat passes without a request; "
                                                                    "unset: 4 when the model's context window is "
                                                                    "8,192 tokens or less, else no cap")
    idle_passes: Literal["auto", "keep", "drop"] = Field(
        "auto", description="a pass at a CHEAP_TALK turn that delivered nothing to the seat: kept in the model's "
                            "thread, or dropped from it (the trace keeps the call; a model that copies its last "
                            "reply then answers what arrives next); auto: drop when the model's context window is "
                            "8,192 tokens or less, else keep")
    decision: Literal["slot", "batch"] = Field(
        "slot", description="DECISION replies: slot (the model names the meeting's slot, any slot; the seat "
                            "moves an errand out of it, as the human's batch builder does) or batch (the model "
                            "writes its own moves)")
    extra_body: dict[str, Any] | None = Field(None, description="extra JSON fields for the endpoint")

    _pool: RunPool = PrivateAttr()

    @field_validator("stop", mode="before")
    @classmethod
    def _stop(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = [v]
        if isinstance(v, list) and any(not isinstance(x, str) or not x or len(x) > 64 for x in v):
            raise ValueError("stop sequences must be non-empty strings of at most 64 characters")
        return v

    @field_validator("extra_body")
    @classmethod
    def _extra_body(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if not v:
            return v
        reserved = sorted(k for k in v if k in RESERVED_BODY_KEYS)
        if reserved:
            raise ValueError(f"extra_body may not set {', '.join(reserved)}: CalBench builds "
                             f"{'that field' if len(reserved) == 1 else 'those fields'} of every request itself"
                             + _setting_hint(reserved))
        return v

    def deadline(self) -> float:
        """Seconds one whole HTTP request may take: ``request_deadline``, else 10 x ``timeout``."""
        return self.request_deadline if self.request_deadline is not None else 10.0 * self.timeout

    def sampling(self) -> dict[str, Any]:
        """The sampling fields a request carries (only those set)."""
        out = {k: getattr(self, k) for k in SAMPLING_FIELDS if getattr(self, k) is not None}
        return out

    def model_post_init(self, __context: Any) -> None:
        self._pool = RunPool(self.concurrency)

    @field_validator(*_UPPER)
    @classmethod
    def _bounded(cls, v: Any, info: Any) -> Any:
        """Every number a personas file or an option may ask for has an upper bound (issue 24
        item 8): a max_tokens past 64 bits failed every game, a timeout of 1e308 never ends."""
        hi = _UPPER[info.field_name]
        if v is not None and not v <= hi:  # also NaN and infinity
            raise ValueError(f"must be at most {hi:,} (the limit), not {v!r}"[:120])
        return v

    @field_validator("model", "variant")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and (len(v) > 200 or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in v)):
            raise ValueError("must be a name of at most 200 printable characters")
        return v

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str) -> str:
        if not v or not v.replace("_", "").isalnum():
            raise ValueError("must be the NAME of an environment variable (e.g. OPENAI_API_KEY), not a key")
        return v

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        v = v.strip()
        problem = url_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("base_urls")
    @classmethod
    def _urls(cls, v: Any) -> list[str] | None:
        if v is None:
            return v
        from .endpoints import split_urls

        parts = v.split(",") if isinstance(v, str) else list(v)
        if any(not str(p).strip() for p in parts):
            raise ValueError("an endpoint in the list is empty (two commas in a row, or a comma at an end); "
                             "give URL1,URL2,...")
        urls = split_urls(v)
        for u in urls:
            problem = url_problem(u)
            if problem:
                raise ValueError(problem)
        return urls or None

    @field_validator("variant")
    @classmethod
    def _variant(cls, v: str | None) -> str | None:
        from .prompts import VARIANTS

        if v is not None and v not in VARIANTS:
            raise ValueError(f"unknown variant {v!r}; choose from {', '.join(VARIANTS)}")
        return v

    # -- sharing --------------------------------------------------------------------------
    @property
    def pool(self) -> RunPool:
        return self._pool

    def derive(self, **overrides: Any) -> "LLMSettings":
        """A validated copy with ``overrides`` that shares this run's pool."""
        data = self.model_dump()
        if "base_url" in overrides and "base_urls" not in overrides:
            data["base_urls"] = None  # a seat's own endpoint replaces the run's replicas
        data.update(overrides)
        new = LLMSettings.model_validate(data)
        new._pool = self._pool
        return new

    # -- resolution -----------------------------------------------------------------------
    def resolved_base_url(self) -> str | None:
        return (self.base_url or (self.base_urls[0] if self.base_urls else None)
                or os.environ.get("OPENAI_BASE_URL") or None)

    def resolve_api_key(self) -> str:
        """The key from ``$api_key_env``; a placeholder for a custom endpoint without one."""
        from engine.redact import register_secret, register_secret_env

        register_secret_env(self.api_key_env)
        key = os.environ.get(self.api_key_env)
        if key:
            register_secret(key)
            return key
        if self.resolved_base_url():
            return PLACEHOLDER_KEY
        raise LLMConfigError(f"no API key: set ${self.api_key_env} (or choose another variable with "
                             "--api-key-env), or point --base-url at a local endpoint")

    def check_base_url(self) -> None:
        """Raise :class:`LLMConfigError` when the resolved endpoint (also ``$OPENAI_BASE_URL``) is no URL."""
        url = self.resolved_base_url()
        problem = url_problem(url) if url else None
        if problem:
            src = "--base-url" if self.base_url else "$OPENAI_BASE_URL"
            raise LLMConfigError(f"{src}: {problem}")

    def structured_mode(self) -> str:
        """The effective ``structured`` setting (``json_mode=True`` is the old spelling of json_object)."""
        if self.json_mode and self.structured == "auto":
            return "json_object"
        return self.structured

    def public(self) -> dict[str, Any]:
        """What a trace may record about these settings (no key, by construction)."""
        d = self.model_dump(exclude_none=True)
        d["base_url"] = _without_credentials(self.resolved_base_url())
        return d


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an endpoint (no http(s) scheme or no host), or None when it can."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return f"{url!r} is not a valid URL (expected e.g. http://127.0.0.1:8000/v1)"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{url!r} is not an http(s) URL with a host (expected e.g. http://127.0.0.1:8000/v1)"
    return None


def _without_credentials(url: str | None) -> str | None:
    """Drop user:password@ and the query string from a URL before it is recorded."""
    if not url:
        return url
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
