"""Inspect's model API as the LLM seat's chat client (the seam: ``make_llm_persona(..., client=)``).

The LLM seat (``personas/llm/``) sends every request through ``personas.llm.client.complete``,
which calls a client that is not an ``AsyncOpenAI`` as ``client.chat.completions.create(
model=, messages=, temperature=, max_tokens=, response_format=, extra_body=, timeout=)`` and
reads an OpenAI ``ChatCompletion`` back.  :class:`InspectChatClient` is such a client: it
turns the request into ``inspect_ai.model.Model.generate`` (so the model under evaluation,
any Inspect provider, answers; Inspect records the call as a model event of the sample and
applies its retries, limits and caching) and the ``ModelOutput`` into a ``ChatCompletion``.
Nothing of ``personas/llm`` is changed for it.

The reply format the seat asks for (``response_format``: its envelope's JSON schema) goes to
providers of the OpenAI chat API (``openai-api/...``, vLLM, Ollama, ...) unchanged, in the
request body (``GenerateConfig.extra_body``); an endpoint that refuses it answers 400 and the
seat falls back to the next form, as over its own client.  Other providers get no format:
Inspect's ``ResponseSchema`` keeps only part of JSON Schema (no ``minItems``, ``const``...),
which would constrain the reply to something else; the seat reads replies leniently.  An
exception of Inspect (a provider's error after its retries, a limit) reaches ``complete`` as a
failed request; a limit is kept on :attr:`InspectChatClient.limit` so the task can end the
sample the way Inspect ends a sample over its limit.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

__all__ = ["InspectChatClient"]

_FINISH = {"stop": "stop", "max_tokens": "length", "model_length": "length", "tool_calls": "tool_calls",
           "content_filter": "content_filter"}


class InspectChatClient:
    """An OpenAI-shaped chat client whose completions come from an Inspect ``Model``."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.calls = 0
        self.limit: BaseException | None = None  # a LimitExceededError Inspect raised, if any
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))
        # providers that speak the OpenAI chat API (openai-api/..., vllm, ollama, ...) take the
        # seat's response_format as it is; Inspect's own ResponseSchema drops JSON-schema keywords
        # the envelope needs (minItems, const...), so other providers get no format (lenient reading)
        self.openai_family = any("openai" in c.__module__ for c in type(getattr(model, "api", None)).__mro__)

    async def _create(self, *, model: str, messages: list[dict[str, Any]], temperature: float | None = None,
                      max_tokens: int | None = None, max_completion_tokens: int | None = None,
                      response_format: dict[str, Any] | None = None, extra_body: dict[str, Any] | None = None,
                      timeout: float | None = None, **_ignored: Any):
        from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, GenerateConfig
        from inspect_ai.util import LimitExceededError
        from openai.types.chat import ChatCompletion

        cls = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
        chat = [cls.get(m.get("role"), ChatMessageUser)(content=str(m.get("content") or "")) for m in messages]
        config: dict[str, Any] = {}
        if temperature is not None:
            config["temperature"] = temperature
        if (max_tokens or max_completion_tokens) is not None:
            config["max_tokens"] = max_tokens or max_completion_tokens
        if response_format is not None and self.openai_family:  # the seat's own format, byte for byte
            config["extra_body"] = {**(extra_body or {}), "response_format": response_format}
        elif extra_body:
            config["extra_body"] = dict(extra_body)
        self.calls += 1
        try:
            out = await self.model.generate(chat, config=GenerateConfig(**config))
        except LimitExceededError as exc:
            self.limit = exc
            raise
        usage = out.usage
        return ChatCompletion.model_validate({
            "id": f"inspect-{self.calls}", "object": "chat.completion", "created": int(time.time()),
            "model": str(out.model or model),
            "choices": [{"index": 0, "finish_reason": _FINISH.get(str(out.stop_reason), "stop"),
                         "message": {"role": "assistant", "content": out.completion}}],
            **({"usage": {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
                          "total_tokens": usage.total_tokens}} if usage is not None else {}),
        })
