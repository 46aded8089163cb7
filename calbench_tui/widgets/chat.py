"""Conversation panes: the feed, one thread per DM peer, the participant and all-agent groupchats.

The *feed* shows everything in order (every message delivered to you or sent by you, and
the game's notes: round starts, outcomes, hints); the other threads filter it.

Each thread is a line-based :class:`textual.widgets.RichLog` (only visible lines are
painted, old lines are pruned), so a pane with thousands of messages stays responsive.
The thread bar shows unread counts and is clickable; ``[`` / ``]`` switch threads.  The
composer is a one-line input: ``enter`` queues the message for your turn.

A hidden ``RichLog`` has no width, and Textual wraps what is written to it at its
``min_width`` (20 columns) for good: messages that arrived while a thread was hidden read
as a narrow column ever after.  :class:`ThreadLog` therefore keeps its lines as text and
renders them again whenever it is shown at a new width or was written to while hidden.

One channel, one name: "DM", "participant chat" (the meeting's participants) and
"all-agent chat" (every seat) — the same words in the thread bar, the feed, the
composer's target line, the setup screen and the help.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import ContentSwitcher, Input, RichLog, Static

from engine.channels import CHANNEL_LABEL
from engine.phrasebook import person_tag
from engine.protocol import payload_kind
from personas.seat_model import thread_of  # the model owns the thread keys

MAX_LINES = 5000
#: The one name of each channel, everywhere a participant reads it (``engine.channels``).
CHANNEL_NAME = CHANNEL_LABEL


@dataclass
class Thread:
    key: str  # "feed" | "dm:3" | "participant" | "all"
    title: str
    channel: str | None  # engine channel to send on, None for the feed (the screen picks the audience)
    to: int | None = None
    unread: int = 0


def message_text(event: dict, seat: int, *, blind: bool = False, person_tags: bool = False) -> Text:
    """One chat line: who → whom, the words, and a tag naming a typed payload (not when
    ``blind``: in a blinded study game the tag would tell a protocol partner from an LLM one).

    ``person_tags`` (a blinded game in the phrasebook's words, ``engine/phrasebook.py``):
    every message gets the tag a person would give it — ``⟨proposal⟩`` for a protocol's
    ``decision`` — read from its words, so it is the same whoever sent it."""
    t = Text()
    t.append(f"r{(event.get('round') or 0) + 1}·{(event.get('turn') or 0) + 1} ", style="dim")
    frm = event.get("from_agent")
    me = frm == seat
    t.append("you" if me else f"Agent {frm}", style="bold green" if me else "bold cyan")
    if event.get("channel") == "dm":
        to = event.get("to_agent")
        t.append(" → " + ("you" if to == seat else f"Agent {to}") + " (DM)", style="dim")
    elif event.get("channel") in CHANNEL_NAME:
        t.append(" → " + CHANNEL_NAME[event["channel"]], style="dim")
    t.append(": ")
    t.append(str(event.get("content") or ""))
    if person_tags:
        kind = person_tag(str(event.get("content") or ""))
    else:
        kind = None if blind else payload_kind(event.get("payload"))
    if kind:
        t.append(f"  ⟨{kind}⟩", style="dim")
    return t


class ThreadBar(Static):
    DEFAULT_CSS = """
    ThreadBar { height: 1; background: $panel; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def on_resize(self) -> None:
        panel = self.parent
        if isinstance(panel, ChatPanel):
            panel._refresh_bar()


class ThreadLog(RichLog):
    """A RichLog that keeps its lines and wraps them again at its real width (see the module doc)."""

    def __init__(self, **kw) -> None:
        super().__init__(wrap=True, min_width=20, max_lines=MAX_LINES, **kw)
        self.source: deque[Text] = deque(maxlen=MAX_LINES)
        self.rendered_width = 0
        self.stale = False

    def add(self, line: Text) -> None:
        self.source.append(line)
        width = self.scrollable_content_region.width
        if not self._size_known:
            self.write(line)  # deferred by RichLog until the first layout, then wrapped right
        elif self.display and width > 0 and width == self.rendered_width:
            self.write(line)
        else:
            self.stale = True  # hidden (or resized): rendered again when shown

    def catch_up(self) -> None:
        """Render every line again if the width changed or lines came in while hidden."""
        if not self.is_attached or not self._size_known:
            return
        width = self.scrollable_content_region.width
        if width <= 0:
            return
        if self.stale or width != self.rendered_width:
            self.stale = False
            self.rendered_width = width
            self.clear()
            for line in self.source:
                self.write(line, scroll_end=False)
            self.scroll_end(animate=False, immediate=False)

    def on_mount(self) -> None:
        # kept scrolled to the newest line through writes *and* resizes (the queued-messages box
        # appearing under the thread shortens it: the last lines went out of sight below), until
        # the person scrolls up; back at the bottom, it follows again (Textual's anchor)
        self.anchor()

    def on_resize(self) -> None:
        self.call_after_refresh(self.catch_up)


class ChatPanel(Vertical):
    DEFAULT_CSS = """
    ChatPanel { height: 1fr; }
    ChatPanel ContentSwitcher { height: 1fr; }
    ChatPanel RichLog { height: 1fr; background: $surface; scrollbar-size-vertical: 1; }
    ChatPanel #outbox { height: auto; max-height: 9; color: $text-muted; overflow-y: auto; }
    ChatPanel #composer { height: 1; }
    ChatPanel #to { height: 1; color: $text-muted; }
    """

    class Send(Message):
        """The person pressed enter in the composer."""

        def __init__(self, thread: Thread, text: str) -> None:
            super().__init__()
            self.thread = thread
            self.text = text

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.threads: dict[str, Thread] = {"feed": Thread("feed", "Feed", None)}
        self.order: list[str] = ["feed"]
        self.active = "feed"
        self.default_target = "the meeting's participants"
        self.seat: int | None = None
        self.count = 0
        self.blind = False  # a blinded study game: no payload tags (see message_text)
        self.person_tags = False  # a blinded game in the phrasebook's words: a person's tags (see message_text)

    def compose(self) -> ComposeResult:
        yield ThreadBar(id="threads")
        with ContentSwitcher(initial="t-feed"):
            yield ThreadLog(id="t-feed")
        yield Static("", id="outbox")
        yield Static("", id="to")
        # select_on_focus off: a message half typed, left (esc) and taken up again (i) is continued,
        # not replaced by the first key
        yield Input(placeholder="write a message, enter queues it", id="composer", compact=True,
                    select_on_focus=False)

    # -- threads ------------------------------------------------------------------------
    def setup(self, seat: int, num_agents: int, channels: tuple[str, ...]) -> None:
        self.seat = seat
        new: list[Thread] = []
        if "dm" in channels:
            new += [Thread(f"dm:{a}", f"DM{a}", "dm", a) for a in range(num_agents) if a != seat]
        if "participant_groupchat" in channels:
            new.append(Thread("participant", CHANNEL_NAME["participant_groupchat"], "participant_groupchat"))
        if "all_groupchat" in channels:
            new.append(Thread("all", CHANNEL_NAME["all_groupchat"], "all_groupchat"))
        switcher = self.query_one(ContentSwitcher)
        for th in new:
            if th.key in self.threads:
                continue
            self.threads[th.key] = th
            self.order.append(th.key)
            log = ThreadLog(id=self._dom_id(th.key))
            log.display = False  # mounted after the switcher chose: hidden until shown
            switcher.mount(log)
        self.show("feed")

    @staticmethod
    def _dom_id(key: str) -> str:
        return "t-" + key.replace(":", "-")

    def log_for(self, key: str) -> ThreadLog:
        return self.query_one("#" + self._dom_id(key), ThreadLog)

    def show(self, key: str) -> None:
        if key not in self.threads:
            return
        self.active = key
        self.threads[key].unread = 0
        if key == "feed":  # the feed shows every message: nothing is left unread
            for th in self.threads.values():
                th.unread = 0
        self.query_one(ContentSwitcher).current = self._dom_id(key)
        log = self.log_for(key)
        log.call_after_refresh(log.catch_up)
        self._refresh_bar()

    def cycle(self, delta: int) -> None:
        i = self.order.index(self.active)
        self.show(self.order[(i + delta) % len(self.order)])

    def thread(self) -> Thread:
        return self.threads[self.active]

    def writable_thread(self) -> Thread:
        return self.threads[self.active]

    def set_default_target(self, text: str) -> None:
        self.default_target = text
        self._refresh_bar()

    def _refresh_bar(self) -> None:
        self.query_one(ThreadBar).update(self._bar_content())
        target = self.writable_thread()
        to = self.query_one("#to", Static)
        if target.channel is None:
            to.update(Text(f"i writes to {self.default_target} · [ ] threads", overflow="ellipsis", no_wrap=True))
        elif target.channel == "dm":
            to.update(Text(f"i writes to Agent {target.to} (DM) · [ ] threads", overflow="ellipsis", no_wrap=True))
        else:
            to.update(Text(f"i writes to the {target.title} · [ ] threads", overflow="ellipsis", no_wrap=True))

    SHORT_TITLES = {"participant": "part. chat", "all": "all chat"}

    def _bar_content(self) -> str:
        width = self.query_one(ThreadBar).size.width or 200

        def build(short: bool) -> tuple[str, int]:
            parts, plain = [], 0
            for key in self.order:
                th = self.threads[key]
                title = self.SHORT_TITLES.get(key, th.title) if short else th.title
                label = title + (f"({th.unread})" if th.unread else "")
                if key == self.active:  # marked by a sign too, not by style alone (NO_COLOR)
                    label = f"▸{label}"
                    markup = f"[reverse b]{label}[/]"
                elif th.unread:
                    markup = f"[b]{label}[/]"
                else:
                    markup = label
                plain += len(label) + 1
                parts.append(f"[@click=screen.thread('{key}')]{markup}[/]")
            return "│".join(parts), plain - 1

        full, n = build(False)
        return full if n <= width else build(True)[0]

    # -- content ------------------------------------------------------------------------
    def add_message(self, event: dict) -> None:
        key = thread_of(event, self.seat if self.seat is not None else -1)
        line = message_text(event, self.seat if self.seat is not None else -1, blind=self.blind,
                            person_tags=self.person_tags)
        self.log_for("feed").add(line)
        self.count += 1
        if key not in self.threads or key == "feed":
            return
        self.log_for(key).add(line)
        if key != self.active and self.active != "feed" and event.get("from_agent") != self.seat:
            self.threads[key].unread += 1
            self._refresh_bar()

    def note(self, text: str | Text, *, also_active: bool = False) -> None:
        line = text if isinstance(text, Text) else Text(text, style="italic")
        self.log_for("feed").add(line)
        if also_active and self.active != "feed":
            self.log_for(self.active).add(line)

    def set_outbox(self, lines: list[str], count: int | None = None) -> None:
        """The queue: ``lines`` to show, ``count`` messages in it (one line can stand for the
        same words sent by DM to several seats)."""
        box = self.query_one("#outbox", Static)
        if not lines:
            box.update("")
            return
        # Every queued word is shown whole (wrapped): the person checks what they are about to reveal.
        n = len(lines) if count is None else count
        head = Text(f"queued: {n} message{'s' if n != 1 else ''} · e sends · u takes back", style="bold",
                    no_wrap=True, overflow="ellipsis")
        body = Text("\n".join(lines))
        box.update(Text("\n").join([head, body]))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            return
        event.input.value = ""
        self.post_message(self.Send(self.writable_thread(), text))
