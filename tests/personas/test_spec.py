"""The agents spec is parsed once into a typed value; every property comes from it."""

from __future__ import annotations

import pytest

from personas.registry import parse_spec
from personas.spec import AgentsSpec, PersonaSpecError, SeatSpec, UnknownPersona


def test_a_mixed_spec_parses_per_seat():
    spec = AgentsSpec.parse("IMAP, llm:gpt-4o+nosy-highpressure ,human,paper_dsm,llm:llama3.1:8b")
    assert spec.label == "imap,llm:gpt-4o+nosy-highpressure,human,dsm-welfare,llm:llama3.1:8b"
    assert [s.kind for s in spec.seats] == ["scripted", "llm", "human", "scripted", "llm"]
    assert spec.seats[1] == SeatSpec("llm", "llm:gpt-4o+nosy-highpressure", "gpt-4o", "nosy-highpressure")
    assert spec.seats[4].model == "llama3.1:8b" and spec.seats[4].variant is None
    assert spec.uses_llm and spec.streams and not spec.has_bare_llm
    assert len(spec.for_seats(5)) == 5


def test_scripted_specs_neither_use_llm_nor_stream():
    spec = AgentsSpec.parse("imap")
    assert not spec.uses_llm and not spec.streams
    assert [s.name for s in spec.for_seats(3)] == ["imap"] * 3
    assert AgentsSpec.parse("imap,human").streams and not AgentsSpec.parse("imap,human").uses_llm
    assert AgentsSpec.parse(spec) is spec


def test_bare_llm_is_only_allowed_where_asked():
    spec = AgentsSpec.parse("llm,imap")
    assert spec.has_bare_llm and spec.uses_llm
    assert spec.for_seats(2, allow_bare_llm=True)[0].bare_llm
    with pytest.raises(UnknownPersona, match="seat 0: unknown persona 'llm'"):
        spec.for_seats(2)


def test_bad_specs_keep_their_one_line_errors():
    with pytest.raises(PersonaSpecError, match="empty"):
        AgentsSpec.parse("  ")
    with pytest.raises(PersonaSpecError, match="names 2 seats but the game has 5"):
        AgentsSpec.parse("imap,nope").for_seats(5)  # the count is reported before the name
    with pytest.raises(UnknownPersona, match="seat 1: unknown persona 'nope'"):
        AgentsSpec.parse("imap,nope").for_seats(2)
    with pytest.raises(PersonaSpecError, match="needs a model name"):
        AgentsSpec.parse("llm:+redteam").for_seats(1)
    # The registry's parse_spec is the same parse.
    assert parse_spec("IMAP,llm:m", 2) == AgentsSpec.parse("IMAP,llm:m").names
