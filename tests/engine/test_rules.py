"""Batch validation: the seven rules, their plain-word messages, and transactional behaviour."""

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.actions import Message, Reschedule, Schedule
from engine.model import Errand, MeetingCopy
from engine.rules import BatchOutcome, Rejection, check_batch

CAL = (None, Errand(3, 10), Errand(7, 100, blocked=True), MeetingCopy(2), None, Errand(4, 1))


def decide(actions, cal=CAL):
    return check_batch(cal, actions, meeting_id=9, require_schedule=True)


def test_schedule_into_free_slot():
    out = decide([Schedule(9, 0)])
    assert isinstance(out, BatchOutcome)
    assert out.calendar[0] == MeetingCopy(9) and out.cost == 0 and out.scheduled_slot == 0


def test_move_errand_then_schedule_costs_its_value():
    out = decide([Reschedule(3, 1, 4, "x"), Schedule(9, 1)])
    assert isinstance(out, BatchOutcome)
    assert out.calendar[4] == Errand(3, 10) and out.calendar[1] == MeetingCopy(9)
    assert out.cost == 10


def test_swap_through_freed_slot_is_allowed():
    # Errand 4 moves to 0, errand 3 moves into 5 (freed by the first move), meeting at 1.
    out = decide([Reschedule(4, 5, 0), Reschedule(3, 1, 5), Schedule(9, 1)])
    assert isinstance(out, BatchOutcome) and out.cost == 11


def test_moving_a_prior_meeting_copy_costs_one():
    out = decide([Reschedule(2, 3, 4), Schedule(9, 3)])
    assert isinstance(out, BatchOutcome) and out.cost == 1


def rule_of(out):
    assert isinstance(out, Rejection), out
    return out.rule


def test_each_rule():
    assert rule_of(decide([Schedule(9, 16)])) == 1
    assert rule_of(decide([Reschedule(3, 1, -1), Schedule(9, 1)])) == 1
    assert rule_of(decide([Schedule(9, "5")])) == 1
    assert rule_of(decide([Reschedule(99, 1, 4), Schedule(9, 1)])) == 2
    assert rule_of(decide([Reschedule(3, 0, 4), Schedule(9, 1)])) == 2
    assert rule_of(decide([Reschedule(7, 2, 4), Schedule(9, 2)])) == 3
    assert rule_of(decide([Reschedule(3, 1, 4), Reschedule(4, 5, 4), Schedule(9, 1)])) == 4
    assert rule_of(decide([Reschedule(3, 1, 2), Schedule(9, 1)])) == 5
    assert rule_of(decide([])) == 6
    assert rule_of(decide([Schedule(9, 0), Schedule(9, 4)])) == 6
    assert rule_of(decide([Schedule(8, 0)])) == 6
    assert rule_of(decide([Schedule(9, 1)])) == 7


def test_messages_name_the_rule_and_action_in_plain_words():
    assert str(decide([])) == "Expected exactly 1 schedule action, got 0"
    msg = str(decide([Reschedule(7, 2, 4), Schedule(9, 2)]))
    assert "blocked" in msg and "slot 2" in msg and "Errand #7" in msg
    assert "slot 1" in str(decide([Schedule(9, 1)])) and "Errand #3" in str(decide([Schedule(9, 1)]))


def test_voluntary_allows_no_schedule():
    out = check_batch(CAL, [Reschedule(3, 1, 4)], meeting_id=9, require_schedule=False)
    assert isinstance(out, BatchOutcome) and out.scheduled_slot is None
    assert rule_of(check_batch(CAL, [Schedule(9, 0)], meeting_id=9, require_schedule=False)) == 6


def test_messages_are_not_calendar_actions():
    assert rule_of(decide([Message("dm", "hi", 1), Schedule(9, 0)])) == 6


# -- properties --------------------------------------------------------------------------

items = st.one_of(st.none(), st.builds(Errand, st.integers(1, 6), st.sampled_from([1, 10, 100]), st.booleans()),
                  st.builds(MeetingCopy, st.integers(20, 22)))


@st.composite
def calendars(draw):
    n = draw(st.integers(2, 7))
    cal = draw(st.lists(items, min_size=n, max_size=n))
    # item ids unique within a calendar
    seen, out = set(), []
    for it in cal:
        if it is not None and it.item_id in seen:
            it = None
        if it is not None:
            seen.add(it.item_id)
        out.append(it)
    return tuple(out)


@st.composite
def batches(draw, cal):
    n = len(cal)
    slot = st.integers(-1, n)
    acts = []
    for _ in range(draw(st.integers(0, 3))):
        f = draw(slot)
        item = cal[f] if 0 <= f < n else None
        iid = item.item_id if item is not None and draw(st.booleans()) else draw(st.integers(0, 25))
        acts.append(Reschedule(iid, f, draw(slot)))
    if draw(st.booleans()):
        acts.append(Schedule(9, draw(slot)))
    return acts


def multiset(cal):
    return sorted((repr(it) for it in cal if it is not None and not (isinstance(it, MeetingCopy) and it.meeting_id == 9)))


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_accepted_batch_conserves_items_and_never_double_books(data):
    cal = data.draw(calendars())
    acts = data.draw(batches(cal))
    out = check_batch(cal, acts, meeting_id=9, require_schedule=True)
    if isinstance(out, BatchOutcome):
        assert multiset(out.calendar) == multiset(cal)  # every errand and prior copy kept, none duplicated
        assert sum(1 for it in out.calendar if it == MeetingCopy(9)) == 1
        assert len(out.calendar) == len(cal)
        for s, it in enumerate(cal):  # blocked items never move
            if isinstance(it, Errand) and it.blocked:
                assert out.calendar[s] == it
        assert out.cost == sum(mv.cost for mv in out.moves)
    else:
        assert isinstance(out, Rejection) and 1 <= out.rule <= 7 and str(out)
