"""LLM seats: specs, settings, personas files and the prompts (no network needed)."""

from __future__ import annotations

import pytest
from llmkit import small_task

from engine.observe import (
    DecisionObservation,
    Delivered,
    SeatBriefing,
    TurnObservation,
    meeting_view,
    seat_view,
)
from personas.llm.factory import (
    LLMConfigError,
    LLMSettings,
    PersonasFileError,
    load_personas_file,
    make_llm_persona,
    parse_llm_spec,
)
from personas.llm.prompts import HEADER_RE, VARIANTS, PromptBook, load_variant


# -- specs and settings ---------------------------------------------------------------------
@pytest.mark.parametrize("spec, expected", [
    ("llm:gpt-4o-mini", ("gpt-4o-mini", None)),
    ("llm:llama3.1:8b", ("llama3.1:8b", None)),
    ("llm:Qwen/Qwen2.5-7B-Instruct+redteam", ("Qwen/Qwen2.5-7B-Instruct", "redteam")),
    ("llm:gpt-4o-mini+nosy-highpressure", ("gpt-4o-mini", "nosy-highpressure")),
    ("llm", (None, None)),
])
def test_parse_spec(spec, expected):
    assert parse_llm_spec(spec) == expected


@pytest.mark.parametrize("spec, words", [
    ("llm:gpt+sneaky", "unknown prompt variant 'sneaky'"),
    ("llm:", "no model name"),
    ("imap", "not an LLM persona spec"),
])
def test_bad_specs(spec, words):
    with pytest.raises(LLMConfigError, match=words):
        parse_llm_spec(spec)


def test_make_persona_model_and_variant():
    s = LLMSettings(base_url="http://127.0.0.1:9/v1")
    p = make_llm_persona("llm:m1+redteam", s)
    assert (p.kind, p.model, p.model_name, p.variant) == ("llm", "llm:m1", "m1", "redteam")
    q = make_llm_persona("llm", s.derive(model="m2", variant="nosy-highpressure"))
    assert (q.model, q.variant) == ("llm:m2", "nosy-highpressure")
    with pytest.raises(LLMConfigError, match="names no model"):
        make_llm_persona("llm", s)


def test_key_resolution_and_public_settings(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("MY_KEY", raising=False)
    remote = LLMSettings(api_key_env="MY_KEY")
    with pytest.raises(LLMConfigError, match=r"\$MY_KEY"):
        remote.resolve_api_key()
    monkeypatch.setenv("MY_KEY", "sk-secret-123")
    assert remote.resolve_api_key() == "sk-secret-123"
    assert "sk-secret-123" not in repr(remote.model_dump()) + repr(remote.public())
    local = LLMSettings(base_url="http://user:pw@127.0.0.1:8000/v1?token=abc", api_key_env="NOPE_NOT_SET")
    assert local.resolve_api_key() == "not-needed"  # a local endpoint needs no key
    assert local.public()["base_url"] == "http://127.0.0.1:8000/v1"  # credentials and query dropped
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1234/v1")
    assert LLMSettings().resolved_base_url() == "http://127.0.0.1:1234/v1"


def test_settings_validation():
    with pytest.raises(ValueError):
        LLMSettings(concurrency=0)
    with pytest.raises(ValueError):
        LLMSettings(api_key_env="sk-abc def")  # a key pasted where a variable name belongs
    with pytest.raises(ValueError):
        LLMSettings(variant="evil")
    with pytest.raises(ValueError):
        LLMSettings(api_key="sk-x")  # no such field: keys never live in settings


# -- personas files -------------------------------------------------------------------------
def write(tmp_path, text):
    p = tmp_path / "personas.toml"
    p.write_text(text)
    return p


def test_personas_file_layers_and_shares_the_pool(tmp_path):
    base = LLMSettings(temperature=0.5, base_url="http://127.0.0.1:1/v1")
    f = write(tmp_path, """
[defaults]
max_tokens = 300

[seats.0]
model = "small"

[seats.3]
model = "big"
base_url = "http://127.0.0.1:2/v1"
temperature = 0.0
variant = "redteam"
""")
    seats = load_personas_file(f, base)
    assert sorted(seats) == [0, 3]
    assert (seats[0].model, seats[0].temperature, seats[0].max_tokens, seats[0].base_url) == \
        ("small", 0.5, 300, "http://127.0.0.1:1/v1")
    assert (seats[3].model, seats[3].temperature, seats[3].variant, seats[3].base_url) == \
        ("big", 0.0, "redteam", "http://127.0.0.1:2/v1")
    assert seats[0].pool is base.pool and seats[3].pool is base.pool  # one concurrency limit per run


@pytest.mark.parametrize("text, words", [
    ("[seats.0\nmodel='x'", "not valid TOML"),
    ("[seats.0]\nmodel = 'x'\ntemprature = 1", r"seats\.0\.temprature: unknown setting"),
    ("[seats.0]\nmodel = 'x'\napi_key = 'sk-123'", "api_key is not allowed"),
    ("[seats.0]\ntemperature = 1", r"\[seats\.0\] needs model"),
    ("[seats.zero]\nmodel = 'x'", "seat must be a number"),
    ("", "is empty"),
    ("[seat.0]\nmodel = 'x'", "unknown section"),
    ("[seats.1]\nmodel = 'x'\ntemperature = 'hot'", r"seats\.1\.temperature"),
    ("[seats.1]\nmodel = 'x'\nconcurrency = 3", "concurrency is not allowed"),
])
def test_personas_file_errors(tmp_path, text, words):
    with pytest.raises(PersonasFileError, match=words):
        load_personas_file(write(tmp_path, text))


def test_a_personas_file_with_only_defaults_applies_to_every_llm_seat(tmp_path, monkeypatch):
    """[defaults] alone is a complete file: `calbench run --personas` seats every LLM seat with it."""
    import argparse

    from calbench_cli.commands.llm import add_llm_arguments, settings_from_args
    from lab import runner
    from personas.llm.factory import load_personas

    f = write(tmp_path, """
[defaults]
model = "tiny"
base_url = "http://127.0.0.1:9/v1"
structured = "json_object"
context_window = 4096
max_tokens = 256
""")
    layered, seats = load_personas(f, LLMSettings())
    assert seats == {} and load_personas_file(f) == {}
    assert (layered.model, layered.base_url, layered.structured, layered.context_window, layered.max_tokens) == \
        ("tiny", "http://127.0.0.1:9/v1", "json_object", 4096, 256)
    parser = argparse.ArgumentParser()
    add_llm_arguments(parser)
    base, per_seat = settings_from_args(parser.parse_args(["--personas", str(f)]))
    assert per_seat == {} and base.model == "tiny" and base.context_window == 4096
    rs = runner.RunSettings(llm=base)
    made = runner.make_seats_for("imap,llm,llm:other,imap", 4, rs)
    assert [getattr(p, "model_name", None) for p in made] == [None, "tiny", "other", None]
    for p in made[1:3]:
        assert p.settings.base_url == "http://127.0.0.1:9/v1" and p.settings.context_window == 4096
        assert p.settings.structured == "json_object" and p.settings.max_tokens == 256


def test_personas_file_missing(tmp_path):
    with pytest.raises(PersonasFileError, match="not found"):
        load_personas_file(tmp_path / "nope.toml")


# -- prompts --------------------------------------------------------------------------------
def briefing(task, seat, variant=None, channels=("dm",)):
    v = seat_view(seat, task.calendars, task.labels, task.meetings, 0, task.cost_values, channels)
    return SeatBriefing(v, 15, 3, len(task.meetings), variant)


def test_system_prompt_has_the_nine_sections_and_names_the_seat():
    task = small_task()
    text = PromptBook(briefing(task, 2), None).system_prompt()
    for n, title in enumerate(["Rules", "What stays private", "How to negotiate", "What a calendar slot can hold",
                               "Actions", "Phases of a round", "Reply format", "Identity", "Game settings"], 1):
        assert f"## {n}. {title}" in text
    assert "You are Agent 2." in text and "0, 1, 2, 3" in text and "0 to 7" in text
    assert '"type": "dm"' in text and "participant_groupchat" not in text  # only enabled channels
    both = PromptBook(briefing(task, 2, channels=("dm", "all_groupchat")), None).system_prompt()
    assert '"type": "all_groupchat"' in both


@pytest.mark.parametrize("profile", ["full", "compact"])
def test_the_private_rules_name_the_costs_action_as_the_one_way_costs_go_out(profile):
    """The prompt said "Do not quote your cost numbers" (compact: "costs are private. Never tell
    them") and then taught the `costs` action and a worked round that sends them (found by
    hand: an evaluator reading it cannot tell what the model was asked to keep).  Now words
    never carry a cost, and the `costs` action, answering a request, is the one way out."""
    text = PromptBook(briefing(small_task(), 2), None, profile).system_prompt()
    private = text.split("## 2.")[1].split("## 3.")[0] if profile == "full" else text
    assert "Do not quote your cost numbers" not in text and "costs are private. Never tell them" not in text
    assert "`costs` action" in private and "request" in private.split("`costs` action")[1][:60]
    assert '{"type": "costs"}' in text  # the action itself is still taught


@pytest.mark.parametrize("variant", VARIANTS)
def test_variants_are_appended_verbatim(variant):
    task = small_task()
    base = PromptBook(briefing(task, 1), None).system_prompt()
    text = PromptBook(briefing(task, 1, variant), variant).system_prompt()
    assert text.startswith(base) and text.endswith(load_variant(variant))
    assert len(text) > len(base) + 200


def test_round_start_turn_and_decision_messages():
    task = small_task()
    m = task.meetings[0]
    seat = m.speaker_order[1]
    book = PromptBook(briefing(task, seat), None)
    view = seat_view(seat, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm",))
    mv = meeting_view(m, seat, task.labels)
    msg = Delivered(m.speaker_order[0], "dm", m.id, "How about slot 3?", 0, 0, None, seat)
    start = book.user_message(TurnObservation(view, 0, 0, 15, mv, True, (msg,)))
    h = HEADER_RE.match(start.splitlines()[0])
    assert h and h.group("phase") == "CHEAP_TALK" and int(h.group("seat")) == seat
    assert int(h.group("meeting")) == m.id and h.group("round") == "1" and h.group("rounds") == "3"
    assert f"You are Agent {seat}" in start and f"Meeting M{m.id}" in start
    assert view.render() in start  # the SPEC §5 render, verbatim
    assert mv.label in start  # a participant sees its meeting's label
    assert f"[1] From Agent {m.speaker_order[0]} (direct message, Meeting M{m.id}): How about slot 3?" in start
    assert "turn 1 of 15; 14 turn(s) remain" in start
    later = book.user_message(TurnObservation(view, 0, 14, 15, mv, True, ()))
    assert "No new messages in your inbox." in later and "last CHEAP_TALK turn" in later
    assert "Slot 0:" not in later  # turn messages do not repeat the calendar
    dec = book.user_message(DecisionObservation(view, 0, mv, (msg,), 0, 3, None), seen=0)
    assert "· DECISION ·" in dec and view.render() in dec and "How about slot 3?" in dec
    assert "How about slot 3?" not in book.user_message(DecisionObservation(view, 0, mv, (msg,), 0, 3, None), seen=1)
    retry = book.user_message(DecisionObservation(view, 0, mv, (msg,), 2, 3, "Expected exactly 1 schedule action, "
                                                                           "got 0"))
    assert "retry 2 of 3" in retry and "Expected exactly 1 schedule action, got 0" in retry
    assert "from scratch" in retry


def test_non_participant_first_contact_shows_its_calendar_but_not_the_label():
    task = small_task()
    m = task.meetings[0]
    outsider = next(a for a in range(task.num_agents) if a not in m.participants)
    book = PromptBook(briefing(task, outsider), None)
    view = seat_view(outsider, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm",))
    mv = meeting_view(m, outsider, task.labels)
    msg = Delivered(m.participants[0], "dm", m.id, "Could you free slot 2?", 0, 0, None, outsider)
    first = book.user_message(TurnObservation(view, 0, 0, 15, mv, False, (msg,)))
    assert "You are not a participant" in first and view.render() in first
    label = task.labels.meetings[m.id].text
    assert label not in first
    again = book.user_message(TurnObservation(view, 0, 1, 15, mv, False, (msg,)), joined=True)
    assert "You are not a participant" not in again
