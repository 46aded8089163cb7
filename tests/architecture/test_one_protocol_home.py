"""Issue 29 item 4: each scripted protocol lives in one home.

A protocol is declared once, in its module under ``engine/protocols/`` (its message kinds with
their VPS evidence and audit categories, its key in the authors' traces, its seats with their
aliases, the bot's class by dotted path, whether ``--fidelity`` applies, the typed form of a
person's quick actions, its set-up words), and registers itself; its bot is the module its seats
name.  Everything else asks the registry (``engine.protocols``), so:

* no module outside a protocol's home writes its name, a seat's name or alias, or its authors'
  key as a string (docstrings aside): a sixth place to edit when a protocol is added is a
  failure here, not a review comment;
* no module outside the homes lists two or more of the protocols' message kinds (a copy of
  their kind tables: the audit's, the phrasebook's, a person's screen's);
* every module of ``engine/protocols/`` registers exactly one protocol and the registry's
  protocols are exactly those modules' (before any test registers its own);
* the engine reaches every declaration without importing a persona: the bot's class is
  imported only when a seat is made.
"""

from __future__ import annotations

import ast
import subprocess
import sys

from engine import protocols

from .astkit import ROOT, code_strings, source_tree

PRODUCT = ("engine", "personas", "saves", "lab", "calbench_tui", "calbench_cli", "calbench_devtools")
#: Strings that must stay outside every home, each with its reason.  Keep it short.
ALLOWED: dict[tuple[str, str], str] = {}


def _builtin() -> list:
    return [p for p in protocols.all_protocols() if (protocols.home(p.name) or "").startswith("engine.protocols.")]


def _module_file(dotted: str) -> str:
    return dotted.replace(".", "/") + ".py"


def _homes(proto) -> set[str]:
    """The protocol's declaration module and the modules of its seats' bots."""
    out = {_module_file(protocols.home(proto.name))}
    for s in proto.seats:
        if isinstance(s.factory, str):
            out.add(_module_file(s.factory.partition(":")[0]))
    return out


def _words(proto) -> set[str]:
    out = {proto.name}
    if proto.author_key:
        out.add(proto.author_key)
    for s in proto.seats:
        out |= {s.name, *s.aliases}
    return {w.lower() for w in out}


def _product():
    for pkg in PRODUCT:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            yield str(path.relative_to(ROOT)), source_tree(path)


def test_no_protocol_is_named_outside_its_home():
    found = []
    owners = {w: (p.name, _homes(p)) for p in _builtin() for w in _words(p)}
    for rel, tree in _product():
        for node in code_strings(tree):
            owner = owners.get(node.value.strip().lower())
            if owner and rel not in owner[1] and (rel, node.value) not in ALLOWED:
                found.append(f"{rel}:{node.lineno} {node.value!r} ({owner[0]}'s; ask engine.protocols)")
    assert found == [], "\n".join(found)


def test_no_module_but_the_homes_lists_the_protocols_kinds():
    """A tuple, list, set or dict's keys naming two or more of the protocols' kinds is a copy of
    their kind tables.  The phrasebook's verbs are not kinds, though three share a kind's name
    (``propose``, ``confirm``, ``costs``: what a message says, whoever sent it)."""
    from engine.phrasebook import VERBS

    kinds = {k for p in _builtin() for k in p.kinds} - set(VERBS)
    copies = []
    for rel, tree in _product():
        if rel.startswith("engine/protocols/") or any(rel in _homes(p) for p in _builtin()):
            continue
        for node in ast.walk(tree):
            elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else \
                node.keys if isinstance(node, ast.Dict) else ()
            named = {e.value for e in elts if isinstance(e, ast.Constant)} & kinds
            if len(named) >= 2:
                copies.append(f"{rel}:{node.lineno} {sorted(named)}")
    assert copies == [], "\n".join(copies)


def test_each_module_of_the_registry_is_one_protocol():
    modules = sorted(p.stem for p in (ROOT / "engine" / "protocols").glob("*.py") if not p.stem.startswith("_"))
    assert sorted(protocols.home(p.name).rpartition(".")[2] for p in _builtin()) == modules
    assert [p.name for p in _builtin()] == ["imap", "sdmap", "dsm"]  # list order: Table 2, the set-up screen
    names = [w for p in _builtin() for s in p.seats for w in (s.name, *s.aliases)]
    assert len(names) == len(set(names)), "a seat name or alias belongs to two protocols"
    assert sum(s.default for p in _builtin() for s in p.seats) == 1
    for proto in _builtin():
        for seat in proto.seats:
            bot = protocols.load_factory(seat)(**dict(seat.kwargs))
            assert protocols.protocol_of_model(bot.model) == proto.name, seat.name


def test_the_engine_reaches_every_declaration_without_a_persona():
    code = ("import sys\n"
            "from engine import protocols, privacy, audit, protocol\n"
            "assert [p.name for p in protocols.all_protocols()] == ['imap', 'sdmap', 'dsm']\n"
            "assert protocol.KINDS['sdmap']['reply'] == ('slot', 'status')\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('personas', 'lab', 'saves', 'calbench_tui')]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
