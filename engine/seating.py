"""Who sits where, as a game's ``config`` records it, and which seats a person played.

``seats_config`` is the ``config["agents"]`` list: the same entries while a game runs
(the store's row made when it starts) and once it ends (the engine's trace) — ``type``
is the authors' meaning (the protocol's name for a scripted seat, else the persona kind),
``kind`` the persona kind.  ``human_seats`` reads a saved game's config back: the one
lookup of the seats people played (the app's ``--resume``, the saved-games list, a
served game's resume).
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["agent_type", "seats_config", "human_seats", "human_seat"]


def agent_type(persona: Any) -> str:
    """A seat's ``type`` in the trace, with the authors' meaning: the protocol's name for a
    scripted seat (``imap``, ``dsm-welfare``), else the persona kind (``llm``, ``human``).
    The kind itself is recorded beside it as ``kind``."""
    kind, model = getattr(persona, "kind", None), getattr(persona, "model", None)
    if kind == "scripted" and model:
        return str(model)
    return str(kind)


def seats_config(seats: Sequence[Any]) -> list[dict[str, Any]]:
    """``config["agents"]``: one entry per seat, the same while a game runs and after it ends."""
    return [{"type": agent_type(s), "kind": getattr(s, "kind", None), "model": getattr(s, "model", None),
             "variant": getattr(s, "variant", None)} for s in seats]


def human_seats(config: Any, saved_agents: str | None = None) -> list[int]:
    """The seats people played in a saved game, in seat order.

    Read from ``config``: ``human_seat`` (the app, a study), the seats whose ``type`` or
    ``kind`` is ``human``, ``remote_seats`` (a served table); else from the saved agents
    label (``human,imap,...``).
    """
    cfg = config if isinstance(config, dict) else {}
    out: set[int] = set()
    if isinstance(cfg.get("human_seat"), int) and not isinstance(cfg.get("human_seat"), bool):
        out.add(cfg["human_seat"])
    agents = cfg.get("agents")
    for i, a in enumerate(agents if isinstance(agents, list) else []):
        if isinstance(a, dict) and "human" in (a.get("type"), a.get("kind")):
            out.add(i)
    remote = cfg.get("remote_seats")
    out.update(s for s in (remote if isinstance(remote, list) else []) if isinstance(s, int))
    if not out and saved_agents:
        out.update(i for i, n in enumerate(str(saved_agents).split(",")) if n.strip().lower() == "human")
    return sorted(out)


def human_seat(config: Any, saved_agents: str | None = None) -> int | None:
    """The seat the person played (``config["human_seat"]`` first), or None."""
    cfg = config if isinstance(config, dict) else {}
    if isinstance(cfg.get("human_seat"), int) and not isinstance(cfg.get("human_seat"), bool):
        return cfg["human_seat"]
    seats = human_seats(cfg, saved_agents)
    return seats[0] if seats else None
