"""Key names a person can read, and every action of a screen for the command palette.

Textual names keys by their identifiers (``question_mark``, ``left_square_bracket``); a
participant must read ``?`` and ``[``.  :func:`key_name` is the one place that turns a key
into what is printed — in the key bar, the help screen and the command palette — and
:func:`binding_keys` applies the user's ``keys.toml`` remapping first.  Binding ids (the
names ``keys.toml`` uses) are never shown on the participant's screens; ``calbench-play
--list-keys`` prints them for whoever sets up the machine.
"""

from __future__ import annotations

from typing import Any, Iterable

from textual.binding import Binding

__all__ = ["key_name", "binding_keys", "keys_label", "screen_commands", "ReadableKeys"]

NAMES = {
    "question_mark": "?", "left_square_bracket": "[", "right_square_bracket": "]",
    "plus": "+", "minus": "-", "equals_sign": "=", "space": "space", "enter": "enter",
    "escape": "esc", "tab": "tab", "up": "↑", "down": "↓", "left": "←", "right": "→",
    "home": "home", "end": "end", "pageup": "page up", "pagedown": "page down",
    "exclamation_mark": "!", "full_stop": ".", "comma": ",", "slash": "/", "asterisk": "*",
}


def key_name(key: str) -> str:
    """``question_mark`` → ``?``; ``ctrl+q`` stays ``ctrl+q``; ``left`` → ``←``."""
    key = key.strip()
    parts = key.split("+")
    if len(parts) > 1 and parts[-1]:  # "ctrl+q"; a lone "+" is the plus key itself
        return "+".join(parts[:-1] + [NAMES.get(parts[-1], parts[-1])])
    return NAMES.get(key, key)


def binding_keys(binding: Binding, keymap: dict[str, str] | None = None) -> list[str]:
    """The keys of a binding as currently mapped, readable."""
    raw = (keymap or {}).get(binding.id, binding.key) if binding.id else binding.key
    return [key_name(k) for k in raw.split(",") if k.strip()]


def keys_label(binding: Binding, keymap: dict[str, str] | None = None) -> str:
    return " / ".join(binding_keys(binding, keymap))


def screen_commands(app: Any, screen: Any) -> Iterable[tuple[str, str, Any, str]]:
    """(title, help, node, action) for every action of this app bound on ``screen`` now (shown or
    not).  Only the project's own bindings: each has an id (the name ``keys.toml`` uses), while
    Textual's built-in ones (focus next, copy selected text, page and scroll keys) have none and
    are not this app's actions."""
    seen: set[tuple[int, str]] = set()
    by_action: dict[tuple[int, str], list[str]] = {}
    rows: list[tuple[Any, Binding]] = []
    for key, active in screen.active_bindings.items():
        b = active.binding
        if not b.description or not b.id:
            continue
        ident = (id(active.node), b.action)
        by_action.setdefault(ident, []).append(key_name(key))
        if ident in seen:
            continue
        seen.add(ident)
        rows.append((active.node, b))
    for node, b in rows:
        keys = ", ".join(dict.fromkeys(by_action[(id(node), b.action)]))
        yield b.description, f"key: {keys}" + (f" — {b.tooltip}" if b.tooltip else ""), node, b.action


class ReadableKeys:
    """An app mix-in: every key bar and palette of the app prints keys as :func:`key_name` does."""

    def get_key_display(self, binding: Binding) -> str:
        return binding.key_display or key_name(binding.key)
