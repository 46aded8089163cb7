"""Counterbalancing: over one cycle every condition is equally often in every position,
at every seat position, and with every task block; random assignment is reproducible."""

from __future__ import annotations

import json
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


def _carryover(s) -> Counter:
    """How often condition b directly follows condition a over one cycle (practice left out)."""
    pairs: Counter = Counter()
    for p in range(cycle_length(s)):
        order = [g.condition for g in assignment(s, p) if not g.practice]
        pairs.update(zip(order, order[1:]))
    return pairs


def test_three_conditions_get_a_williams_design_when_the_cycle_holds_one():
    """C = 3 with two seat positions: a cycle of 6 holds a Williams pair (6 orders), so every
    condition follows every other equally often; with one seat position it cannot (3 orders, cyclic)."""
    from lab.study.check import design

    s = _study(3, [0, 2], 1)
    pairs = _carryover(s)
    assert len(pairs) == 6 and set(pairs.values()) == {2}, pairs
    d = design(s)
    assert d["order_design"] == "williams" and len(d["latin_square"]) == 6
    # still balanced for position and seat (the hypothesis test above covers C up to 4)
    seat = Counter((g.condition, g.seat) for p in range(6) for g in assignment(s, p) if not g.practice)
    assert len(seat) == 6 and set(seat.values()) == {3}
    odd = _study(3, [0], 1)
    assert design(odd)["order_design"] == "cyclic"
    assert len(_carryover(odd)) == 3  # a cyclic square: c0→c1, c1→c2, c2→c0 only
    assert design(_study(4, None, 1))["order_design"] == "williams"


def test_study_check_names_the_design_and_warns_about_pool_tasks_no_slot_uses(cli, tmp_path):
    text = example_text().replace("games_per_condition = 1", "games_per_condition = 2")
    path = tmp_path / "s.toml"
    path.write_text(text)
    rc, out, err = cli("study", "check", str(path))
    assert rc == 0, err
    assert "order design: balanced Latin square (Williams design" in out
    assert "no slot uses" not in out  # 2 conditions x 2 games: all 4 pool tasks are played
    path.write_text(text.replace('"seed:103"]', '"seed:103", "seed:104", "seed:105"]'))
    rc, out, err = cli("study", "check", str(path))
    assert rc == 0, err
    assert "WARNING: 2 pool task(s) no slot uses:" in out, out
    rc, out, err = cli("study", "check", str(path), "--json")
    assert len(json.loads(out)["unused_tasks"]) == 2 and json.loads(out)["order_design"] == "williams"
