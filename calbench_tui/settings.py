"""Settings of one ``calbench-play`` session, and the remappable key bindings.

``Settings`` is a plain dataclass built by ``commands/play.py`` from the command line (or
by a test); the app never reads ``sys.argv`` or the environment itself, so tests inject
exactly what they mean.  Key bindings have ids (Posting's idea); a TOML file in the
platform's user config directory (``calbench/keys.toml``) remaps them::

    # ~/.config/calbench/keys.toml
    [keys]
    end_turn = "e,ctrl+t"
    propose  = "p"

The file is read strictly: an unknown table, an unknown binding id or a value that is not
a string is a one-line error naming it.
"""

from __future__ import annotations

import functools
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable

from engine.channels import CHANNEL_ALIASES, CHANNEL_ORDER, CHANNEL_SHORT, ChannelError  # noqa: F401 - the one table
from engine.inputs import printable


class SettingsError(ValueError):
    """A setting that cannot be used; the message is one line."""


def parse_channels(text: str | Iterable[str]) -> tuple[str, ...]:
    """``"dm"``, ``"dm,participant"``, ``"dm+all"``, ``"every"`` → engine channel names, in order
    (``engine.channels.parse_channels``; its one-line error as a :class:`SettingsError`)."""
    from engine.channels import parse_channels as parse

    try:
        return parse(text)
    except ChannelError as exc:
        raise SettingsError(str(exc)) from None


@dataclass
class Settings:
    """Everything a play session needs to know before it starts."""

    seat: int | None = None
    agents: str | None = None  # persona spec for the other seats (personas.registry)
    task: str | None = None  # task reference (engine.taskref); None = a generated scenario
    seed: int | None = None  # scenario seed when no task is given
    cost: str = "uniform"
    channels: tuple[str, ...] = ("dm",)
    db: str | None = None
    base_url: str | None = None
    resume: str | None = None
    max_turns_per_round: int = 15
    decision_retries: int = 3
    deterministic: bool = False  # logical clock and derived game id (snapshots, tests)
    show_help: bool = False  # the instructions at the start of every game (calbench-play: on unless --no-intro)
    setup: bool = False  # open the setup screen before the game
    seat_personas: dict[int, str] = field(default_factory=dict)  # per-seat specs from the setup screen
    keymap: dict[str, str] = field(default_factory=dict)
    export_dir: str | None = None  # where "export trace" writes (default: the current directory)
    cursor_blink: bool = True  # off in snapshot tests
    llm_available: bool = False  # an endpoint or key is configured: the setup screen offers llm seats
    join: str | None = None  # a table served elsewhere (ws://HOST:PORT/table): play its seat remotely
    code: str | None = None  # the join code of that seat (asked for on screen when missing)
    rejoin_seconds: float = 120.0  # how long a dropped connection is retried

    def with_(self, **kw) -> "Settings":
        return replace(self, **kw)


# -- user config directory ------------------------------------------------------------------
def config_dir() -> Path:
    env = os.environ.get("CALBENCH_CONFIG_DIR")
    if env:
        return Path(env)
    from platformdirs import user_config_dir

    return Path(user_config_dir("calbench", appauthor=False))


def keys_path() -> Path:
    return config_dir() / "keys.toml"


def load_keymap(path: Path | str | None, known_ids: Iterable[str]) -> dict[str, str]:
    """Read ``[keys]`` from a TOML file.

    The default file (``path`` None) may be missing: that is an empty keymap.  A file the
    user named explicitly (``--keys PATH``) must exist: a missing one is an error, not a
    silent fallback to the default keys.
    """
    p = Path(path) if path is not None else keys_path()
    if not p.exists():
        if path is not None:
            raise SettingsError(f"keys file {p} does not exist")
        return {}
    from engine.inputs import loads_toml, read_text

    try:
        doc = loads_toml(read_text(p, "keys file", error=SettingsError), f"keys file {p}", error=SettingsError)
    except OSError as exc:
        raise SettingsError(f"cannot read {p}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{p} is not valid TOML: {exc}") from None
    extra = sorted(set(doc) - {"keys"})
    if extra:
        raise SettingsError(f"{p}: unknown table(s) {', '.join(extra)}; only [keys] is read")
    keys = doc.get("keys", {})
    if not isinstance(keys, dict):
        raise SettingsError(f"{p}: [keys] must be a table of binding id = \"key,key\"")
    known = set(known_ids)
    out: dict[str, str] = {}
    for k, v in keys.items():
        if k not in known:
            raise SettingsError(f"{p}: unknown binding id {k!r}; known ids: {', '.join(sorted(known))}")
        if not isinstance(v, str) or not v.strip():
            raise SettingsError(f"{p}: binding {k!r} must be a non-empty string like \"ctrl+e\"")
        if len(v) > 200 or printable(v) != v:
            raise SettingsError(f"{p}: binding {k!r} must be keys like \"ctrl+e,f2\" (at most 200 printable "
                                "characters)")
        for key in v.split(","):
            if not known_key(key.strip()):
                raise SettingsError(f"{p}: binding {k!r}: {key.strip()!r} is not a key name; write keys like "
                                    "\"ctrl+e\", \"f2\", \"enter\", \"space\" or one character")
        out[k] = v.strip()
    return out


_MODIFIERS = {"ctrl", "shift", "alt", "meta", "super", "hyper"}


def known_key(key: str) -> bool:
    """Whether ``key`` names a key Textual can bind: optional modifiers (``ctrl+``, ``shift+``,
    ...) and one character, a named key (``enter``, ``f2``, ``pageup``) or a character's
    name (``question_mark``).  Issue 35: ``ctrl+banana`` was accepted and bound nothing."""
    from textual.keys import Keys

    *mods, last = key.split("+") if key != "+" else ["+"]
    if not last or any(m not in _MODIFIERS for m in mods):
        return False
    if len(last) == 1 and last.isprintable():
        return True
    if last in {k.value for k in Keys} or last in ("space", "tab", "enter", "escape", "esc", "backspace") or \
            re.fullmatch(r"f([1-9]|1[0-9]|2[0-4])", last):
        return True
    return last in _character_key_names()


@functools.cache
def _character_key_names() -> frozenset[str]:
    """Textual's names of the characters below U+2000 (``question_mark``, ``minus``, ``plus``);
    not an emoji's: ``ctrl+banana`` names no key a keyboard has."""
    from textual.keys import _character_to_key

    return frozenset(_character_to_key(chr(c)) for c in range(0x20, 0x2000) if chr(c).isprintable())


def seed_of_ref(task: str | None) -> int | None:
    """The seed of a ``seed:N`` task reference (a generated scenario), else None."""
    if not task or not task.strip().lower().startswith("seed:"):
        return None
    try:
        return int(task.strip()[5:].strip())
    except ValueError:
        return None
