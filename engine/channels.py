"""The message channels: the engine's names, the words people type for them, and the words shown.

One table for every vocabulary a channel has.  The engine plays ``dm``,
``participant_groupchat`` and ``all_groupchat`` (``engine.actions.MESSAGE_TYPES``); the
command line (``--channel dm,participant``), the study file (``channels = ["dm", "all"]``)
and a saved game's settings read :func:`parse_channels`; the screens and the replay
name a channel with :data:`CHANNEL_LABEL`; a short setting label is :data:`CHANNEL_SHORT`.
"""

from __future__ import annotations

from typing import Iterable

from .actions import MESSAGE_TYPES

__all__ = ["CHANNEL_ORDER", "CHANNEL_ALIASES", "CHANNEL_SHORT", "CHANNEL_LABEL", "CHANNEL_EVERY",
           "ChannelError", "parse_channels", "channel_label"]

#: The engine's channel names, in the order settings list them.
CHANNEL_ORDER: tuple[str, ...] = tuple(MESSAGE_TYPES)

#: What a person may type for a channel (command line, study file, keys are lower case).
CHANNEL_ALIASES: dict[str, str] = {
    "dm": "dm",
    "dms": "dm",
    "participant": "participant_groupchat",
    "participants": "participant_groupchat",
    "participant_groupchat": "participant_groupchat",
    "group": "participant_groupchat",
    "all": "all_groupchat",
    "all_groupchat": "all_groupchat",
    "broadcast": "all_groupchat",
}

#: Words that name every channel at once.
CHANNEL_EVERY: tuple[str, ...] = ("every", "*", "all-channels")

#: The short name of each channel (a setting's label, the study file's words).
CHANNEL_SHORT: dict[str, str] = {"dm": "dm", "participant_groupchat": "participant", "all_groupchat": "all"}

#: The name a person reads: the chat threads, the feed, the replay, the setup screen.
CHANNEL_LABEL: dict[str, str] = {"dm": "DM", "participant_groupchat": "participant chat",
                                 "all_groupchat": "all-agent chat"}


class ChannelError(ValueError):
    """A channel list that cannot be read; the message is one line."""


def parse_channels(text: str | Iterable[str]) -> tuple[str, ...]:
    """``"dm"``, ``"dm,participant"``, ``"dm+all"``, ``["dm", "all"]``, ``"every"`` → engine channel names, in order."""
    raw = text.replace("+", ",").split(",") if isinstance(text, str) else list(text)
    out: set[str] = set()
    for part in raw:
        p = str(part).strip().lower()
        if not p:
            continue
        if p in CHANNEL_EVERY:
            out.update(CHANNEL_ORDER)
            continue
        if p not in CHANNEL_ALIASES:
            raise ChannelError(f"unknown channel {str(part).strip()!r}; choose from dm, participant, all "
                               "(combine with ',' e.g. dm,participant, or 'every')")
        out.add(CHANNEL_ALIASES[p])
    if not out:
        raise ChannelError("no channel given; choose from dm, participant, all")
    return tuple(c for c in CHANNEL_ORDER if c in out)


def channel_label(channel: str) -> str:
    """The words for ``channel`` (an engine name or a message event type such as ``dm_sent``)."""
    name = channel[:-5] if channel.endswith("_sent") else channel
    return CHANNEL_LABEL.get(name, channel)
