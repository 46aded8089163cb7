"""Regular expressions compiled on first use.

A module-level ``re.compile`` runs at import, whether or not the run ever reads text: the
free-text readers (``engine.freetext``, ``engine.protocol``) hold a few dozen patterns that
cost ~20 ms of every process's start, and a scripted suite never uses them.
"""

from __future__ import annotations

import re
from typing import Any

_METHODS = ("search", "match", "fullmatch", "sub", "subn", "finditer", "findall", "split",
            "pattern", "flags", "groups", "groupindex")


class LazyPattern:
    """``re.compile(pattern, flags)``, compiled when first used; then its methods are this
    object's own attributes (no indirection after the first call)."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_args":
            raise AttributeError(name)
        compiled = re.compile(*self._args)
        for method in _METHODS:
            setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"LazyPattern({self._args[0]!r}, {self._args[1]!r})"


def compile(pattern: str, flags: int = 0) -> LazyPattern:  # noqa: A001 - re.compile's name, on purpose
    """A :class:`LazyPattern` (a drop-in for a module-level ``re.compile``)."""
    return LazyPattern(pattern, flags)
