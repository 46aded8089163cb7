"""Issue 15: fuzzing (hypothesis) over trace import and task rows.

Whatever JSON a file holds, ``calbench import``'s path (type checks, fold, verification,
store) either stores the trace or refuses it with a StoreError / UserError / TaskError —
never another exception, and a refusal leaves the database as it was.  Whatever a task
row holds, ``Task.from_row`` either builds a task or raises TaskError.
"""

from __future__ import annotations

import asyncio
import copy
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calbench_cli.commands import UserError
from engine.model import Task, TaskError
from saves.store import Store, StoreError

from .helpers import our_trace

BASE = our_trace(3)
ROW = BASE["task"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                           max_leaves=12)


def _paths(obj, prefix=()):
    """Every (container, key) location in a JSON value."""
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append((prefix, k))
            out.extend(_paths(v, prefix + (k,)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.append((prefix, i))
            out.extend(_paths(v, prefix + (i,)))
    return out


TRACE_PATHS = _paths(BASE)
ROW_PATHS = _paths(ROW)


def _mutate(obj, paths, picks, values):
    obj = copy.deepcopy(obj)
    for pick, value in zip(picks, values):
        prefix, key = paths[pick % len(paths)]
        node = obj
        try:
            for p in prefix:
                node = node[p]
            node[key] = value
        except (KeyError, IndexError, TypeError):
            continue
    return obj


async def _import(trace):
    from lab.archive import import_verified

    async with await Store.open(":memory:") as store:
        try:
            outcome = await import_verified(store, trace, "fuzz.json", keep_unverified=True)
        except (StoreError, UserError):
            assert await store.list_games() == []  # a refusal stores nothing
            return "refused"
        games = await store.list_games()
        if outcome[1] in ("imported", "unverified"):
            assert len(games) == 1 and games[0]["verification"] in ("verified", "unverified")
            await store.load_trace(games[0]["game_id"])  # and it reads back
        return outcome[1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(picks=st.lists(st.integers(min_value=0, max_value=10 ** 6), min_size=1, max_size=4),
       values=st.lists(json_values, min_size=4, max_size=4))
def test_import_never_raises_anything_unexpected(picks, values):
    trace = _mutate(BASE, TRACE_PATHS, picks, values)
    assert asyncio.run(_import(json.loads(json.dumps(trace)) if _jsonable(trace) else trace)) in (
        "refused", "imported", "unverified", "duplicate")


@settings(max_examples=60, deadline=None)
@given(value=json_values)
def test_import_of_any_top_level_value(value):
    assert asyncio.run(_import(value)) in ("refused", "imported", "unverified")


@settings(max_examples=200, deadline=None)
@given(picks=st.lists(st.integers(min_value=0, max_value=10 ** 6), min_size=1, max_size=4),
       values=st.lists(json_values, min_size=4, max_size=4))
def test_task_rows_build_or_raise_task_error(picks, values):
    row = _mutate(ROW, ROW_PATHS, picks, values)
    try:
        task = Task.from_row(row)
    except TaskError:
        return
    for cal in task.calendars:  # a task that builds holds only sane costs
        for it in cal:
            if it is not None:
                assert 0 <= it.cost <= 1_000_000


def test_an_unmutated_trace_imports_verified():
    assert asyncio.run(_import(copy.deepcopy(BASE))) == "imported"


def _jsonable(obj):
    try:
        json.dumps(obj, allow_nan=True)
        return True
    except (TypeError, ValueError):
        return False
