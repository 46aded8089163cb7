"""The one guard on every path that writes or prints a saved game (issue 24, 1-2).

A game a person is still playing (``saves.store.human_game_in_play``: a human, remote or
study seat, and the game is ``running`` or ``stopped`` so it may resume) holds every
seat's calendar, private labels, renders and the messages between the other seats.  No
command writes or prints such a game unless the researcher says ``--reveal-all-seats``:

* one game asked for by name (``export GAME``, ``trace GAME``, ``replay GAME``): refused
  in one line (:func:`refuse`);
* many games (``export --all``, ``export --all --status running|stopped``, ``import`` of
  another save database, ``import`` of a trace file saved mid-game, ``report``, ``study
  export``): the game is left out and one line says so (:func:`admit` / :func:`skip_line`);
* listings (``games``, ``games --json``) carry no seat's private data at all.
"""

from __future__ import annotations

from typing import Any

from .store import REVEAL_FLAG, human_game_in_play, in_play_message

__all__ = ["REVEAL_FLAG", "PeekRefused", "game_in_play", "refuse", "admit", "skip_line"]


class PeekRefused(Exception):
    """A game a person is still playing, asked for without ``--reveal-all-seats`` (one line)."""


def game_in_play(trace: dict[str, Any]) -> bool:
    """Does ``trace`` hold a game a person is still playing?"""
    return human_game_in_play(trace)


def refuse(trace: dict[str, Any], *, reveal: bool, what: str) -> None:
    """Raise :class:`PeekRefused` for a game in play unless ``reveal``."""
    if not reveal and game_in_play(trace):
        raise PeekRefused(in_play_message(trace, what))


def admit(trace: dict[str, Any], *, reveal: bool) -> bool:
    """May ``trace`` be written or printed as it is?  (A command that handles many games
    leaves it out when not, and says so with :func:`skip_line`.)"""
    return reveal or not game_in_play(trace)


def skip_line(trace: dict[str, Any], what: str, *, flag: bool = True) -> str:
    """The one line that says a game in play was left out of ``what``."""
    status = (trace.get("saved") or {}).get("status")
    tail = f"; wait until it ends, or add {REVEAL_FLAG}" if flag else "; export again when it ends"
    return (f"skipped game {str(trace.get('game_id'))[:8]} in {what}: a person is still playing it ({status}) "
            f"and it holds every seat's calendar, labels and messages{tail}")
