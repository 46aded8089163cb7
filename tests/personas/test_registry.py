"""personas/registry.py: persona specs -> fresh persona objects, one per seat."""

from __future__ import annotations

import importlib.util

import pytest

from engine.seats import PassivePersona
from personas.registry import (
    PERSONAS,
    PersonaSpecError,
    UnknownPersona,
    canonical_name,
    make_personas,
    parse_spec,
)
from personas.scripted.imap import IMAPPersona
from personas.scripted.sdmap import SDMAPPersona


def test_one_name_fills_every_seat_with_fresh_objects():
    seats = make_personas("imap", 5)
    assert len(seats) == 5 and all(isinstance(p, IMAPPersona) for p in seats)
    assert len({id(p) for p in seats}) == 5
    again = make_personas("imap", 5)
    assert not {id(p) for p in seats} & {id(p) for p in again}


def test_comma_list_with_case_spaces_and_aliases():
    seats = make_personas(" IMAP , sd-map,passive,dsm-welfare, private_dsm ", 5)
    assert isinstance(seats[0], IMAPPersona) and isinstance(seats[1], SDMAPPersona)
    assert isinstance(seats[2], PassivePersona)
    assert [p.model for p in seats[3:]] == ["dsm-welfare", "dsm-private"]
    assert all(p.kind == "scripted" for p in seats[:2] + seats[3:])
    assert canonical_name("paper_dsm") == "dsm-welfare" and canonical_name("LLM:GPT-4o") == "llm:GPT-4o"


def test_wrong_seat_count_is_a_clear_error():
    with pytest.raises(PersonaSpecError, match="names 2 seats but the game has 5"):
        make_personas("imap,sdmap", 5)
    with pytest.raises(PersonaSpecError, match="empty"):
        parse_spec("  ", 3)


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(UnknownPersona) as err:
        make_personas("imap,gpt,imap", 3)
    msg = str(err.value)
    assert "seat 1" in msg and "'gpt'" in msg
    assert all(name in msg for name in PERSONAS)
    assert isinstance(err.value, ValueError)


def test_human_seats_come_from_the_app():
    with pytest.raises(PersonaSpecError, match="seat 2 is 'human'"):
        make_personas("imap,imap,human", 3)
    me = PassivePersona()
    seats = make_personas("imap,imap,human", 3, humans={2: me})
    assert seats[2] is me and isinstance(seats[0], IMAPPersona)


def test_llm_seats_need_a_model_and_the_factory():
    with pytest.raises(PersonaSpecError, match="needs a model name"):
        parse_spec("llm:", 2)
    assert parse_spec("llm:gpt-4o-mini+nosy-highpressure,imap", 2) == ["llm:gpt-4o-mini+nosy-highpressure", "imap"]
    if importlib.util.find_spec("personas.llm.factory") is None:
        with pytest.raises(UnknownPersona, match="llm seats are not available yet"):
            make_personas("llm:gpt-4o-mini", 2)
