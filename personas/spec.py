"""The agents spec, parsed once: who sits in which seat, as a typed value.

A spec is one name for every seat (``"imap"``) or a comma list with one name per seat
(``"imap,llm:gpt-4o+nosy-highpressure,human,imap,imap"``).  :meth:`AgentsSpec.parse` reads
the text once; everything else — the label games are filed under, whether LLM settings
matter, whether events are saved as they happen, the per-seat names the registry builds
personas from — is a property of the parsed value, so no module splits the string again.

Names (``personas.registry`` builds them): every scripted protocol's seats (``imap`` ·
``sdmap`` · ``dsm-welfare`` · ``dsm-private`` …, declared with their aliases in the
protocol's module, ``engine/protocols/``) and ``passive`` (scripted), ``human``,
``llm:MODEL[+VARIANT]`` and a bare ``llm`` (its model comes from a personas file; only
``calbench run --personas`` allows it).  Aliases (``paper_dsm``, ``sd-map``, ...) are
resolved here; ``llm:`` models keep their case.

Errors are :class:`PersonaSpecError` / :class:`UnknownPersona` with one-line messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from engine import protocols

__all__ = ["AgentsSpec", "SeatSpec", "PersonaSpecError", "UnknownPersona", "SCRIPTED_NAMES", "PERSONAS",
           "ALIASES", "canonical_name", "valid_names", "compact_label"]

#: The seat that never speaks or schedules, and its aliases (not a protocol).
PASSIVE = "passive"
_PASSIVE_ALIASES = {"none": PASSIVE, "empty": PASSIVE}
#: The scripted personas: every protocol's seats (``engine.protocols``, each declared in its
#: protocol's module, with its aliases) and the passive seat; they follow the registry.
SCRIPTED_NAMES = protocols.LiveNames(lambda: (*protocols.seat_names(), PASSIVE), "scripted_names")
PERSONAS = protocols.LiveNames(lambda: (*SCRIPTED_NAMES, "human", "llm:MODEL[+variant]"), "personas")
ALIASES = protocols.LiveMap(lambda: {**protocols.seat_aliases(), **_PASSIVE_ALIASES}, "aliases")


class PersonaSpecError(ValueError):
    """A persona spec that cannot be used; the message says why in one line."""


class UnknownPersona(PersonaSpecError):
    """A seat names a persona that does not exist (the message lists the valid names)."""


def valid_names() -> str:
    return ", ".join(PERSONAS)


def canonical_name(name: str) -> str:
    """A seat name, trimmed and lower-cased, aliases resolved (``llm:`` names keep their case)."""
    n = name.strip()
    if n.lower().startswith("llm:"):
        return "llm:" + n[4:].strip()
    n = n.lower()
    return ALIASES.get(n, n)


@dataclass(frozen=True)
class SeatSpec:
    """One seat of a spec.

    ``kind``: ``scripted`` | ``llm`` | ``human`` | ``unknown`` (a name no persona has; the
    error is raised when seats are made, so a wrong seat count is reported first).
    ``name``: the canonical name (``imap``, ``llm:gpt-4o+redteam``, ``llm``, ``human``).
    ``model`` / ``variant``: an LLM seat's model (None for a bare ``llm``) and prompt variant.
    """

    kind: str
    name: str
    model: str | None = None
    variant: str | None = None

    @classmethod
    def parse(cls, text: str) -> "SeatSpec":
        name = canonical_name(text)
        if name == "human":
            return cls("human", name)
        if name in SCRIPTED_NAMES:
            return cls("scripted", name)
        if name == "llm":
            return cls("llm", name)
        if name.startswith("llm:"):
            model, variant = _split_variant(name[4:])
            return cls("llm", name, model or None, variant)
        return cls("unknown", name)

    @property
    def bare_llm(self) -> bool:
        """An LLM seat with no model named (``llm``): its settings come from a personas file."""
        return self.kind == "llm" and self.name == "llm"

    def check(self, seat: int, *, allow_bare_llm: bool = False) -> None:
        """Raise the registry's one-line error if this seat cannot be made."""
        if self.kind == "llm" and not self.bare_llm:
            body = self.name[4:]
            if not body or body.startswith("+"):
                raise PersonaSpecError(f"seat {seat}: an LLM seat needs a model name, e.g. llm:gpt-4o-mini")
            return
        if self.kind == "unknown" or (self.bare_llm and not allow_bare_llm):
            raise UnknownPersona(f"seat {seat}: unknown persona {self.name!r}; valid: {valid_names()}")


def _split_variant(body: str) -> tuple[str, str | None]:
    """``MODEL[+VARIANT]`` → (model, variant); a ``+`` suffix is a variant only when it names one
    (``personas.llm.factory.parse_llm_spec`` rejects an unknown one when the seat is made)."""
    if "+" not in body:
        return body.strip(), None
    from personas.llm.prompts import VARIANTS  # light: prompt texts only

    model, _, suffix = body.rpartition("+")
    if suffix in VARIANTS:
        return model.strip(), suffix
    return body.strip(), None


@dataclass(frozen=True)
class AgentsSpec:
    """A parsed agents spec: one :class:`SeatSpec` per comma entry (a single entry means every seat)."""

    seats: tuple[SeatSpec, ...]
    #: the label as given when it is not the canonical text (:meth:`of_names`); not compared
    text: str | None = field(default=None, compare=False)

    @classmethod
    def parse(cls, text: "str | AgentsSpec") -> "AgentsSpec":
        """Read a spec string (or pass a parsed one through); raises :class:`PersonaSpecError` when empty."""
        if isinstance(text, AgentsSpec):
            return text
        if not isinstance(text, str) or not text.strip():
            raise PersonaSpecError(f"empty persona spec; give one name or a comma-separated list "
                                   f"(valid: {valid_names()})")
        return cls(tuple(SeatSpec.parse(p) for p in text.split(",")))

    @classmethod
    def of_names(cls, names: "Sequence[str]") -> "AgentsSpec":
        """The spec of seats already made, one name per seat, each name kept exactly as given.

        For a driver whose seats come from elsewhere (the app's personas, a table whose
        lobby filled a seat, a study condition's partners, a seat factory's label): the
        label it files the game under is those names joined, byte for byte (as saved
        before); each seat is read from its name once (one no persona has is ``unknown``)."""
        names = list(names)
        return cls(tuple(SeatSpec.parse(n) for n in names), text=",".join(names))

    @property
    def label(self) -> str:
        """The canonical text: ``"IMAP, imap"`` and ``"imap,imap"`` are the same table (same --resume key);
        for :meth:`of_names`, the names as given."""
        if self.text is not None:
            return self.text
        return ",".join(s.name for s in self.seats)

    def __str__(self) -> str:
        return self.label

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.seats]

    @property
    def uses_llm(self) -> bool:
        """Whether any seat is an LLM (so LLM settings matter)."""
        return any(s.kind == "llm" for s in self.seats)

    @property
    def has_bare_llm(self) -> bool:
        return any(s.bare_llm for s in self.seats)

    @property
    def streams(self) -> bool:
        """Whether games of this spec are slow enough that events are saved as they happen (LLM or human seats)."""
        return any(s.kind in ("llm", "human") for s in self.seats)

    def for_seats(self, n: int, *, allow_bare_llm: bool = False) -> tuple[SeatSpec, ...]:
        """One seat spec per seat of an ``n``-seat game, checked; raises the one-line errors.

        A wrong seat count is reported before an unknown name.
        """
        seats = self.seats * n if len(self.seats) == 1 else self.seats
        if len(seats) != n:
            raise PersonaSpecError(f"the spec names {len(seats)} seats but the game has {n}; "
                                   f"give one name for all seats or exactly {n}")
        for i, s in enumerate(seats):
            s.check(i, allow_bare_llm=allow_bare_llm)
        return seats


def compact_label(label: str | None) -> str:
    """A stored spec label for a narrow column: ``imap,imap,imap,dsm-welfare,imap`` → ``imap×3,dsm-welfare,imap``.

    Works on any saved label as it is (imported games carry their own), so it does not
    canonicalise names; ``—`` when there is none.
    """
    if not label:
        return "—"
    out: list[list] = []
    for name in label.split(","):
        if out and out[-1][0] == name:
            out[-1][1] += 1
        else:
            out.append([name, 1])
    return ",".join(n if k == 1 else f"{n}×{k}" for n, k in out)
