"""``calbench replay``: the replay app — one replay screen, or the saved-games list.

Its own module so the screens do not import each other in a circle (the saved-games
screen opens replays; the app opens either).
"""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.binding import Binding

from .keys import ReadableKeys
from .screens.games import SavedGamesScreen
from .screens.replay import ReplayScreen

__all__ = ["ReplayApp"]


class ReplayApp(ReadableKeys, App):
    """``calbench replay``: one replay screen, or the saved-games list (``store_path``)."""

    TITLE = "CalBench replay"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", id="quit", priority=True)]

    def __init__(self, trace: dict[str, Any] | None = None, *, seat: int | None = None,
                 store: Any = None, store_path: str | None = None, reveal_all_seats: bool = False) -> None:
        super().__init__()
        self.trace = trace
        self.reveal_all_seats = reveal_all_seats  # the saved-games list opens games a human still plays
        self.seat = seat
        self.store = store
        self.store_path = store_path
        self._own_store = False

    async def on_mount(self) -> None:
        if self.trace is not None:
            self.push_screen(ReplayScreen(self.trace, seat=self.seat), callback=lambda _: self.exit())
            return
        if self.store is None and self.store_path:
            from saves.store import Store

            self.store = await Store.open(self.store_path)
            self._own_store = True

        self.push_screen(SavedGamesScreen(self.store, reveal_all_seats=self.reveal_all_seats),
                         callback=lambda _: self.exit())

    async def on_unmount(self) -> None:
        if self._own_store and self.store is not None:
            await self.store.close()
