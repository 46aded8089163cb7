"""A one-line key bar: every live key of the screen, as currently mapped, clickable.

Textual's ``Footer`` rebuilds a widget per key whenever the bindings change, which costs
tens of milliseconds per turn here (the bindings change with every phase).  This bar is a
single line of text re-rendered from ``Screen.active_bindings``; a click on a key runs it
as if it were pressed.  Keys disabled by ``check_action`` are hidden, as in the footer, and
so are keys a screen's ``key_visible(action, parameters)`` says are of no use right now
(such keys stay live and say why nothing happens when pressed).
"""

from __future__ import annotations

from rich.markup import escape
from textual.actions import parse as parse_action
from textual.widgets import Static


class KeyBar(Static):
    DEFAULT_CSS = """
    KeyBar { dock: bottom; height: 1; background: $panel; color: $text; padding: 0 1;
             text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._changed)
        self._render_keys()

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _changed(self, _screen) -> None:
        self.call_after_refresh(self._render_keys)

    def _render_keys(self) -> None:
        if not self.is_attached:
            return
        seen: set[tuple[int, str]] = set()
        screen_parts: list[str] = []
        app_parts: list[str] = []
        visible = getattr(self.screen, "key_visible", None)
        for key, active in self.screen.active_bindings.items():
            b = active.binding
            if not b.show or not b.description or not active.enabled:
                continue
            if visible is not None and active.node is self.screen:
                _, name, params = parse_action(b.action)
                if not visible(name, params):
                    continue
            ident = (id(active.node), b.action)
            if ident in seen:
                continue
            seen.add(ident)
            shown = self.app.get_key_display(b)
            part = (f"[@click=press({key!r})][b]{escape(shown)}[/b] {escape(b.description)}[/]",
                    len(shown) + 1 + len(b.description), b.action)
            (app_parts if active.node is self.app else screen_parts).append(part)
        self.update(self.fit(screen_parts, app_parts, self.size.width - 2 if self.size.width else 200))

    @staticmethod
    def fit(screen_parts: list[tuple[str, int, str]], app_parts: list[tuple[str, int, str]], width: int) -> str:
        """The keys in one line, cut nowhere when it can be helped: two spaces between keys,
        else one; else the app's keys shrink to help alone (quit is listed in the help)."""
        for parts, sep in ((screen_parts + app_parts, "  "), (screen_parts + app_parts, " "),
                           (screen_parts + [p for p in app_parts if p[2] == "help"], " ")):
            if sum(p[1] for p in parts) + len(sep) * (len(parts) - 1) <= width:
                return sep.join(p[0] for p in parts)
        return " ".join(p[0] for p in screen_parts + app_parts)

    def on_resize(self) -> None:
        self._render_keys()

    def action_press(self, key: str) -> None:
        self.app.simulate_key(key)
