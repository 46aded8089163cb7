"""Durable event sinks: a game's events written to the save database as they happen.

In the two modes a sink offers:

* ``durable=True`` (interactive games) commits every event as it is emitted, so a kill
  loses at most the event being written;
* ``durable=False`` (headless scripted suites, where events come at microsecond rates)
  buffers and commits at phase boundaries — a ``resolution`` or ``game_end`` event, or
  every 200 events — in one transaction each; a kill loses at most the phase being
  written (and ``--resume`` reruns an unfinished game anyway).
"""

from __future__ import annotations

from typing import Any

from .codec import _event_row
from .errors import StoreError

FLUSH_TYPES = frozenset({"resolution", "game_end"})
FLUSH_EVERY = 200


class StoreSink:
    """An ``engine.events.EventSink`` writing one game's events to the store."""

    def __init__(self, store: Any, game_id: str, durable: bool) -> None:  # a saves.store.Store
        self.store = store
        self.game_id = game_id
        self.durable = durable
        self.buffer: list[tuple] = []
        self.written = 0  # events committed through this sink
        self.closed = False

    async def emit(self, event: dict[str, Any]) -> None:
        if self.closed:
            raise StoreError(f"the event sink for game {self.game_id} is closed")
        seq = event.get("seq")
        row = _event_row(self.game_id, event, seq if isinstance(seq, int) else self.written + len(self.buffer))
        if self.durable:
            await self.store._write_events([row])
            self.written += 1
            return
        self.buffer.append(row)
        if event.get("type") in FLUSH_TYPES or len(self.buffer) >= FLUSH_EVERY:
            await self.flush()

    async def flush(self) -> None:
        """Commit everything emitted so far, in one transaction."""
        if not self.buffer:
            return
        rows = list(self.buffer)
        await self.store._write_events(rows)
        del self.buffer[: len(rows)]  # only once committed: a cancelled flush keeps them for the next one
        self.written += len(rows)

    async def aclose(self) -> None:
        if self.closed:
            return
        try:
            await self.flush()
        finally:
            self.closed = True
            self.store._forget_sink(self)

    async def __aenter__(self) -> "StoreSink":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


class Sinks:
    """The store's open sinks, by game: flushed before a game's status changes or it closes."""

    _sinks: dict[str, list[StoreSink]]

    def sink(self, game_id: str, *, durable: bool = True) -> StoreSink:
        s = StoreSink(self, game_id, durable)  # self is the Store
        self._sinks.setdefault(game_id, []).append(s)
        return s

    def _forget_sink(self, sink: StoreSink) -> None:
        sinks = self._sinks.get(sink.game_id)
        if sinks and sink in sinks:
            sinks.remove(sink)
            if not sinks:
                del self._sinks[sink.game_id]

    async def _flush_sinks(self, game_id: str) -> None:
        for s in list(self._sinks.get(game_id, ())):
            await s.flush()

    async def _close_sinks(self) -> None:
        for sinks in list(self._sinks.values()):
            for s in list(sinks):
                await s.aclose()
