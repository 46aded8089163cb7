"""The scripted suites' fast paths (issue 33) give what the plain paths give.

* DECISION calls of seats that answer at once (the scripted protocols) are awaited one
  after the other in the game's own task; seats that may wait are still gathered.
* The label bank is shuffled draw for draw as ``random.shuffle`` does.
* A task row's calendar is read by its quick path (``engine.model._calendar_from_json``)
  into the items, or the error, that ``item_from_json`` gives item by item.
* A frozen dataclass with the quick ``__init__`` (``engine.quickinit``) is built, compared,
  hashed and kept frozen as the dataclass's own ``__init__`` does it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from dataclasses import dataclass, field

import pytest
from hypothesis import given, strategies as st

from engine.events import ListSink
from engine.game import GameConfig, run_game
from engine.labelbank import _fast_shuffle, _shuffle
from engine.model import MAX_COST, TaskError, _calendar_from_json, item_from_json
from engine.quickinit import quick_init
from engine.taskref import resolve_tasks
from personas.registry import make_personas
from personas.scripted.imap import IMAPPersona


class Watched(IMAPPersona):
    """IMAP, noting the asyncio task each DECISION call runs in."""

    def __init__(self, seen: list) -> None:
        super().__init__()
        self.seen = seen

    async def decide(self, obs):
        self.seen.append(asyncio.current_task())
        return await super().decide(obs)


class Waiting(Watched):
    """A seat that may wait: its DECISION waits until every participant has been asked."""

    answers_at_once = False

    def __init__(self, seen: list, asked: dict) -> None:
        super().__init__(seen)
        self.asked = asked

    async def decide(self, obs):
        ev = self.asked.setdefault(obs.round, (asyncio.Event(), set()))
        ev[1].add(self.seat)
        if len(ev[1]) == len(obs.meeting.participants):
            ev[0].set()
        async with asyncio.timeout(5):
            await ev[0].wait()  # awaited one after the other, the first participant would wait for ever
        return await super().decide(obs)


def _task():
    return resolve_tasks("canonical:0")[0]


async def test_scripted_decisions_run_in_the_games_own_task_with_the_same_trace():
    task = _task()
    seen: list = []
    game_task = asyncio.current_task()
    res = await run_game(task, [Watched(seen) for _ in range(task.num_agents)], GameConfig(deterministic=True),
                         ListSink())
    assert seen and all(t is game_task for t in seen)  # no task per seat and round
    plain = await run_game(task, make_personas("imap", task.num_agents), GameConfig(deterministic=True))
    strip = lambda tr: [(e["type"], e["data"]) for e in tr["events"]]  # noqa: E731
    assert strip(res.trace) == strip(plain.trace)


async def test_seats_that_may_wait_are_still_asked_together():
    task = _task()
    seen: list = []
    asked: dict = {}
    res = await run_game(task, [Waiting(seen, asked) for _ in range(task.num_agents)],
                         GameConfig(deterministic=True))
    assert seen and all(t is not asyncio.current_task() for t in seen)
    assert res.metrics["meetings_total"] == len(task.meetings)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 64, 255, 256, 1000])
def test_the_bank_shuffle_is_random_shuffle_draw_for_draw(n):
    for seed in (0, 1, 7, 2 ** 40 + 3):
        a, b = list(range(n)), list(range(n))
        ra, rb = random.Random(seed), random.Random(seed)
        ra.shuffle(a)
        _fast_shuffle(rb, b)
        assert a == b
        assert ra.getstate() == rb.getstate()  # the draws after it are the same too
    assert _shuffle is _fast_shuffle  # this Python's shuffle is the one it copies


def test_free_text_patterns_compile_when_first_used_and_match_as_compiled():
    import re

    from engine import freetext, lazyre, protocol

    for mod in (freetext, protocol):
        lazy = [v for k, v in vars(mod).items() if k.startswith("_") and isinstance(v, lazyre.LazyPattern)]
        assert len(lazy) >= 10, mod.__name__
    fresh = lazyre.compile(r"(\d+)\s*(?:to|-)\s*(\d+)", re.I)
    assert "finditer" not in vars(fresh)  # not compiled at creation
    text = "slots 3 TO 5, or 7-9"
    same = re.compile(r"(\d+)\s*(?:to|-)\s*(\d+)", re.I)
    assert [m.groups() for m in fresh.finditer(text)] == [m.groups() for m in same.finditer(text)]
    assert "finditer" in vars(fresh) and fresh.pattern == same.pattern and fresh.flags == same.flags
    assert fresh.sub("x", text) == same.sub("x", text)
    assert freetext.slot_statements("I'm free at 4 and 5", sender=0, recipients=(1,), num_agents=3, num_slots=12)


def _depth(obj) -> int:  # the definition, recursively
    if isinstance(obj, dict):
        obj = list(obj.values())
    if not isinstance(obj, (list, tuple)):
        return 0
    return 1 + max((_depth(x) for x in obj), default=0)


_json = st.recursive(st.none() | st.integers() | st.text(max_size=3),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=2), inner, max_size=4),
                     max_leaves=40)


@given(_json)
def test_nesting_depth_is_the_depth_of_the_deepest_list_or_table(obj):
    from engine.inputs import nesting_depth

    assert nesting_depth(obj) == _depth(obj)
    d = _depth(obj)
    if d >= 2:
        assert nesting_depth(obj, stop_at=d - 2) == d - 1  # counting stops once past the limit


def _record(quick: bool) -> type:
    """One record class, with the dataclass's own ``__init__`` or with ``quick_init``'s."""
    @dataclass(frozen=True, slots=True)
    class Record:
        a: int
        b: str = "b"
        kind: str = field(default="k", init=False)
        c: tuple = ()

    return quick_init(Record) if quick else Record


_Plain, _Quick = _record(False), _record(True)


@given(st.integers(), st.text(max_size=3), st.tuples(st.integers()), st.sampled_from(["pos", "kw", "defaults"]))
def test_quick_init_builds_what_the_dataclass_builds(a, b, c, how):
    def build(cls):
        if how == "pos":
            return cls(a, b, c)
        if how == "kw":
            return cls(c=c, a=a, b=b)
        return cls(a)
    plain, quick = build(_Plain), build(_Quick)
    assert dataclasses.astuple(quick) == dataclasses.astuple(plain)
    assert repr(quick) == repr(plain)
    assert quick == build(_Quick) and hash(quick) == hash(build(_Quick))
    assert dataclasses.replace(quick, a=a + 1).a == a + 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick.a = 0


def test_quick_init_refuses_what_it_does_not_rebuild():
    with pytest.raises(TypeError, match="__post_init__"):
        @quick_init
        @dataclass(frozen=True, slots=True)
        class Checked:
            a: int

            def __post_init__(self):
                pass
    with pytest.raises(TypeError, match="frozen, slotted"):
        quick_init(dataclass(slots=True)(type("Loose", (), {"__annotations__": {"a": int}})))
    with pytest.raises(TypeError, match="field 'xs'"):
        @quick_init
        @dataclass(frozen=True, slots=True)
        class Listy:
            xs: list = field(default_factory=list)
    with pytest.raises(TypeError):
        _Quick()  # a required field is still required


#: the values a row's item fields meet: whole numbers at and beside the bounds (a cost of
#: 0..MAX_COST, an id of 0..2**63-1) and what is not a whole number
_VALUES = [0, 1, -1, MAX_COST, MAX_COST + 1, 2 ** 63 - 1, 2 ** 63, True, 2.0, 2.5, float("nan"), "3", None]
_ITEMS = ([{"errand_id": e, "cost": c} for e in _VALUES for c in _VALUES]
          + [{"errand_id": 1, "cost": 2, "blocked": b} for b in _VALUES + [False]]
          + [{"errand_id": e} for e in _VALUES] + [{"meeting_id": m, "cost": c} for m in _VALUES for c in _VALUES]
          + [None, 3, "x", [], {}, {"cost": 1}, {"errand_id": 1, "meeting_id": 2}])


def _read(read):
    try:
        return ("ok", read())
    except TaskError as exc:
        return ("error", str(exc))


def test_a_calendar_is_read_as_item_from_json_reads_it():
    for s, it in enumerate(_ITEMS):
        raw = [None] * (s % 3) + [it]  # the slot's number is in the error
        quick = _read(lambda: _calendar_from_json(raw, s % 4))
        plain = _read(lambda: tuple(item_from_json(x, f"calendar {s % 4} slot {k}") for k, x in enumerate(raw)))
        assert quick == plain, it
