"""Faithful resume of games with LLM seats.

A saved game keeps every public LLM setting of each seat in its config, under ``llm``
(one entry per seat, ``None`` for a seat that is no LLM; :func:`seats_llm_config`):
model, variant, endpoint (``base_url`` without credentials), ``api_key_env`` (the
variable's NAME), sampling, ``structured``, ``context_window``, ``history``, timeouts and
retries — never a key (``LLMSettings`` has no field that could hold one).

``--resume`` rebuilds each seat's settings from there (:func:`saved_llm_settings`), so a
resumed game talks to the same endpoint and model with the same settings even when the
command line gives none of them; and it checks that every endpoint answers before the
game starts (:func:`check_endpoints`), refusing with one line if one does not.
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping, Sequence

from pydantic import ValidationError

from .settings import LLMConfigError, LLMSettings

__all__ = ["seats_llm_config", "saved_llm_settings", "check_endpoints", "EndpointDown"]

#: Saved fields that are not restored: the run's concurrency belongs to the new run.
_NOT_RESTORED = {"concurrency"}


class EndpointDown(LLMConfigError):
    """An LLM endpoint a resumed game needs does not answer; one sentence."""


def seats_llm_config(seats: Sequence[Any]) -> dict[str, Any]:
    """``{"llm": [public settings per seat, or None]}`` when some seat is an LLM, else ``{}``."""
    out: list[dict[str, Any] | None] = []
    for s in seats:
        describe = getattr(s, "describe", None)
        out.append(describe() if getattr(s, "kind", None) == "llm" and callable(describe) else None)
    return {"llm": out} if any(x is not None for x in out) else {}


def saved_llm_settings(config: Mapping[str, Any], base: LLMSettings | None = None, *,
                       overrides: Mapping[str, Any] | None = None) -> dict[int, LLMSettings]:
    """``{seat: LLMSettings}`` from a saved game's ``config["llm"]``.

    Each seat's saved settings are laid over ``base`` (which gives the run's pool); then
    ``overrides`` (options the user gave again at resume, e.g. a moved ``base_url``) win.
    Raises :class:`LLMConfigError` for a saved entry that is no longer valid.
    """
    base = base or LLMSettings()
    saved = config.get("llm")
    if not isinstance(saved, list):
        return {}
    fields = set(LLMSettings.model_fields) - _NOT_RESTORED
    out: dict[int, LLMSettings] = {}
    for seat, entry in enumerate(saved):
        if not isinstance(entry, Mapping) or not entry.get("model"):
            continue
        data = {k: v for k, v in entry.items() if k in fields}
        data.update(overrides or {})
        try:
            out[seat] = base.derive(**data)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise LLMConfigError(f"the saved settings of seat {seat} are not valid any more "
                                 f"({'.'.join(map(str, first.get('loc', ())))}: {first.get('msg')})") from None
    return out


async def _answers(settings: LLMSettings, timeout: float) -> str | None:
    """None when the endpoint answers HTTP at all (any status); else why not, in a few words."""
    import openai

    client = openai.AsyncOpenAI(api_key=settings.resolve_api_key(), base_url=settings.resolved_base_url(),
                                timeout=timeout, max_retries=0)
    try:
        await client.models.list(timeout=timeout)
        return None
    except openai.APIStatusError:  # 401, 404 ...: something is listening and answering
        return None
    except openai.APITimeoutError:
        return f"no answer within {timeout:g} s"
    except openai.APIConnectionError as exc:
        cause = exc.__cause__ or exc.__context__
        return (str(cause) or type(cause).__name__) if cause else "connection failed"
    finally:
        await client.close()


async def check_endpoints(settings: Sequence[LLMSettings], *, timeout: float = 5.0) -> None:
    """Raise :class:`EndpointDown` (one line) unless every distinct endpoint answers.

    A missing key for a remote endpoint is refused too (``LLMConfigError``).
    """
    seen: dict[str, LLMSettings] = {}
    for s in settings:
        s.check_base_url()
        s.resolve_api_key()
        seen.setdefault(s.resolved_base_url() or "https://api.openai.com/v1", s)
    problems = await asyncio.gather(*(_answers(s, timeout) for s in seen.values()))
    for url, why in zip(seen, problems):
        if why:
            raise EndpointDown(f"the LLM endpoint {url} does not answer ({why}); start it, or give its new "
                               "address with --base-url")
