"""Textual messages the game posts to the interface.

The game runs in a worker; everything it tells the interface arrives as one of the
messages below.  Engine events never reach a widget as they are: :class:`AppSink`
passes each through ``engine.observe.seat_event`` — the one privacy gate, beside the
observations personas get — and posts only what the human's seat may see (SPEC §5);
``tests/engine/test_privacy_boundary.py`` and ``tests/tui/test_privacy_screens.py``
check it.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message

from engine.observe import seat_event


class GameEvent(Message):
    """One engine event, already projected by ``engine.observe.seat_event``."""

    def __init__(self, event: dict[str, Any]) -> None:
        super().__init__()
        self.event = event


class HumanTurn(Message):
    """The engine waits for the human: ``request`` is a ``personas.human.HumanRequest``."""

    def __init__(self, request: Any) -> None:
        super().__init__()
        self.request = request


class GameOver(Message):
    """The game finished; ``result`` is the engine's ``GameResult``."""

    def __init__(self, result: Any) -> None:
        super().__init__()
        self.result = result


class GameFailed(Message):
    """The game could not go on (an engine or store error); ``error`` says why."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class AppSink:
    """An engine event sink that posts :class:`GameEvent` messages for one seat's eyes."""

    def __init__(self, target: Any, seat: int) -> None:
        self.target = target
        self.seat = seat

    async def emit(self, event: dict[str, Any]) -> None:
        view = seat_event(event, self.seat)
        if view is not None:
            self.target.post_message(GameEvent(view))
