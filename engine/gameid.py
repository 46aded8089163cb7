"""The one game-id scheme.

A game's id is random (``uuid4``) unless its inputs should give the same id every time
(``--deterministic`` suites, the study's dry runs, a deterministic app game): then it is
``uuid5(NAMESPACE_URL, "<namespace>:<part>:<part>...")``.  Every driver names its own
namespace and parts; the texts are the ones ids were always made from, so the ids of
games saved by earlier versions are the ids the same inputs give now:

=====================  ================================================  ===========================
namespace              parts                                             who
=====================  ================================================  ===========================
``calbench-run``       settings key, task id, occurrence in the suite    ``calbench run`` (a suite)
``calbench-study``     study name, participant, game index               a study participant's game
``calbench-play``      repr of (task id, seed, models, seat, channels,   ``calbench-play``
                       games played)
``calbench``           repr of (task id, seed, models, config)           ``run_game`` without an id
=====================  ================================================  ===========================
"""

from __future__ import annotations

import uuid

__all__ = ["game_id"]


def game_id(namespace: str, *parts: object, deterministic: bool = True) -> str:
    """A game id: derived from ``namespace`` and ``parts`` when ``deterministic``, else random."""
    if not deterministic:
        return str(uuid.uuid4())
    return str(uuid.uuid5(uuid.NAMESPACE_URL, namespace + ":" + ":".join(str(p) for p in parts)))
