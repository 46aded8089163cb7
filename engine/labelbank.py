"""Private natural-language labels for errands and meetings (SPEC §2, paper A.1).

The bank is three JSON files shipped in :mod:`engine.labels` (one per sensitivity tier).
:func:`assign_labels` gives every errand and every meeting of a scenario a label and a
tier, deterministically from the scenario's seed:

* the random stream is ``random.Random(int.from_bytes(sha256(b"calbench-labels:<seed>")[:8]))``
  (never ``hash()`` of a string, so it is the same in every process);
* tiers are balanced: each agent's errands (in slot order) get a shuffled multiset with
  every tier equally often (the remainder drawn without replacement), and likewise the
  meetings (by id);
* within a tier, labels are dealt from a seeded shuffle of the bank, so no label repeats
  inside one scenario.  If a huge scenario exhausts a tier, the tier is dealt again with
  a suffix (``"... (2)"``), which keeps every label distinct.

Labels live beside the calendars (``Labels``), never inside them.
"""

from __future__ import annotations

import hashlib
import json
import random
from functools import lru_cache
from importlib import resources
from typing import Any, Iterator

from engine.model import Errand, Label, Labels, TaskError

__all__ = ["TIERS", "load_bank", "assign_labels", "label_rng"]

#: Sensitivity tiers, least to most sensitive.
TIERS: tuple[str, ...] = ("public", "neutral", "sensitive")


@lru_cache(maxsize=1)
def load_bank() -> dict[str, tuple[str, ...]]:
    """The label bank: tier -> labels (file order).  Cached; works from an installed package."""
    root = resources.files("engine.labels")
    bank: dict[str, tuple[str, ...]] = {}
    for tier in TIERS:
        raw = json.loads(root.joinpath(f"{tier}.json").read_text(encoding="utf-8"))
        if raw.get("tier") != tier or not isinstance(raw.get("labels"), list):
            raise TaskError(f"label bank file {tier}.json must be {{'tier': '{tier}', 'labels': [...]}}")
        labels = tuple(str(x).strip() for x in raw["labels"])
        if len(set(labels)) != len(labels) or any(not x for x in labels):
            raise TaskError(f"label bank file {tier}.json has empty or repeated labels")
        bank[tier] = labels
    return bank


def label_rng(seed: int | str) -> random.Random:
    """The label stream of a scenario, from its seed (or its task id when it has none)."""
    digest = hashlib.sha256(f"calbench-labels:{seed}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _balanced_tiers(rng: random.Random, n: int) -> list[str]:
    k = len(TIERS)
    tiers = list(TIERS) * (n // k) + rng.sample(list(TIERS), n % k)
    _shuffle(rng, tiers)
    return tiers


@lru_cache(maxsize=64)
def _shuffle_steps(n: int) -> tuple[tuple[int, int], ...]:
    """The steps of shuffling ``n`` items: each position ``i`` from the last down to 1, with the
    bits ``random.shuffle`` draws to pick a position ``0..i`` (those of ``i + 1``)."""
    return tuple((i, (i + 1).bit_length()) for i in range(n - 1, 0, -1))


def _fast_shuffle(rng: random.Random, x: list) -> None:
    """``rng.shuffle(x)``, draw for draw (the same ``getrandbits`` calls, so the same order and
    the same state after), with the draws inlined and the bit counts worked out once per
    length: shuffling the bank is most of labelling a task.  Checked against
    ``random.shuffle`` at import (:data:`_shuffle`)."""
    getrandbits = rng.getrandbits
    for i, k in _shuffle_steps(len(x)):
        j = getrandbits(k)
        while j > i:
            j = getrandbits(k)
        x[i], x[j] = x[j], x[i]


def _pick_shuffle():
    """:func:`_fast_shuffle` when it deals exactly as this Python's ``random.shuffle``, else that."""
    for seed in range(3):
        a, b = list(range(300)), list(range(300))
        ra, rb = random.Random(seed), random.Random(seed)
        ra.shuffle(a)
        _fast_shuffle(rb, b)
        if a != b or ra.getstate() != rb.getstate():
            return lambda rng, x: rng.shuffle(x)
    return _fast_shuffle


_shuffle = _pick_shuffle()


@lru_cache(maxsize=1)
def _bank_labels() -> dict[str, tuple[Label, ...]]:
    """The bank as ``Label`` objects, made once: they are frozen, so every scenario deals the
    same objects (making them was a good part of labelling a task)."""
    return {tier: tuple(Label(text, tier) for text in texts) for tier, texts in load_bank().items()}


def _dealer(rng: random.Random, tier: str) -> Iterator[Label]:
    order = list(_bank_labels()[tier])
    _shuffle(rng, order)
    round_no = 1
    while True:
        for label in order:
            yield label if round_no == 1 else Label(f"{label.text} ({round_no})", tier)
        round_no += 1


def _errand_ids(cal: Any) -> list[int]:
    out = []
    for it in cal:
        if isinstance(it, Errand):
            out.append(it.errand_id)
        elif isinstance(it, dict) and "errand_id" in it:
            out.append(int(it["errand_id"]))
    return out


def assign_labels(task_like: Any, seed: int | str) -> Labels:
    """Labels for every errand ``(agent, errand_id)`` and every meeting id.

    ``task_like`` is an :class:`engine.model.Task` or a task row dict (anything with
    ``calendars`` and ``meetings``).  Pure: the same calendars, meetings and seed give the
    same labels in every process.
    """
    if isinstance(task_like, dict):
        calendars = task_like.get("calendars") or []
        meeting_ids = tuple(int(m["id"]) for m in task_like.get("meetings") or [])
    else:
        calendars = task_like.calendars
        meeting_ids = tuple(m.id for m in task_like.meetings)
    errands, meetings = _assign(str(seed), tuple(tuple(_errand_ids(cal)) for cal in calendars), meeting_ids)
    return Labels(dict(errands), dict(meetings))  # the caller's own dicts


@lru_cache(maxsize=4096)
def _assign(seed: str, errand_ids: tuple[tuple[int, ...], ...],
            meeting_ids: tuple[int, ...]) -> tuple[dict[tuple[int, int], Label], dict[int, Label]]:
    """:func:`assign_labels` by what it reads — a suite repeats one scenario under several
    ids and seeds its labels alike, and shuffling the bank is most of the cost of loading
    a task file.  (The seed enters as text, as :func:`label_rng` reads it.)"""
    rng = label_rng(seed)
    dealers = {tier: _dealer(rng, tier) for tier in TIERS}  # each shuffles its tier at its first deal
    errands: dict[tuple[int, int], Label] = {}
    for agent, ids in enumerate(errand_ids):
        for eid, tier in zip(ids, _balanced_tiers(rng, len(ids))):
            errands[(agent, eid)] = next(dealers[tier])
    meetings: dict[int, Label] = {}
    for mid, tier in zip(meeting_ids, _balanced_tiers(rng, len(meeting_ids))):
        meetings[mid] = next(dealers[tier])
    return errands, meetings
