"""Textual messages the game posts to the interface, and what the human's seat may see of events.

The game runs in a worker; everything it tells the interface arrives as one of the
messages below.  Engine events carry every seat's private data (calendar renders,
thinking, labels inside prompts), so they never reach a widget as they are:
:func:`seat_event` projects an event onto what seat ``seat`` may see (SPEC §5) — its own
data, the messages delivered to it, and the public course of the game (round, phase,
whose turn, which seat failed to answer) — and drops the rest.  It is the interface's
privacy boundary, the twin of ``engine.observe``; ``tests/tui/test_privacy_screens.py``
checks the screens built from it.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message

from engine.observe import MESSAGE_EVENTS, seat_event  # noqa: F401  (the privacy gate lives in the engine)


class GameEvent(Message):
    """One engine event, already projected by :func:`seat_event`."""

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
