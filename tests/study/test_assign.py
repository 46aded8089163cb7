"""Counterbalancing: over one cycle every condition is equally often in every position,
at every seat position, and with every task block; random assignment is reproducible."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from lab.study.assign import assignment, cycle_length, latin_square
from lab.study.model import parse_study
from studykit import example_text


def _study(n_cond: int, seats: list[int] | None, per: int, method: str = "latin", practice: bool = True):
    conds = "".join(f'\n[[conditions]]\nname = "c{i}"\npartners = "imap"\nseat = {i % 5}\n' for i in range(n_cond))
    pool = ", ".join(f'"seed:{200 + k}"' for k in range(n_cond * per))
    text = example_text()
    head, rest = text.split("[[conditions]]", 1)
    rest = rest.split("# -- tasks", 1)[1]
    text = head + conds + "# -- tasks" + rest
    text = text.replace('pool = ["seed:100", "seed:101", "seed:102", "seed:103"]', f"pool = [{pool}]")
    text = text.replace("games_per_condition = 1", f"games_per_condition = {per}")
    text = text.replace('method = "latin"', f'method = "{method}"')
    text = text.replace("seats = [0, 2]", f"seats = {seats}" if seats else "")
    if not practice:
        text = text.replace('practice = "seed:99"', "")
    return parse_study(text)


def test_latin_squares_are_latin():
    for n in range(1, 8):
        sq = latin_square(n)
        assert all(sorted(r) == list(range(n)) for r in sq)
        assert all(sorted(col) == list(range(n)) for col in zip(*sq))


@settings(max_examples=25, deadline=None)
@given(n_cond=st.integers(1, 4), seats=st.one_of(st.none(), st.lists(st.integers(0, 4), min_size=1, max_size=3,
                                                                      unique=True)),
       per=st.integers(1, 2))
def test_a_cycle_balances_conditions_positions_seats_and_blocks(n_cond, seats, per):
    s = _study(n_cond, seats, per)
    n = cycle_length(s)
    assert n == n_cond * len(seats or [0])
    plans = [assignment(s, p) for p in range(n)]
    pos, seat, block = Counter(), Counter(), Counter()
    for plan in plans:
        games = [g for g in plan if not g.practice]
        assert len(games) == n_cond * per
        assert Counter(g.condition for g in games) == {f"c{i}": per for i in range(n_cond)}
        assert plan[0].practice
        for g in games:
            pos[(g.condition, g.position)] += 1
            seat[(g.condition, g.seat)] += 1
            block[(g.condition, g.block)] += 1
    conds = [f"c{i}" for i in range(n_cond)]
    # every condition equally often in every position (and with every block)
    assert len({pos[(c, i)] for c in conds for i in range(n_cond)}) == 1
    assert len({block[(c, b)] for c in conds for b in range(n_cond)}) == 1
    seat_positions = seats or sorted({c.seat for c in s.conditions})
    if seats:
        assert len({seat[(c, q)] for c in conds for q in seats}) == 1
    else:  # no rotation: each condition at its own seat
        assert all(seat[(c, q)] == 0 for c in conds for q in seat_positions if q != int(c[1:]) % 5)
    # the next cycle repeats the first
    assert [g.to_json() for g in assignment(s, n)] == [g.to_json() for g in plans[0]]


def test_random_is_reproducible_and_fixed_is_the_same_for_everyone():
    s = _study(3, [0, 1], 1, method="random")
    a = [assignment(s, p) for p in range(6)]
    assert a == [assignment(s, p) for p in range(6)]
    assert len({tuple(g.condition for g in plan) for plan in a}) > 1
    f = _study(3, None, 1, method="fixed")
    assert len({tuple((g.condition, g.seat, g.task_id) for g in assignment(f, p)) for p in range(5)}) == 1
