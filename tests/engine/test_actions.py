"""The response envelope is read leniently; anything unreadable is an EnvelopeError."""

import pytest

from engine.actions import EnvelopeError, Message, Reschedule, Schedule, parse_envelope


def test_plain_envelope():
    env = parse_envelope('{"thinking": "hm", "actions": [{"type": "schedule", "meeting_id": 2, "slot": 5}]}')
    assert env.thinking == "hm"
    assert env.actions == (Schedule(2, 5),)


def test_envelope_inside_prose_and_fence():
    text = "Sure! Here is my plan:\n```json\n{\"thinking\": \"x\", \"actions\": [{\"type\": \"dm\", \"to\": 3, \"content\": \"slot 4?\"}]}\n```\nThanks."
    env = parse_envelope(text)
    assert env.actions == (Message("dm", "slot 4?", 3),)
    prose = 'I will do this {"actions": [{"type": "reschedule", "item_id": 7, "from_slot": 5, "to_slot": "12", "justification": "room"}]} ok'
    assert parse_envelope(prose).actions == (Reschedule(7, 5, 12, "room"),)


def test_bare_list_and_empty_pass():
    assert parse_envelope("[]").actions == ()
    assert parse_envelope('{"thinking": "", "actions": []}').actions == ()
    assert parse_envelope('[{"type": "all_groupchat", "content": "hi"}]').actions == (Message("all_groupchat", "hi"),)


def test_payload_is_kept():
    env = parse_envelope('{"actions": [{"type": "dm", "to": 1, "content": "c", "payload": {"kind": "costs"}}]}')
    assert env.actions[0].payload == {"kind": "costs"}


@pytest.mark.parametrize("text", ["", "no json here at all", '{"thinking": "only"}',
                                  '{"actions": [{"type": "teleport"}]}', '{"actions": [{"type": "dm", "to": "bob"}]}',
                                  '{"actions": 5}'])
def test_unreadable_replies_raise_envelope_error(text):
    with pytest.raises(EnvelopeError):
        parse_envelope(text)


def test_non_integer_slot_survives_parsing_for_rule_1():
    env = parse_envelope('{"actions": [{"type": "schedule", "meeting_id": 1, "slot": "five"}]}')
    assert env.actions[0].slot == "five"
