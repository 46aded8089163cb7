"""What LLM seats cost and how they failed, over saved games (``calbench report``).

Per game, from its events (``engine.usage``): prompt, completion and cached prompt tokens
per seat, the judge's tokens when ``--judge`` ran, failed seat calls by whose fault
(infrastructure / configuration / agent), and the three privacy readings side by side —
the estimator's ``vps``, the seats' ``reflection_vps`` and the ``judge_vps``.

Money needs prices.  A prices file is a small TOML, dollars (or any one currency) per
million tokens, one table per model name as the endpoint knows it::

    currency = "USD"            # optional, only printed

    [models."gpt-4o-mini"]
    prompt = 0.15               # per 1M prompt tokens not served from the cache
    cached = 0.075              # per 1M cached prompt tokens (default: the prompt price)
    completion = 0.60           # per 1M completion tokens

A model without an entry costs nothing in the sums and is listed under ``unpriced``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Iterable, Mapping

from engine.inputs import check_id, printable
from engine.usage import failure_counts, token_usage

__all__ = ["PricesError", "load_prices", "game_costs", "llm_report"]


#: Largest price per million tokens accepted (the dearest models cost a few hundred).
MAX_PRICE = 1_000_000


class PricesError(ValueError):
    """A prices file that cannot be used; one sentence naming the file and the key."""


def load_prices(path: str | Path) -> dict[str, Any]:
    """``{"currency": str, "models": {model: {"prompt", "cached", "completion"}}}`` from a TOML file."""
    from engine.inputs import loads_toml, read_text

    path = Path(path)
    try:
        raw = loads_toml(read_text(path, "prices file", error=PricesError), f"prices file {path}", error=PricesError)
    except FileNotFoundError:
        raise PricesError(f"prices file {path} not found") from None
    except OSError as exc:
        raise PricesError(f"prices file {path} cannot be read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PricesError(f"prices file {path} is not valid TOML: {exc}") from None
    unknown = set(raw) - {"currency", "models"}
    if unknown:
        raise PricesError(f"prices file {path}: unknown key(s) {', '.join(sorted(unknown))}; use currency and "
                          "[models.\"NAME\"] tables")
    models = raw.get("models") or {}
    if not isinstance(models, dict) or not models:
        raise PricesError(f"prices file {path} prices no model; add [models.\"NAME\"] with prompt and completion")
    out: dict[str, dict[str, float]] = {}
    for name, table in models.items():
        check_id(name, f"prices file {path}: a model name", error=PricesError)
        if not isinstance(table, dict):
            raise PricesError(f"prices file {path}: models.{name} must be a table")
        extra = set(table) - {"prompt", "cached", "completion"}
        if extra:
            raise PricesError(f"prices file {path}: models.{name}.{sorted(extra)[0]} is not a price "
                              "(use prompt, cached, completion)")
        prices: dict[str, float] = {}
        for k in ("prompt", "completion", "cached"):
            v = table.get(k)
            if v is None:
                if k == "cached":
                    continue
                raise PricesError(f"prices file {path}: models.{name} needs {k} = <price per 1M tokens>")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= MAX_PRICE:
                raise PricesError(f"prices file {path}: models.{name}.{k} must be a number from 0 to "
                                  f"{MAX_PRICE:,} (per 1M tokens), not {v!r}")
            prices[k] = float(v)
        prices.setdefault("cached", prices["prompt"])
        out[str(name)] = prices
    currency = raw.get("currency") or "USD"
    if not isinstance(currency, str) or not 0 < len(currency) <= 16 or printable(currency) != currency:
        raise PricesError(f"prices file {path}: currency must be a short name like \"USD\" (at most 16 "
                          "printable characters)")
    return {"currency": currency, "models": out}


def _seat_models(trace: Mapping[str, Any]) -> dict[int, str]:
    cfg = trace.get("config") or {}
    out: dict[int, str] = {}
    for i, entry in enumerate(cfg.get("llm") or []):
        if isinstance(entry, Mapping) and entry.get("model"):
            out[i] = str(entry["model"])
    for i, a in enumerate(cfg.get("agents") or []):
        if i not in out and isinstance(a, Mapping) and str(a.get("model") or "").startswith("llm:"):
            out[i] = str(a["model"])[4:]
    return out


def _money(tokens: Mapping[str, int], price: Mapping[str, float] | None) -> float | None:
    if price is None:
        return None
    cached = min(tokens["cached_tokens"], tokens["prompt_tokens"])
    return ((tokens["prompt_tokens"] - cached) * price["prompt"] + cached * price["cached"]
            + tokens["completion_tokens"] * price["completion"]) / 1e6


def game_costs(trace: Mapping[str, Any], prices: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Tokens per seat and model, money (when priced), failures by class and the VPS readings of one game."""
    events = trace.get("events") or []
    judge = trace.get("judge") or {}
    usage = token_usage(events, judge.get("records") or [])
    models = _seat_models(trace)
    table = (prices or {}).get("models") or {}
    per_model: dict[str, dict[str, int]] = {}
    for seat, tok in usage["per_seat"].items():
        model = models.get(int(seat), "?")
        acc = per_model.setdefault(model, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0})
        for k in acc:
            acc[k] += tok[k]
    if usage.get("judge"):
        jm = f"{judge.get('model')} (judge)"
        per_model[jm] = dict(usage["judge"])
    money = 0.0
    unpriced: list[str] = []
    for model, tok in per_model.items():
        name = model[:-len(" (judge)")] if model.endswith(" (judge)") else model
        m = _money(tok, table.get(name))
        tok["money"] = m
        if m is None:
            unpriced.append(name)
        else:
            money += m
    metrics = trace.get("metrics") or {}
    total = dict(usage["total"])
    return {
        "game_id": trace.get("game_id"),
        "agents": (trace.get("saved") or {}).get("agents") or "?",
        "tokens": total,
        "per_seat": usage["per_seat"],
        "per_model": per_model,
        "money": money if prices else None,
        "unpriced": sorted(set(unpriced)) if prices else [],
        "failures": failure_counts(events),
        "vps": metrics.get("vps"),
        "reflection_vps": (metrics.get("reflection_vps") or {}).get("calibrated_total"),
        "judge_vps": (metrics.get("judge_vps") or {}).get("calibrated_total"),
    }


def _mean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def llm_report(traces: Iterable[Mapping[str, Any]], prices: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Rows per table (the saved agents spec) over games that used an LLM (seat or judge).

    Each row: ``agents, games, prompt_tokens, completion_tokens, cached_tokens`` (per game),
    ``cached_share``, ``money_per_game`` (None without prices), ``infra_failures``,
    ``config_failures``, ``agent_failures`` (sums), ``vps``, ``reflection_vps``,
    ``judge_vps`` (means over the games that have them).
    """
    games = [game_costs(t, prices) for t in traces]
    games = [g for g in games if g["tokens"]["calls"] or g["judge_vps"] is not None
             or any(g["failures"][k] for k in ("infra", "configuration"))]
    rows: list[dict[str, Any]] = []
    by: dict[str, list[dict[str, Any]]] = {}
    for g in games:
        by.setdefault(g["agents"], []).append(g)
    for agents, gs in sorted(by.items()):
        n = len(gs)
        tok = {k: sum(g["tokens"][k] for g in gs) for k in ("prompt_tokens", "completion_tokens", "cached_tokens")}
        rows.append({
            "agents": agents, "games": n,
            **{k: v / n for k, v in tok.items()},
            "cached_share": tok["cached_tokens"] / tok["prompt_tokens"] if tok["prompt_tokens"] else None,
            "money_per_game": (sum(g["money"] for g in gs) / n) if prices else None,
            "unpriced": sorted({m for g in gs for m in g["unpriced"]}),
            "infra_failures": sum(g["failures"]["infra"] for g in gs),
            "config_failures": sum(g["failures"]["configuration"] for g in gs),
            "agent_failures": sum(g["failures"]["agent"] for g in gs),
            "vps": _mean(g["vps"] for g in gs),
            "reflection_vps": _mean(g["reflection_vps"] for g in gs),
            "judge_vps": _mean(g["judge_vps"] for g in gs),
        })
    return {"currency": (prices or {}).get("currency"), "rows": rows, "games": games}

