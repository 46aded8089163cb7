"""Persona specs: which persona sits in which seat.

A spec is one name for every seat (``"imap"``) or a comma list with one name per seat
(``"imap,imap,llm:gpt-4o-mini,passive,human"``), parsed once by
:class:`personas.spec.AgentsSpec`.  Names:

``imap`` · ``sdmap`` · ``dsm-welfare`` · ``dsm-private`` — scripted reference protocols
(SPEC §7); ``dsm-private-requeue`` — DSM-Private that offers the slots of its failed
negotiations last (each protocol's seats are declared in its module under
``engine/protocols/``, which names the bot's class); ``passive`` — a seat that never speaks
or schedules; ``llm:MODEL[+variant]`` —
an LLM seat (``personas.llm.factory.make_llm_persona``); ``human`` — a person at the
terminal, created by the app and handed in through ``humans={seat: persona}``.

Every call builds fresh persona objects (they keep per-game state).
"""

from __future__ import annotations

from typing import Any, Mapping

from engine import protocols
from engine.seats import Persona, PassivePersona
from personas.spec import (ALIASES, PASSIVE, PERSONAS, AgentsSpec, PersonaSpecError, UnknownPersona,
                           canonical_name, valid_names)

__all__ = ["FIDELITIES", "ALIASES", "PERSONAS", "AgentsSpec", "PersonaSpecError", "UnknownPersona", "canonical_name",
           "valid_names", "parse_spec", "make_personas", "personas_file_fidelity"]


def _make_scripted(name: str, fidelity: str) -> Persona:
    """A fresh scripted seat: the passive seat, or a protocol's seat as its declaration says
    (``engine.protocols.Seat``: the bot's class, its arguments, whether ``--fidelity`` applies)."""
    if name == PASSIVE:
        return PassivePersona()
    seat, _proto = protocols.seat(name)
    kwargs = dict(seat.kwargs)
    if seat.fidelity:
        kwargs["fidelity"] = fidelity
    return protocols.load_factory(seat)(**kwargs)


#: How faithful the scripted protocols are to the authors' code (``calbench run --fidelity``):
#: ``ours`` (the default) or ``paper`` (DSM only: docs/protocols-dsm.md, "Paper fidelity").
FIDELITIES = ("ours", "paper")


def parse_spec(spec: "str | AgentsSpec", num_agents: int) -> list[str]:
    """One canonical name per seat; raises :class:`PersonaSpecError` / :class:`UnknownPersona`."""
    if not isinstance(spec, AgentsSpec) and (not isinstance(spec, str) or not spec.strip()):
        raise PersonaSpecError(f"empty persona spec; give one name or {num_agents} comma-separated names "
                               f"(valid: {valid_names()})")
    return [s.name for s in AgentsSpec.parse(spec).for_seats(num_agents)]


def make_personas(
    spec: "str | AgentsSpec",
    num_agents: int,
    *,
    llm: Any = None,
    humans: Mapping[int, Persona] | None = None,
    fidelity: str = "ours",
) -> list[Persona]:
    """Build one fresh persona per seat from ``spec``.

    ``llm`` is passed to ``personas.llm.factory.make_llm_persona(name, llm)`` for every
    ``llm:`` seat; ``humans`` maps seat -> an already-built human persona for every
    ``human`` seat (the app creates those; headless runs cannot).
    """
    if fidelity not in FIDELITIES:
        raise PersonaSpecError(f"unknown fidelity {fidelity!r}; use one of {', '.join(FIDELITIES)}")
    names = parse_spec(spec, num_agents)
    humans = dict(humans or {})
    out: list[Persona] = []
    for seat, name in enumerate(names):
        if name == "human":
            if seat not in humans:
                raise PersonaSpecError(f"seat {seat} is 'human' but no human persona was supplied "
                                       "(human seats are created by the game app, e.g. calbench-play --seat)")
            out.append(humans[seat])
        elif name.startswith("llm:"):
            try:
                from personas.llm.factory import make_llm_persona
            except ImportError:
                raise UnknownPersona("llm seats are not available yet") from None
            out.append(make_llm_persona(name, llm))
        else:
            out.append(_make_scripted(name, fidelity))
    return out


def personas_file_fidelity(path: str) -> str | None:
    """The top-level ``fidelity = "ours" | "paper"`` of a personas file (None when absent).
    Raises ``ValueError`` with one line for a bad value; other problems of the file are
    reported where the file's LLM settings are read."""
    import tomllib

    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    value = raw.get("fidelity")
    if value is None:
        return None
    if value not in FIDELITIES:
        raise ValueError(f"personas file {path}: fidelity = {value!r}; use one of {', '.join(FIDELITIES)}")
    return value
