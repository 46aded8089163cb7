"""A quicker ``__init__`` for the frozen, slotted dataclasses a game makes by the hundred.

A frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__`` (looked up and called once per field), which makes building an
observation, a delivered message or a game state several times dearer than building a
plain one — and a scripted game builds several hundred of them.  :func:`quick_init`
swaps in an ``__init__`` that writes each field through its slot's own descriptor (what
``object.__setattr__`` ends up calling), with the same signature and defaults.  Nothing
else changes: the class stays frozen (assignment still raises), hashable and comparable.
"""

from __future__ import annotations

from dataclasses import MISSING, fields, is_dataclass
from typing import TypeVar

T = TypeVar("T")


def quick_init(cls: type[T]) -> type[T]:
    """Class decorator, applied above ``@dataclass(frozen=True, slots=True)``.

    Refuses (TypeError) what it does not rebuild: a class that is not a frozen, slotted
    dataclass, or one with a ``__post_init__``, a ``default_factory`` or keyword-only fields.
    Fields with ``init=False`` keep their default, written once per instance as before.
    """
    params = getattr(cls, "__dataclass_params__", None)
    if not is_dataclass(cls) or params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"quick_init needs a frozen, slotted dataclass, not {cls.__name__}")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"quick_init does not run __post_init__ ({cls.__name__})")
    env: dict[str, object] = {}
    args: list[str] = []
    body: list[str] = []
    for i, f in enumerate(fields(cls)):
        if f.default_factory is not MISSING or f.kw_only:
            raise TypeError(f"quick_init does not rebuild field {f.name!r} of {cls.__name__}")
        env[f"_set{i}"] = cls.__dict__[f.name].__set__  # the slot's member descriptor
        if f.init:
            if f.default is MISSING:
                args.append(f.name)
            else:
                env[f"_def{i}"] = f.default
                args.append(f"{f.name}=_def{i}")
            body.append(f"    _set{i}(self, {f.name})")
        else:
            env[f"_def{i}"] = f.default
            body.append(f"    _set{i}(self, _def{i})")
    src = f"def __init__(self, {', '.join(args)}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(src, env)  # noqa: S102 - the source is built above from the class's own field names
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"  # type: ignore[attr-defined]
    init.__module__ = cls.__module__  # type: ignore[attr-defined]
    init.__doc__ = cls.__init__.__doc__  # type: ignore[misc]
    cls.__init__ = init  # type: ignore[misc]
    return cls
