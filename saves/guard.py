"""The one guard on every path that writes or prints a saved game (issue 24, 1-2).

A game a person is still playing (:func:`game_in_play`: a human, remote or
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

from engine.seating import human_seats

__all__ = ["REVEAL_FLAG", "PeekRefused", "game_in_play", "in_play_message", "refuse", "admit", "skip_line"]

REVEAL_FLAG = "--reveal-all-seats"


class PeekRefused(Exception):
    """A game a person is still playing, asked for without ``--reveal-all-seats`` (one line)."""


def game_in_play(trace: dict[str, Any]) -> bool:
    """Does ``trace`` hold a game a person is still playing?  A saved game with a human seat
    that has not ended (running, or stopped and resumable).

    Its trace holds every seat's calendar and private labels; showing it from another shell
    while the participant plays would let anyone peek.  Commands refuse such a game unless
    the researcher adds :data:`REVEAL_FLAG`.
    """
    saved = trace.get("saved") if isinstance(trace.get("saved"), dict) else {}
    status = saved.get("status")
    if status not in ("running", "stopped"):
        return False
    cfg = trace.get("config") if isinstance(trace.get("config"), dict) else {}
    return bool(human_seats(cfg, saved.get("agents"))) or cfg.get("participant") is not None


def in_play_message(trace: dict[str, Any], what: str) -> str:
    """The one line that refuses to show a game in play (:func:`game_in_play`)."""
    status = (trace.get("saved") or {}).get("status")
    return (f"game {str(trace.get('game_id'))[:8]} has a human seat and has not ended ({status}); {what} it now "
            f"would show every seat's calendar, costs and private labels to whoever reads this terminal. "
            f"Wait until the game ends, or add {REVEAL_FLAG} to show them anyway")


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
