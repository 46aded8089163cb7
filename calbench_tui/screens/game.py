"""The game screen: what seat N may see (SPEC §5) — and nothing more.

It renders a :class:`personas.seat_model.SeatModel` (handed down by the app) and holds
no game state of its own: the model folds the human seat's observations (handed over by
``personas.human.HumanPersona`` requests) and the engine events projected by
:func:`engine.observe.seat_event`, the same for a local game and over the wire; what the
person does goes back up as messages (:class:`GameScreen.OpenBatch`) or as the request's
answer.  Left: the meeting card and the seat's own
calendar; right: the conversation threads and the composer; top: the phase banner and
the seats bar.

A CHEAP_TALK turn works like this: messages typed (``i``, ``enter``) or made by a quick
action (``p`` propose, ``a`` accept, ``d`` decline, ``c`` share my costs, ``r`` ask for
costs) are *queued*; ``e`` sends them all and ends the turn (with nothing queued it is a
pass).  DECISION and VOLUNTARY open the batch builder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Static

from textual.message import Message

from engine.events import MESSAGE_EVENTS
from personas.seat_model import Hint, SeatModel

from ..widgets.keybar import KeyBar
from ..widgets.calendar import CalendarView
from ..widgets.chat import CHANNEL_NAME, ChatPanel
from ..widgets.meeting import MeetingCard
from ..widgets.phase import PhaseBanner
from ..widgets.seats import SeatsBar


def restart_notice(round_: Any) -> Text:
    """What a seat is told when a resumed game plays the round that was cut short again."""
    n = f" {round_ + 1}" if isinstance(round_, int) else ""
    return Text(f"The game was stopped during round{n}, so round{n} starts again from its beginning. "
                "Everything sent before the stop is kept in the record (marked interrupted), but your "
                "partners start this round afresh: say again what still matters.", style="bold yellow")


def short_kind(model: str | None, kind: str | None) -> str:
    m = (model or kind or "?").lower()
    if m.startswith("llm:"):
        m = m[4:]
    m = m.replace("scripted:", "").rsplit("/", 1)[-1]  # "meta-llama/llama-3" → "llama-3"
    return m  # the seats bar fits it to its cell (SeatsBar: short forms, then an ellipsis)


def failure_note(agent: int, ev: dict[str, Any], *, blinded: bool = False) -> str:
    """The line a person reads when another seat could not answer: why, in words, outside study
    games ("timed out after 120 s, 5 tries; the endpoint answers slowly"); in a study game only
    that it did not answer (the reason would tell that a model sits there)."""
    if blinded:
        return f"Agent {agent} did not answer."
    reason = ev.get("reason")
    if isinstance(reason, str) and reason.strip():
        return f"Agent {agent} failed to answer: {reason.strip()}."
    if ev.get("error") == "context_overflow" or ev.get("type") == "context_overflow":
        return f"Agent {agent} failed to answer: its conversation no longer fits its model's context."
    return f"Agent {agent} failed to answer ({ev.get('error')})."


def talk_key_elsewhere(key: str, keymap: dict[str, str] | None, *, ended: bool = False) -> str | None:
    """Why a key of the talk (a :class:`GameScreen` binding, as ``keymap`` maps it) does nothing
    on the screen above the game (the batch builder, or the end screen when ``ended``); None
    when ``key`` is not one of the talk's keys."""
    from ..keys import binding_keys, key_name

    name = key_name(key)
    for b in GameScreen.BINDINGS:
        if isinstance(b, Binding) and b.id != "leave_composer" and name in binding_keys(b, keymap):
            what = f"{name} ({b.description})"
            if ended:
                return f"The game is over: {what} was a key of the talk. The key bar lists what works here."
            return (f"{what} is a key of the talk, and this round's talk is over: build your batch here "
                    "(the key bar lists its keys; Talk shows the conversation).")
    return None


class GameScreen(Screen):
    CSS_PATH = Path(__file__).with_suffix(".tcss")
    AUTO_FOCUS = "#calendar"

    BINDINGS = [
        Binding("e", "end_turn", "End turn", id="end_turn", tooltip="send what is queued and end your turn (with nothing queued: pass)"),
        Binding("i", "compose", "Write", id="compose", tooltip="write a message in the composer (enter queues it)"),
        Binding("p", "quick('propose')", "Propose", id="propose", tooltip="propose the slot under the cursor (or the marked slots) to whom the line above the composer names"),
        Binding("a", "quick('accept')", "Accept", id="accept", tooltip="accept the slot proposed to you"),
        Binding("d", "quick('decline')", "Decline", id="decline", tooltip="decline the slot proposed to you"),
        Binding("c", "quick('share_costs')", "Costs", id="share_costs", tooltip="tell others your cost for the marked slots (or the slots you were asked about)"),
        Binding("r", "quick('ask_costs')", "Ask", id="ask_costs", tooltip="ask for costs per slot, to whom the line above the composer names"),
        Binding("b", "open_batch", "Batch", id="open_batch", tooltip="go back to the batch builder (DECISION / VOLUNTARY)"),
        Binding("u", "unqueue", "Take back", show=False, id="unqueue", tooltip="take back the last queued message"),
        Binding("left_square_bracket", "cycle_thread(-1)", "Previous thread", show=False, id="thread_prev", tooltip="show the previous conversation thread"),
        Binding("right_square_bracket", "cycle_thread(1)", "Next thread", show=False, id="thread_next", tooltip="show the next conversation thread"),
        Binding("escape", "leave_composer", "Leave composer", show=False, id="leave_composer", tooltip="leave the composer, back to the calendar"),
    ]

    class OpenBatch(Message):
        """The person asks for the batch builder again (``b``): the app opens it for ``request``."""

        def __init__(self, request) -> None:
            super().__init__()
            self.request = request

    def __init__(self, model: SeatModel, *, blind: bool = False, participant_words: bool = False) -> None:
        super().__init__()
        self.model = model  # the seat's state (personas/seat_model.py); this screen only renders it
        # a study game: partners are "Agent N" only (no protocol, no model), the engine's
        # rejections are said in the participant's words (calbench_tui/wording.py)
        self.blind = blind
        self.participant_words = participant_words
        self.seat = model.seat
        self._arm: str | None = None  # a key that asked for a second press
        self._binding_state: tuple | None = None
        self._ready = False
        self._backlog: list[tuple[Any, tuple]] = []  # calls that arrived before the screen was mounted

    @property
    def pending(self):
        """The speak request waiting for the person (the model's; read-only here)."""
        return self.model.pending

    @property
    def round(self) -> int:
        return self.model.round

    # -- layout -------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield PhaseBanner(id="banner")
        yield SeatsBar(id="seats")
        with Horizontal(id="body"):
            with Vertical(id="left"):  # the meeting card always in view; only the calendar scrolls
                yield MeetingCard(id="meeting")
                with VerticalScroll(id="left-scroll"):
                    yield CalendarView(id="calendar")
                yield Static("", id="slot-detail")
            with Vertical(id="right"):
                yield ChatPanel(id="chat")
        yield KeyBar()

    def on_mount(self) -> None:
        settings = getattr(self.app, "settings", None)
        self.query_one("#composer", Input).cursor_blink = settings is None or settings.cursor_blink
        self.query_one(PhaseBanner).seat = self.seat
        self.calendar.detail = self.query_one("#slot-detail", Static)
        if self.model.num_rounds:
            self.banner.update_state(rounds=self.model.num_rounds)
        self.query_one(ChatPanel).blind = self.blind
        # a blinded game in the phrasebook's words: every message tagged as a person calls it
        self.query_one(ChatPanel).person_tags = self.blind and self.model.voice is not None
        self.query_one(ChatPanel).setup(self.seat, self.model.num_agents, self.model.channels)
        self.query_one(ChatPanel).note(f"You are Agent {self.seat}. ? shows the instructions and keys; "
                                       "ctrl+p lists every action by name.")
        self._ready = True
        backlog, self._backlog = self._backlog, []
        for fn, args in backlog:
            fn(*args)

    def deliver(self, fn, *args) -> None:
        """Run ``fn(*args)`` now, or once the screen is mounted (the game may start first)."""
        if self._ready:
            if not self.is_attached or not self.query(SeatsBar):
                return  # the screen is being taken down (ctrl+q): the store keeps the event, nothing to paint
            fn(*args)
        else:
            self._backlog.append((fn, args))

    def note(self, text: str | Text) -> None:
        """A line in the conversation feed (the app's and a study's notes: an error, a timeout)."""
        self.deliver(lambda: self.chat.note(text if isinstance(text, Text) else Text(text, style="bold"),
                                            also_active=True))

    def on_screen_resume(self) -> None:
        self.sync_bindings()  # back from the batch builder: the batch may have been answered

    @property
    def banner(self) -> PhaseBanner:
        return self.query_one(PhaseBanner)

    @property
    def chat(self) -> ChatPanel:
        return self.query_one(ChatPanel)

    @property
    def calendar(self) -> CalendarView:
        return self.query_one(CalendarView)

    # -- what keys are live -------------------------------------------------------------
    def sync_bindings(self) -> None:
        """Refresh the footer only when what is enabled changed (a footer rebuild is costly)."""
        m = self.model
        state = (m.pending is not None, m.proposal is not None, bool(m.outbox), m.batch_open)
        if state != self._binding_state:
            self._binding_state = state
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Every key stays live: pressed at the wrong moment it says why nothing happened
        # (a silent key reads as a frozen game).  The key bar shows only what is useful now.
        return True

    def key_visible(self, action: str, parameters: tuple[object, ...]) -> bool:
        """Whether the key bar lists this action now (the key itself always answers)."""
        m = self.model
        if action == "end_turn":
            return m.pending is not None
        if action == "quick":
            if m.pending is None:
                return False
            if parameters and parameters[0] in ("propose", "ask_costs", "share_costs"):
                return True
            return m.proposal is not None
        if action == "open_batch":
            return m.batch_open
        if action == "unqueue":
            return bool(m.outbox)
        return True

    def not_now(self, action: str, parameters: tuple[object, ...] = ()) -> str | None:
        """Why an action cannot run now, in words (None when it can)."""
        kind = parameters[0] if parameters else None
        m = self.model
        if m.game_over:
            return "The game is over."
        if action == "end_turn" and m.pending is None:
            return "It is not your turn to talk: wait for YOUR TURN in the top line."
        if action == "quick":
            if m.pending is None:
                return ("It is not your turn to talk: quick actions are made on your turn "
                        "(you can still write with i; it is sent on your next turn).")
            if kind in ("accept", "decline") and m.proposal is None:
                where = f" for M{m.meeting_id}" if m.meeting_id is not None else ""
                return f"Nothing to {kind}: no slot has been proposed to you{where} yet."
        if action == "open_batch" and not m.batch_open:
            return "There is no batch to build now: the batch builder opens by itself in DECISION."
        if action == "unqueue" and not m.outbox:
            return "Nothing to take back: no message is queued."
        return None

    def _refuse(self, action: str, parameters: tuple[object, ...] = ()) -> bool:
        why = self.not_now(action, parameters)
        if why:
            self.notify(why, severity="warning", timeout=4)
            return True
        return False

    # -- requests from the human seat ----------------------------------------------------
    def on_register(self, briefing) -> None:
        self.model.register(briefing)
        self.calendar.set_view(briefing.view)
        self.banner.update_state(rounds=self.model.num_rounds, budget=self.model.max_turns)
        self.query_one(MeetingCard).set_penalty(self.model.penalty)

    def on_speak(self, request) -> None:
        obs = request.obs
        self.model.speak(request)
        self.calendar.set_view(obs.view)
        self.query_one(MeetingCard).set_meeting(obs.meeting, self.seat, self.model.penalty)
        self.banner.update_state(round=obs.round, phase="CHEAP_TALK", sweep=obs.turn, speaker=self.seat,
                                 budget=obs.max_turns, note="")
        if obs.is_last_turn:
            self.chat.note(Text("Last talk turn of this round: settle the slot now (propose or accept one).", style="bold"),
                           also_active=True)
        elif obs.turn == 0 and obs.is_participant and self.round_first_turn(obs):
            self.chat.note(self._first_turn_hint(obs), also_active=True)
        self.sync_bindings()

    def round_first_turn(self, obs) -> bool:
        return not obs.inbox

    def _first_turn_hint(self, obs) -> Text:
        m = obs.meeting
        others = [p for p in m.participants if p != self.seat]
        if self.seat == min(m.participants):
            return Text(f"Your turn to open M{m.id}: r asks Agents {', '.join(map(str, others))} for their costs, "
                        "or p proposes the slot under the cursor ▸ (or the slots you marked with space). "
                        "e ends your turn.", style="bold")
        return Text(f"Your turn for M{m.id}: write (i), share your costs (c), propose (p), or e to pass.",
                    style="bold")

    def on_batch_request(self, request) -> None:
        self.model.batch(request)
        self.banner.update_state(round=request.obs.round, phase=request.obs.phase, speaker=None,
                                 note="build your batch")
        self.sync_bindings()

    def on_presence(self, away: list[int]) -> None:
        """A served table's word on who is connected: a human seat whose participant left reads
        "left" in the seats bar until they are back (the turn events do not change that)."""
        self.query_one(SeatsBar).set_away(away)

    # -- game events --------------------------------------------------------------------
    def on_game_event(self, ev: dict[str, Any]) -> None:
        """Fold the projected event into the model, then paint what changed."""
        t = ev["type"]
        hints = self.model.apply(ev)
        seats = self.query_one(SeatsBar)
        agent = ev.get("agent_id")
        if t == "game_start":
            kinds = [short_kind(m, k) for m, k in zip(ev.get("agent_models") or [], ev.get("agent_types") or [])]
            seats.setup(kinds, self.seat, blind=self.blind)
            return
        if t == "round_start":
            self._new_round(hints)
            return
        if t == "round_restarted":
            self.chat.note(restart_notice(ev.get("round")), also_active=True)
            return
        if t == "turn_start":
            self.banner.update_state(phase="CHEAP_TALK", sweep=ev.get("turn") or 0, speaker=agent)
            if agent is not None:
                seats.set_state(agent, "thinking")
            return
        if t == "turn_end":
            if agent is not None:
                seats.set_state(agent, "waiting")
            return
        if t in MESSAGE_EVENTS:
            self.chat.add_message(ev)
            self._hints(hints)
            self.calendar.set_highlight(self.model.talk)
            self.sync_bindings()
            return
        if t == "decide_start":
            self.banner.update_state(phase=ev.get("phase") or "DECISION", speaker=None,
                                     note="" if agent != self.seat else "build your batch")
            if agent is not None:
                seats.set_state(agent, "thinking")
            return
        if t == "decide_end":
            if agent is not None:
                seats.set_state(agent, "done" if ev.get("phase") == "DECISION" else "waiting")
            return
        if t == "batch_applied" and agent == self.seat:
            self.calendar.set_calendar(self.model.calendar)
            self.query_one(MeetingCard).set_penalty(self.model.penalty)
            self.chat.note(Text(f"Your batch was applied (cost {ev.get('cost') or 0}).", style="green"),
                           also_active=True)
            return
        if t == "batch_rejected" and agent == self.seat:
            why = ev.get("conflict_description")
            from ..wording import participant_words, play_words

            if self.participant_words:
                if self.model.timed_out_round == self.model.round:
                    return  # the timeout's own note said what happened (no move); no engine words
                why = participant_words(str(why))
            else:
                why = play_words(str(why))
            self.chat.note(Text(f"Your batch was rejected: {why}", style="red"))
            return
        if t == "batch_rolled_back" and agent == self.seat:
            self.chat.note(Text(f"Nothing was applied: {ev.get('reason')}", style="red"), also_active=True)
            return
        if t == "resolution":
            self._resolution(ev, hints)
            return
        if t in ("seat_timeout", "parse_error", "context_overflow"):
            if agent == self.seat:
                self.chat.note(Text(f"Your answer could not be used: {ev.get('detail')}", style="red"))
            elif agent is not None and t in ("seat_timeout", "context_overflow"):
                seats.set_failed(agent, ev.get("error") or t)
                # blind (a study): what went wrong (an endpoint, a model's context) would name the partner
                self.chat.note(Text(failure_note(agent, {**ev, "type": t}, blinded=self.blind), style="red"))
            return
        if t == "meeting_broken":
            self.chat.note(Text(f"Meeting M{ev.get('meeting_id')} is broken: its copies are no longer in one slot.",
                                style="red"), also_active=True)
            return
        if t == "game_end":
            self.banner.update_state(phase="GAME_END", speaker=None, note="results are ready")
            seats.all("done")

    def _new_round(self, hints: list[Hint]) -> None:
        m = self.model
        self._outbox_changed()
        for h in hints:
            if h.kind == "kept":
                self.chat.note(Text(f"{h.count} message(s) you wrote are still queued: they are sent on your next "
                                    "turn to talk (u takes the last one back).", style="bold"), also_active=True)
            elif h.kind == "dropped":
                self.chat.note(f"{h.count} quick action(s) about the last meeting were dropped (not sent).",
                               also_active=True)
        self.calendar.set_highlight([])
        self.calendar.marks.clear()
        parts = m.participants
        self.query_one(MeetingCard).set_meeting(m.meeting, self.seat, m.penalty)
        self.query_one(SeatsBar).all("waiting")
        self.banner.update_state(round=m.round, phase="CHEAP_TALK", sweep=0, speaker=None, note="")
        who = ", ".join("you" if p == self.seat else str(p) for p in parts)
        line = Text(f"── Round {m.round + 1}/{m.num_rounds or '?'}: meeting M{m.meeting_id} with {who}. ",
                    style="bold")
        line.append("You are in it." if self.seat in parts else
                    "You are not in it; you speak only if someone writes to you.")
        self.chat.note(line, also_active=True)
        if not m.thread_fits(self.chat.active):  # e.g. a DM with a seat not in the new meeting
            self.chat.show("feed")
        self._update_target()

    def _hints(self, hints: list[Hint]) -> None:
        """Say what the model noticed in a message (and point the cursor where it helps)."""
        for h in hints:
            if h.kind == "audience":
                self._update_target()
            elif h.kind == "asks_costs":
                self.chat.note(Text(f"Agent {h.frm} asks for your costs: c answers for those slots "
                                    "(only what you choose to share leaves your calendar).", style="italic"))
            elif h.kind == "proposes":
                self.calendar.cursor = h.slot
                self.chat.note(Text(f"Agent {h.frm} proposes slot {h.slot}: a accepts, d declines; in DECISION "
                                    "that slot is preselected.", style="italic"))
            elif h.kind == "cheapest":
                self.calendar.cursor = h.slot
                self.chat.note(Text(f"Cheapest common slot from the costs you got: slot {h.slot} (total {h.total}). "
                                    "p proposes it (the cursor is on it).", style="bold"), also_active=True)
            elif h.kind == "no_common_slot":
                self.chat.note(Text("From the costs you got, no slot works for everyone.", style="bold red"),
                               also_active=True)

    def _resolution(self, ev: dict[str, Any], hints: list[Hint] = ()) -> None:
        self.calendar.apart = set(self.model.apart)
        self.calendar.set_calendar(self.model.calendar)
        if ev.get("participant"):
            mid = ev.get("meeting_id")
            if ev.get("coordinated"):
                text = Text(f"✓ M{mid} is scheduled at slot {ev.get('my_slot')}.", style="bold green")
                if mid == self.model.meeting_id:
                    self.calendar.participants[mid] = tuple(self.model.participants)
            else:
                my_slot = ev.get("my_slot")
                where = f"your copy: slot {my_slot}" if my_slot is not None else "you have no copy"
                text = Text(f"✗ M{mid} was not coordinated ({where}).", style="bold red")
            self.query_one(MeetingCard).set_outcome(text.plain)
            self.chat.note(text, also_active=True)
        else:
            for h in hints:
                if h.kind == "outside_over":
                    card, line = self._outside_outcome(h)
                    self.query_one(MeetingCard).set_outcome(card)
                    self.chat.note(line, also_active=True)
        self.sync_bindings()

    def _outside_outcome(self, hint: Hint) -> tuple[str, Text]:
        """The end of a round the seat was not in, said with what the seat may know (SPEC §5): its
        own calendar and cost, never whether the others scheduled their meeting."""
        m = self.model
        who = ", ".join(map(str, m.participants))
        if hint.count:
            mine = (f"you moved {hint.count} item{'s' if hint.count != 1 else ''} of your calendar "
                    f"(cost {hint.total}); your cost so far: {m.penalty}")
        else:
            mine = f"your calendar did not change; your cost so far: {m.penalty}"
        line = Text(f"Round {m.round + 1} is over. ", style="bold")
        line.append(f"M{m.meeting_id} was for Agents {who}; you were not in it, so whether it was scheduled "
                    f"is theirs to know (you see only your own calendar). This round {mine}.")
        return f"Round over: {mine}.", line

    # -- actions ------------------------------------------------------------------------
    def action_end_turn(self) -> None:
        if self._refuse("end_turn"):
            return
        msgs = self.model.end_turn()
        if msgs is None:
            return
        self.chat.set_outbox([])
        self.banner.update_state(speaker=None, note="")
        if not msgs:
            self.chat.note("You passed.")
        self.sync_bindings()

    def action_compose(self) -> None:
        if self._refuse("compose"):
            return
        self.query_one("#composer", Input).focus()

    def action_leave_composer(self) -> None:
        self.calendar.focus()

    def action_cycle_thread(self, delta: int) -> None:
        self.chat.cycle(delta)

    def action_thread(self, key: str) -> None:
        self.chat.show(key)

    def action_unqueue(self) -> None:
        if self._refuse("unqueue"):
            return
        m = self.model.unqueue()
        if m is not None:
            self._outbox_changed()
            self.notify(f"Taken back: {m.content[:60]}")
            self.sync_bindings()

    def action_open_batch(self) -> None:
        if self._refuse("open_batch"):
            return
        self.post_message(self.OpenBatch(self.model.batch_request))

    def _update_target(self) -> None:
        who = self.model.audience()
        channels = self.model.channels
        if "dm" not in channels:
            ch = "participant_groupchat" if "participant_groupchat" in channels else "all_groupchat"
            text = "the participant chat" if ch == "participant_groupchat" else "the all-agent chat (everyone)"
        elif not who:
            text = "nobody yet"
        else:
            text = ("Agent " if len(who) == 1 else "Agents ") + ", ".join(map(str, who)) + " (DM)"
        self.chat.set_default_target(text)

    def on_chat_panel_send(self, event: ChatPanel.Send) -> None:
        th = event.thread
        out = self.model.write(event.text, channel=th.channel, to=th.to, open_channel=self.chat.thread().channel)
        if out.warning:
            self.notify(out.warning, severity="warning")
            return
        self._queued()

    def _queued(self) -> None:
        self._outbox_changed()
        if self.model.pending is None and not self.model.talk_left:
            self.notify("Queued, but the last round's talk is over: nothing more is sent in this game. "
                        "u takes it back.", severity="warning", timeout=6)
        elif self.model.pending is None:
            self.notify("Queued: it is sent on your next turn to talk (in a later round if this round's "
                        "talk is over). u takes it back.", timeout=5)
        self.sync_bindings()

    def _outbox_changed(self) -> None:
        self.chat.set_outbox(self._outbox_lines(), len(self.model.outbox))

    def typed(self) -> str:
        """The composer's words (enter not pressed yet); empty before the screen is composed."""
        try:
            return self.query_one("#composer", Input).value
        except Exception:
            return ""

    def restore_unsent(self, kept: dict[str, Any]) -> None:
        """Put back what was queued and typed when the game was stopped (``calbench-play --resume``)."""
        n = self.model.requeue(kept.get("queued"))
        typed = kept.get("composer") if isinstance(kept.get("composer"), str) else ""
        if typed:
            self.query_one("#composer", Input).value = typed
        if not n and not typed:
            return
        self._outbox_changed()
        what = [f"{n} queued message{'s' if n != 1 else ''}" if n else "", "the words you were typing" if typed else ""]
        keys = "e sends what is queued, u takes back the last one." if n else "i takes you back to them."
        self.chat.note(Text(f"Back from before the stop: {' and '.join(w for w in what if w)}. {keys}",
                            style="bold yellow"), also_active=True)
        self.sync_bindings()

    def _outbox_lines(self) -> list[str]:
        """One line per queued text; the same words by DM to several seats read as one line."""
        out = []
        for kind, tos, content in self.model.outbox_groups():
            if kind == "dm":
                to = ("Agent " if len(tos) == 1 else "Agents ") + ", ".join(map(str, tos)) + " (DM)"
            else:
                to = CHANNEL_NAME.get(kind, kind)
            out.append(f"→ {to}: {content}")
        return out

    # quick actions ----------------------------------------------------------------------
    def action_quick(self, kind: str) -> None:
        if self._refuse("quick", (kind,)):
            return
        cal = self.calendar
        out = self.model.quick(kind, cursor=cal.cursor, selected=cal.selected_slots() if kind == "propose" else (),
                               marks=cal.marks, open_channel=self.chat.thread().channel,
                               open_to=self.chat.thread().to, confirmed=self._arm == kind)
        if out.warning:
            self._arm = kind if out.confirm else None
            self.notify(out.warning, severity="warning", **({"timeout": 8} if out.confirm else {}))
            return
        if kind in ("propose", "accept"):
            self.calendar.set_highlight(self.model.talk)
        self.calendar.marks.clear()
        self.calendar.refresh()
        self._arm = None
        if out.messages:
            self._queued()
