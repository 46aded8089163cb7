"""The scripted protocols' registry: every protocol declared once, in a home of its own.

A protocol is one module — ``engine/protocols/imap.py``, ``sdmap.py``, ``dsm.py`` for the
built-in ones, or any module that imports this one (a plugin, a test) — that builds one
:class:`Protocol` and calls :func:`register`.  The declaration holds everything the rest of
the code needs to know about the protocol:

* its message kinds (:class:`Kind`): the fields of each typed payload, the message-audit
  categories (``engine/audit.py``), the VPS evidence it gives (``engine/privacy.py``, paper
  Table 10), the costs it reports and whether a person's screen reads it as a cost question
  or an offer (``engine/protocol.py``, ``personas/seat_model.py``);
* the key of its JSON in the authors' traces (``{"sd": "propose", ...}``);
* the seats that play it (:class:`Seat`): the names an agents spec takes and their aliases,
  the persona class (a dotted path, imported when a seat is made, so the engine never imports
  a persona), whether ``--fidelity`` applies, the line the set-up screen shows and a short
  form for narrow cells;
* its quick actions: the typed form of what a person's quick keys send to a seat of it
  (``personas/quick.py`` asks :attr:`Protocol.quick`).

Everything else asks this registry (``tests/architecture/test_one_protocol_home.py`` fails
when a protocol's name is written anywhere but its home).  The built-in protocols are the
modules of this package, found and imported on the first question; a protocol from
elsewhere registers when its module is imported.  This module imports nothing of the
project, so every layer may ask it; a module of this package imports only this one (and the
standard library), so the engine's modules may import a protocol's helpers (the DSM score
scale) without a cycle.  docs/architecture.md, "How to add a protocol", has the steps.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence

__all__ = ["Kind", "Seat", "Protocol", "Typed", "register", "unregister", "home", "get", "all_protocols", "kind",
           "kinds_with", "cost_reader", "author_keys", "seat", "seats", "seat_names",
           "seat_aliases", "protocol_of_model", "default_seat", "load_factory", "rules", "int_of", "num",
           "as_int", "seq_of", "slots_of", "slot_of", "meeting_of", "moves_of", "ANSWER_KIND", "answer_kind",
           "LiveNames", "LiveMap"]


# ---------------------------------------------------------------------------------------
# What a protocol declares
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Kind:
    """One typed message kind of a protocol.

    ``fields``: its payload fields besides protocol/kind/meeting_id (optional ones included).
    ``audit``: the message-audit categories it always counts as (``engine.audit.CATEGORIES``);
    ``audit_rule(payload)``: those that depend on its fields (a ``costs`` with a figure is a
    cost, with none a refusal).
    ``evidence(est, round, sender, readers, payload, seq)``: the VPS belief updates it gives
    (``engine.privacy``; call ``est.update(...)``, or ``est.update_slots(...)`` for many slots
    of one reader; keep what a later message needs in ``est.memo`` under a key that starts
    with the protocol's name).
    ``costs(payload)``: the costs it reports, ``{slot: cost or None}`` (None: not a report).
    ``asks_costs`` / ``offers``: a person's screen reads it as a question for costs / as an
    offer to answer with ``a`` or ``d`` (``engine.protocol.is_request_for_costs`` /
    ``is_proposal``).
    ``says(payload)``: what it says in a person's terms, the clauses ``(verb, data)`` of
    ``engine.phrasebook`` (``VERBS``) a blinded game's words are made from; None or no
    clause: the phrasebook reads the message's English.
    """

    fields: tuple[str, ...] = ()
    audit: tuple[str, ...] = ()
    audit_rule: Callable[[dict[str, Any]], set[str]] | None = None
    evidence: Callable[..., None] | None = None
    costs: Callable[[dict[str, Any]], "dict[int, int | None] | None"] | None = None
    asks_costs: bool = False
    offers: bool = False
    says: Callable[[dict[str, Any]], "Sequence[tuple[str, Any]] | None"] | None = None


@dataclass(frozen=True)
class Seat:
    """A persona name that plays the protocol (``dsm-welfare`` and ``dsm-private`` play DSM).

    ``factory``: ``"module:Class"`` (imported when a seat is made) or a callable; it is called
    with ``kwargs``, plus ``fidelity=`` when ``fidelity`` is true (``calbench run --fidelity``).
    ``aliases``: other names an agents spec takes for it.  ``words``: one line for a person
    who never heard of it (the set-up screen).  ``short``: its name in a narrow cell.
    ``variant``: a variant of another seat (left out of the lists of reference protocols: a
    simulated participant's protocol, the set-up screen's defaults).  ``default``: the
    partner a game gets when nobody names one (one seat in all).
    """

    name: str
    factory: "str | Callable[..., Any]"
    kwargs: tuple[tuple[str, Any], ...] = ()
    aliases: tuple[str, ...] = ()
    fidelity: bool = False
    words: str = ""
    short: str | None = None
    variant: bool = False
    default: bool = False


class Typed(NamedTuple):
    """A quick action's typed form: payload ``kind`` and ``fields``; ``wording`` names the
    English ``personas/quick.py`` writes with it (None: the action's usual sentence)."""

    kind: str
    fields: dict[str, Any]
    wording: str | None = None


@dataclass(frozen=True)
class Protocol:
    """A scripted protocol (see the module docstring).

    ``quick(action, **context)``: the :class:`Typed` form of a person's quick action sent to
    a seat of this protocol, or None (English only).  ``action`` is ``ask_costs``
    (``slots``, ``initiator``), ``share_costs`` (``costs``: ``[(slot, cost or None)]``),
    ``propose`` (``slots``, ``initiator``), ``accept`` (``slot``, ``answering``: the kind
    being answered, ``initiator``, ``my_cost``) or ``decline`` (``slot``, ``answering``,
    ``initiator``).
    ``speaks(model)``: whether a seat whose model is ``model`` speaks it (default: its seat
    names and aliases).  ``order``: its place in lists.  ``doc``: its page.
    """

    name: str
    kinds: Mapping[str, Kind]
    seats: tuple[Seat, ...] = ()
    author_key: str | None = None
    quick: Callable[..., Typed | None] | None = None
    speaks: Callable[[str], bool] | None = None
    order: int = 100
    doc: str = ""

    def kind_fields(self) -> dict[str, tuple[str, ...]]:
        return {k: v.fields for k, v in self.kinds.items()}


# ---------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------
_REGISTRY: dict[str, Protocol] = {}
_HOMES: dict[str, str] = {}  # protocol -> the module that registered it
_LOADED = False
_CACHE: dict[str, Any] = {}


def register(proto: Protocol) -> Protocol:
    """Add ``proto`` (a module calls it once, when it is imported); registering the same name
    again replaces the declaration (a reloaded module).  A seat name or alias another
    protocol already uses is refused."""
    _load_builtins()
    taken = {n: p.name for p in _REGISTRY.values() if p.name != proto.name
             for s in p.seats for n in (s.name, *s.aliases)}
    clash = [n for s in proto.seats for n in (s.name, *s.aliases) if n in taken]
    if clash:
        raise ValueError(f"protocol {proto.name!r}: seat name {clash[0]!r} is already {taken[clash[0]]!r}'s")
    _REGISTRY[proto.name] = proto
    _HOMES[proto.name] = sys._getframe(1).f_globals.get("__name__", "?")
    _CACHE.clear()
    return proto


def unregister(name: str) -> None:
    """Take a protocol out again (a test's protocol, when the test is over)."""
    _load_builtins()
    if _REGISTRY.pop(name, None) is not None:
        _HOMES.pop(name, None)
        _CACHE.clear()


def home(name: str) -> str | None:
    """The module that registered the protocol ``name`` (its home), or None."""
    _load_builtins()
    return _HOMES.get(name)


def _load_builtins() -> None:
    """Import the modules of this package once (each registers its protocol)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


def _cached(key: str, build: Callable[[], Any]) -> Any:
    try:
        return _CACHE[key]
    except KeyError:
        _load_builtins()
        value = _CACHE[key] = build()
        return value


def all_protocols() -> tuple[Protocol, ...]:
    """Every registered protocol, in list order (``order``, then name)."""
    return _cached("all", lambda: tuple(sorted(_REGISTRY.values(), key=lambda p: (p.order, p.name))))


def get(name: Any) -> Protocol | None:
    """The protocol called ``name``, or None."""
    if not _LOADED:
        _load_builtins()
    return _REGISTRY.get(name) if isinstance(name, str) else None


def kind(protocol: Any, name: Any) -> Kind | None:
    """The declared kind ``name`` of ``protocol``, or None."""
    p = get(protocol)
    return p.kinds.get(name) if p is not None and isinstance(name, str) else None


def rules(protocol: Any, name: Any) -> list[Kind]:
    """The declaration(s) to read a message of ``protocol`` and kind ``name`` by: its
    protocol's, else (a kind its protocol does not declare: a foreign trace) every
    protocol's that declares a kind of that name, in list order."""
    own = kind(protocol, name)
    if own is not None:
        return [own]
    if not isinstance(name, str):
        return []
    return [k for p in all_protocols() if (k := p.kinds.get(name)) is not None]


def kinds_with(flag: str) -> frozenset[str]:
    """Every kind name some protocol declares with ``flag`` (``asks_costs``, ``offers``) set."""
    return _cached(f"flag:{flag}", lambda: frozenset(k for p in all_protocols() for k, v in p.kinds.items()
                                                      if getattr(v, flag)))


def cost_reader(name: Any) -> Callable[[dict[str, Any]], Any] | None:
    """The reader of the costs a kind called ``name`` reports (the first protocol's that has one)."""
    readers = _cached("costs", lambda: {k: v.costs for p in reversed(all_protocols())
                                        for k, v in p.kinds.items() if v.costs is not None})
    return readers.get(name) if isinstance(name, str) else None


def author_keys() -> tuple[tuple[str, str], ...]:
    """``(key in the authors' JSON, protocol)`` for every protocol that has one."""
    return _cached("author", lambda: tuple((p.author_key, p.name) for p in all_protocols() if p.author_key))


def seats() -> tuple[tuple[Seat, Protocol], ...]:
    """Every seat of every protocol, with its protocol, in list order."""
    return _cached("seats", lambda: tuple((s, p) for p in all_protocols() for s in p.seats))


def seat_names(*, variants: bool = True) -> tuple[str, ...]:
    """The seat names in list order (``variants=False``: the reference protocols only)."""
    return tuple(s.name for s, _ in seats() if variants or not s.variant)


def seat(name: Any) -> tuple[Seat, Protocol] | None:
    """The seat called ``name`` (a canonical name, not an alias) and its protocol, or None."""
    table = _cached("seat", lambda: {s.name: (s, p) for s, p in seats()})
    return table.get(name) if isinstance(name, str) else None


def seat_aliases() -> dict[str, str]:
    """Alias → seat name for every seat."""
    return _cached("aliases", lambda: {a: s.name for s, _ in seats() for a in s.aliases})


def protocol_of_model(model: str | None) -> str | None:
    """The protocol a seat whose model is ``model`` speaks (``dsm-private@paper`` → ``dsm``), or None."""
    m = (model or "").lower().replace("scripted:", "")
    for p in all_protocols():
        if p.speaks is not None:
            if p.speaks(m):
                return p.name
        elif any(m == n for s in p.seats for n in (s.name, *s.aliases)):
            return p.name
    return None


def default_seat() -> str:
    """The partner a game gets when nobody names one."""
    names = [s.name for s, _ in seats() if s.default]
    if len(names) != 1:
        raise LookupError(f"one protocol seat must be the default, not {len(names)}")
    return names[0]


def load_factory(s: Seat) -> Callable[..., Any]:
    """The callable that makes a seat: ``"module:attr"`` imported, or the callable itself."""
    f = s.factory
    if callable(f):
        return f
    module, _, attr = f.partition(":")
    return getattr(importlib.import_module(module), attr)


# ---------------------------------------------------------------------------------------
# Lenient readers of a payload's fields (messages come from foreign traces and LLMs too)
# ---------------------------------------------------------------------------------------
def as_int(v: Any) -> int | None:
    """An int from an int, a (signed) digit string or a whole float; None otherwise (a bool too)."""
    if type(v) is int:  # the common cases, first
        return v
    if type(v) is str and v.isdigit():  # what the general test below accepts, without its copies
        return int(v)
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def seq_of(v: Any) -> tuple[Any, ...]:
    """A payload field read as a list (anything else, e.g. a number where a list belongs: empty)."""
    return tuple(v) if isinstance(v, Iterable) and not isinstance(v, (str, bytes)) else ()


def slots_of(xs: Any) -> tuple[int, ...]:
    """The non-negative slots of a list field, sorted, once each."""
    return tuple(sorted({s for s in (as_int(x) for x in seq_of(xs)) if s is not None and s >= 0}))


def slot_of(p: dict[str, Any], key: str = "slot") -> tuple[int, ...]:
    """``(slot,)`` of a slot field, or ``()``."""
    s = as_int(p.get(key))
    return (s,) if s is not None and s >= 0 else ()


def meeting_of(p: dict[str, Any]) -> int:
    return as_int(p.get("meeting_id")) or 0


def moves_of(p: dict[str, Any]) -> tuple[tuple[int, int, int], ...]:
    """A ``moves`` field as ``(meeting_id, from_slot, to_slot)`` triples (dicts or triples)."""
    out = []
    for mv in seq_of(p.get("moves")):
        if isinstance(mv, dict):
            m, f, t = as_int(mv.get("meeting_id")), as_int(mv.get("from_slot")), as_int(mv.get("to_slot"))
        elif isinstance(mv, (list, tuple)) and len(mv) == 3:
            m, f, t = (as_int(x) for x in mv)
        else:
            continue
        if None not in (m, f, t):
            out.append((m, f, t))
    return tuple(out)


_DIGIT_TEXTS = {str(i): i for i in range(1024)}  # "17" -> 17: a costs or scores payload's slot keys, read at once


def int_of(v: Any) -> int | None:
    """An int from an int, a digit string or a whole float; None otherwise."""
    tv = type(v)
    if tv is int:
        return v
    if tv is str:
        i = _DIGIT_TEXTS.get(v)
        if i is not None:
            return i
        if v.isdigit():
            return int(v)
    if v is None or tv is bool:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if f.is_integer() else None


def num(v: Any) -> float | None:
    """A float from a number or a numeric string; None for None, a bool or anything else."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------------------
# The answer to a peer outside the protocol (every built-in protocol declares it)
# ---------------------------------------------------------------------------------------
#: A scripted seat's answer to a peer that does not speak its protocol (a person, an LLM,
#: another protocol): ``works`` / ``cannot`` — the slots asked about that the sender can or
#: cannot hold; ``alternatives`` — slots it could hold instead; ``costs`` {"slot": cost} of
#: the alternatives, where the protocol reveals costs (IMAP).  docs/protocols.md.
ANSWER_KIND = "answer"


def _answer_said(d: dict[str, Any]) -> dict[int, float]:
    """Each slot the answer names: 1.0 works (or an alternative, or a cost figure), 0.0 cannot."""
    said: dict[int, float] = {}
    for key, e in (("cannot", 0.0), ("works", 1.0), ("alternatives", 1.0)):
        for raw in seq_of(d.get(key)):
            s = int_of(raw)
            if s is not None:
                said[s] = e
    costs = d.get("costs")
    if isinstance(costs, dict):
        for k, v in costs.items():
            s = int_of(k)
            if s is not None:
                said[s] = 0.0 if v is None else 1.0
    return said


def _answer_evidence(est: Any, r: int, sender: int, readers: list[int], d: dict[str, Any], seq: Any) -> None:
    """Said outright, so evidence 1 or 0 at full strength, as an SD-MAP reply."""
    for s, e in _answer_said(d).items():
        for j in readers:
            est.update(r, sender, j, s, e, 1.0, "typed", ANSWER_KIND, seq)


def _answer_audit(p: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    if p.get("works") or p.get("cannot") or p.get("alternatives"):
        out.add("availability")
    if p.get("cannot") and not p.get("works"):
        out.add("refusal")
    costs = p.get("costs") if isinstance(p.get("costs"), dict) else {}
    if any(v for v in costs.values()):
        out.add("cost")
    return out


def _answer_says(p: dict[str, Any]) -> tuple:
    costs = p.get("costs") if isinstance(p.get("costs"), dict) else {}
    priced = tuple(sorted((s, c) for s, c in ((as_int(k), as_int(v)) for k, v in costs.items())
                          if s is not None and c is not None and c > 0))
    free = set(slots_of(p.get("works"))) | set(slots_of(p.get("alternatives")))
    free -= {s for s, _ in priced}
    return (("fails", slots_of(p.get("cannot"))), ("works", tuple(sorted(free))), ("costs", priced))


def answer_kind(*, costs: bool = False) -> Kind:
    """The :data:`ANSWER_KIND` kind of a protocol (``costs``: its answers may carry cost figures)."""
    return Kind(("works", "cannot", "alternatives", "costs") if costs else ("works", "cannot", "alternatives"),
                audit_rule=_answer_audit, evidence=_answer_evidence, says=_answer_says)


# ---------------------------------------------------------------------------------------
# Live views: the old module constants (``engine.protocol.PROTOCOLS``, ``KINDS``, ...) stay
# importable and follow the registry, so a protocol registered later is in them too
# ---------------------------------------------------------------------------------------
class LiveNames(Sequence[str]):
    """A read-only tuple of names computed from the registry at each use."""

    def __init__(self, build: Callable[[], Sequence[str]], key: str) -> None:
        self._build, self._key = build, key

    def _t(self) -> tuple[str, ...]:
        return _cached(f"live:{self._key}", lambda: tuple(self._build()))

    def __getitem__(self, i):  # type: ignore[override]
        return self._t()[i]

    def __len__(self) -> int:
        return len(self._t())

    def __iter__(self) -> Iterator[str]:
        return iter(self._t())

    def __contains__(self, x: object) -> bool:
        return x in self._t()

    def __eq__(self, other: object) -> bool:
        return tuple(self._t()) == (tuple(other) if isinstance(other, (tuple, list, LiveNames)) else other)

    def __hash__(self) -> int:
        return hash(self._t())

    def __add__(self, other):
        return self._t() + tuple(other)

    def __radd__(self, other):
        return tuple(other) + self._t()

    def __repr__(self) -> str:
        return repr(self._t())


class LiveMap(Mapping[str, Any]):
    """A read-only dict computed from the registry at each use."""

    def __init__(self, build: Callable[[], Mapping[str, Any]], key: str) -> None:
        self._build, self._key = build, key

    def _d(self) -> dict[str, Any]:
        return _cached(f"live:{self._key}", lambda: dict(self._build()))

    def __getitem__(self, k: str) -> Any:
        return self._d()[k]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d())

    def __len__(self) -> int:
        return len(self._d())

    def __eq__(self, other: object) -> bool:
        return self._d() == (dict(other) if isinstance(other, Mapping) else other)

    def __repr__(self) -> str:
        return repr(self._d())
