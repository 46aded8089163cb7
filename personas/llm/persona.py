"""An LLM in a seat, over any OpenAI-compatible chat-completions endpoint.

One conversation thread per seat for the whole game, append-only: the system prompt,
then for every call the user message and the model's reply.  Nothing is ever rewritten,
so a provider's prompt cache sees each request extend the previous one.  Reflection
calls (paper F.3) are sent with the thread as context but their question and answer are
not appended — they never enter the game's context.

Replies are read with :func:`engine.actions.parse_envelope` (lenient).  Failures:

* unreadable output → ``Reply(error="parse_error", text=raw)``: an *agent* failure; the
  engine records it and treats the turn as a pass (CHEAP_TALK) or a rejected batch
  (DECISION); the next prompt says why the reply could not be read;
* endpoint trouble that outlives the retries (``personas.llm.client``), or a
  context-length error → ``Reply(error="infra_error")``: an *infrastructure* failure;
  the engine records ``seat_timeout`` and the game goes on.  So is a configuration
  error met during a call (``LLMConfigError``: no API key, an unusable endpoint).  After a context-length
  error the thread can only grow, so later calls fail at once without a request.

``counters`` keeps both kinds apart; every reply carries them in ``Reply.extra``.
"""

from __future__ import annotations

import json
import random
import zlib
from typing import Any

from engine.actions import EnvelopeError, parse_envelope
from engine.observe import (
    DecisionObservation,
    SeatBriefing,
    TurnObservation,
    VoluntaryObservation,
)
from engine.seats import Reply

from .client import CallResult, complete
from .prompts import PromptBook, fragment
from .settings import LLMConfigError, LLMSettings

__all__ = ["LLMPersona"]

COUNTER_KEYS = ("calls", "requests", "retries", "agent_failures", "parse_errors", "infra_failures",
                "rate_limited", "server_errors", "timeouts", "connection_errors", "context_length",
                "http_errors", "bad_responses", "reflections", "reflection_failures")
_KIND_COUNTER = {"rate_limit": "rate_limited", "server_error": "server_errors", "timeout": "timeouts",
                 "connection": "connection_errors", "context_length": "context_length",
                 "http_error": "http_errors", "bad_response": "bad_responses"}


class LLMPersona:
    """A seat played by a chat model.  See the module docstring."""

    kind = "llm"

    def __init__(self, settings: LLMSettings, *, model: str | None = None, variant: str | None = None,
                 client: Any = None) -> None:
        self.settings = settings
        self.model_name = model or settings.model
        if not self.model_name:
            raise ValueError("an LLM seat needs a model name (llm:MODEL)")
        self.variant = variant if variant is not None else settings.variant
        self.model = f"llm:{self.model_name}"
        self._client = client
        self._own_client = client is not None
        self.reflection = settings.reflection
        self.messages: list[dict[str, str]] = []
        self.counters: dict[str, int] = {k: 0 for k in COUNTER_KEYS}
        self.book: PromptBook | None = None
        self.seat: int | None = None
        self._rng = random.Random(0)
        self._seen: dict[int, int] = {}  # round -> delivered messages already shown
        self._joined: set[int] = set()  # rounds in which a non-participant had its first message
        self._notice = ""
        self._context_exhausted: str | None = None

    # -- plumbing -------------------------------------------------------------------------
    @property
    def client(self):
        if self._client is None:
            self._client = self.settings.pool.client(self.settings)
        return self._client

    def describe(self) -> dict[str, Any]:
        """Settings a trace may record: model, variant, endpoint, sampling (never the key)."""
        return {**self.settings.public(), "model": self.model_name, "variant": self.variant}

    async def aclose(self) -> None:
        """Close a client this persona was given (pool clients are closed by the pool)."""
        if self._own_client and self._client is not None:
            await self._client.close()

    # -- the persona interface ------------------------------------------------------------
    async def register(self, briefing: SeatBriefing) -> str:
        self.seat = briefing.view.seat
        self._rng = random.Random(zlib.crc32(f"{self.model_name}:{self.seat}".encode()))
        self.book = PromptBook(briefing, self.variant)
        system = self.book.system_prompt()
        self.messages = [{"role": "system", "content": system}]
        self._seen.clear()
        self._joined.clear()
        self._notice = ""
        self._context_exhausted = None
        return system

    def prompt(self, obs) -> str | None:
        """The user message that :meth:`speak` / :meth:`volunteer` / :meth:`decide` will send."""
        if self.book is None:
            return None
        return self.book.user_message(obs, seen=self._seen.get(obs.round, 0), joined=obs.round in self._joined,
                                      notice=self._notice)

    async def speak(self, obs: TurnObservation) -> Reply:
        return await self._call(obs)

    async def volunteer(self, obs: VoluntaryObservation) -> Reply:
        return await self._call(obs)

    async def decide(self, obs: DecisionObservation) -> Reply:
        return await self._call(obs)

    async def resume(self, own_events: list[dict[str, Any]]) -> None:
        """Rebuild this seat's thread from its own events of a stopped game (``--resume``).

        The engine calls it after :meth:`register` with the seat's events of the complete
        rounds it folded.  The thread becomes exactly what the live seat had: the system
        prompt of its ``agent_registered`` event (regenerated when the trace has none),
        then per game call the recorded ``prompt_sent`` as the user message and, when the
        model answered with some text, that ``text`` as the assistant message — the same
        rule :meth:`_call` follows (an endpoint failure leaves the user message alone; an
        unreadable reply is kept).  Also restored: the note the next prompt carries about
        a failed last call (``parse_notice`` / ``infra_notice``), a context-length
        exhaustion, what each round's messages showed of the inbox (``_seen`` /
        ``_joined``; only the round being played reads them, and a resume starts a fresh
        one) and the counters (the last reply's ``extra.counters`` plus the reflections
        recorded after it; a reflection's retries are not in the trace).  The backoff
        jitter generator starts again from its seed.
        """
        if self.book is None:
            raise RuntimeError("register() must be called before resume()")
        system = next((e["data"]["system_prompt"] for e in own_events if e.get("type") == "agent_registered"
                       and isinstance((e.get("data") or {}).get("system_prompt"), str)), None)
        messages: list[dict[str, str]] = [{"role": "system", "content": system or self.book.system_prompt()}]
        counters = {k: 0 for k in COUNTER_KEYS}
        seen: dict[int, int] = {}
        talked: set[int] = set()  # rounds with a CHEAP_TALK turn
        decided: set[int] = set()  # rounds with a DECISION call (participants only)
        notice, exhausted = "", None
        prompt: str | None = None  # the open call's user message
        failure_detail: str | None = None  # from the error event between a call's start and end
        for ev in own_events:
            t, d = ev.get("type"), ev.get("data") or {}
            r = d.get("round")
            if t in ("turn_start", "decide_start"):
                prompt, failure_detail = d.get("prompt_sent"), None
                if t == "turn_start":
                    talked.add(r)
                    seen[r] = seen.get(r, 0) + len(d.get("inbox_drained") or ())
                elif d.get("phase") == "DECISION":
                    decided.add(r)
            elif t in ("parse_error", "seat_timeout") and prompt is not None:
                failure_detail = d.get("detail")
            elif t in ("turn_end", "decide_end") and prompt is not None:
                messages.append({"role": "user", "content": prompt})
                prompt = None
                text = d.get("text")
                extra = d.get("extra") if isinstance(d.get("extra"), dict) else {}
                failure = extra.get("failure")
                if isinstance(text, str) and text.strip() and failure in (None, "parse_error"):
                    messages.append({"role": "assistant", "content": text})
                if isinstance(extra.get("counters"), dict):
                    counters.update({k: v for k, v in extra["counters"].items() if k in counters})
                else:  # the engine answered for the seat (a timeout): the call still counted
                    counters["calls"] += 1
                notice = ""
                if exhausted:
                    continue
                if failure == "parse_error":
                    notice = fragment("parse_notice", detail=failure_detail or "no detail")
                elif failure == "context_length":
                    exhausted = failure_detail or "context length exceeded"
                elif failure is not None:
                    notice = fragment("infra_notice")
            elif t == "reflection":
                counters["reflections"] += 1
                if d.get("error"):
                    counters["reflection_failures"] += 1
                if not (exhausted and d.get("error")):
                    counters["requests"] += 1
        self.messages = messages
        self.counters = counters
        self._seen = seen
        self._joined = talked - decided
        self._notice = notice
        self._context_exhausted = exhausted

    # -- one game call --------------------------------------------------------------------
    def _shown(self, obs) -> None:
        """Remember what this message showed, so the next one does not repeat it."""
        r = obs.round
        if isinstance(obs, TurnObservation):
            self._seen[r] = self._seen.get(r, 0) + len(obs.inbox)
            if not obs.is_participant:
                self._joined.add(r)
        elif obs.attempt == 0:
            self._seen[r] = len(obs.round_messages)
        self._notice = ""

    def _extra(self, res: CallResult | None, failure: str | None = None) -> dict[str, Any]:
        extra: dict[str, Any] = {"counters": dict(self.counters)}
        if res is not None:
            extra.update(attempts=res.attempts, wall_ms=res.wall_ms, queue_ms=res.queue_ms)
            if res.retried:
                extra.update(retried=list(res.retried), waits=list(res.waits))
            if res.reasoning:
                extra["reasoning"] = res.reasoning
            if res.finish_reason and res.finish_reason != "stop":
                extra["finish_reason"] = res.finish_reason
        if failure:
            extra["failure"] = failure
        return extra

    def _count(self, res: CallResult) -> None:
        self.counters["requests"] += res.attempts
        self.counters["retries"] += len(res.retried)
        for kind in res.retried:
            self.counters[_KIND_COUNTER[kind]] += 1
        if res.failure:
            self.counters[_KIND_COUNTER[res.failure]] += 1

    async def _call(self, obs) -> Reply:
        if self.book is None:
            raise RuntimeError("register() must be called before the first turn")
        text = self.prompt(obs)
        self._shown(obs)
        self.counters["calls"] += 1
        self.messages.append({"role": "user", "content": text})
        if self._context_exhausted:
            self.counters["infra_failures"] += 1
            self.counters["context_length"] += 1
            return Reply(prompt=text, error="infra_error", latency_ms=0.0,
                         error_detail=f"context_length: the conversation no longer fits ({self._context_exhausted})",
                         extra=self._extra(None, "context_length"))
        try:
            client = self.client
        except LLMConfigError as exc:  # no key, a bad endpoint: infrastructure, not the agent's fault
            self.counters["infra_failures"] += 1
            self._notice = fragment("infra_notice")
            return Reply(prompt=text, error="infra_error", latency_ms=0.0, error_detail=f"configuration: {exc}",
                         extra=self._extra(None, "config_error"))
        res = await complete(client, self.messages, self.settings, model=self.model_name, rng=self._rng)
        self._count(res)
        if not res.ok:
            self.counters["infra_failures"] += 1
            if res.failure == "context_length":
                self._context_exhausted = res.failure_detail or "context length exceeded"
            else:
                self._notice = fragment("infra_notice")
            return Reply(prompt=text, error="infra_error", error_detail=res.failure_detail,
                         latency_ms=res.latency_ms, usage=res.usage, extra=self._extra(res, res.failure))
        raw_text = res.text or ""
        if raw_text.strip():
            self.messages.append({"role": "assistant", "content": raw_text})
        try:
            env = parse_envelope(raw_text)
        except EnvelopeError as exc:
            detail = str(exc)
            if res.finish_reason == "length":
                detail += f" (the reply was cut off at max_tokens={self.settings.max_tokens})"
            self.counters["parse_errors"] += 1
            self.counters["agent_failures"] += 1
            self._notice = fragment("parse_notice", detail=detail)
            return Reply(prompt=text, text=raw_text, error="parse_error", error_detail=detail, usage=res.usage,
                         latency_ms=res.latency_ms, raw=res.raw, extra=self._extra(res, "parse_error"))
        return Reply(actions=env.actions, thinking=env.thinking if env.thinking is not None else res.reasoning,
                     text=raw_text, usage=res.usage, latency_ms=res.latency_ms, raw=res.raw, prompt=text,
                     extra=self._extra(res))

    # -- reflection (paper F.3) -----------------------------------------------------------
    async def reflect(self, obs) -> dict[str, Any] | None:
        """Belief changes about every other seat, asked outside the game thread.

        Returns ``None`` when reflection is off (the game loop then records nothing).
        """
        if not self.reflection or self.book is None:
            return None
        question = self.book.reflection(obs)
        self.counters["reflections"] += 1
        if self._context_exhausted:
            self.counters["reflection_failures"] += 1
            return {"prompt": question, "error": "infra_error",
                    "error_detail": "context_length: the conversation no longer fits"}
        messages = self.messages + [{"role": "user", "content": question}]  # not appended to the thread
        try:
            client = self.client
        except LLMConfigError as exc:
            self.counters["reflection_failures"] += 1
            return {"prompt": question, "error": "infra_error", "error_detail": f"configuration: {exc}"}
        res = await complete(client, messages, self.settings, model=self.model_name, rng=self._rng)
        self._count(res)
        out: dict[str, Any] = {"prompt": question, "usage": res.usage, "latency_ms": res.latency_ms,
                               "raw": res.raw, "text": res.text}
        if not res.ok:
            self.counters["reflection_failures"] += 1
            out.update(error="infra_error", error_detail=res.failure_detail)
            return out
        deltas = _read_deltas(res.text or "")
        if deltas is None:
            self.counters["reflection_failures"] += 1
            out.update(error="parse_error", error_detail="no JSON object with 'deltas' in the reply")
        else:
            out["deltas"] = deltas
        return out


def _read_deltas(text: str) -> Any:
    """The ``deltas`` object of a reflection answer (in prose or a code fence), or None."""
    dec = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch != "{":
            continue
        try:
            obj, _ = dec.raw_decode(text[i:])
        except ValueError:
            continue
        if isinstance(obj, dict):
            if "deltas" in obj:
                return obj["deltas"]
            if obj and all(str(k).strip().isdigit() for k in obj):
                return obj
    return None
