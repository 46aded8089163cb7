"""The game screen: what seat N may see (SPEC §5) — and nothing more.

Its state comes from two places only: the human seat's observations (handed over by
``personas.human.HumanPersona`` requests) and engine events projected by
:func:`engine.observe.seat_event`.  Left: the meeting card and the seat's own
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

from engine import protocol
from engine.actions import Message as ActionMessage
from engine.events import MESSAGE_EVENTS
from engine.model import item_from_json
from engine.seats import Reply
from personas import quick

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
                "Everything written before the stop is kept in the record (marked interrupted), but your "
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


class GameScreen(Screen):
    CSS_PATH = Path(__file__).with_suffix(".tcss")
    AUTO_FOCUS = "#calendar"

    BINDINGS = [
        Binding("e", "end_turn", "End turn", id="end_turn", tooltip="send what is queued and end your turn (with nothing queued: pass)"),
        Binding("i", "compose", "Write", id="compose", tooltip="write a message in the composer (enter queues it)"),
        Binding("p", "quick('propose')", "Propose", id="propose", tooltip="propose the slot under the cursor (or the marked slots) to the other participants"),
        Binding("a", "quick('accept')", "Accept", id="accept", tooltip="accept the slot proposed to you"),
        Binding("d", "quick('decline')", "Decline", id="decline", tooltip="decline the slot proposed to you"),
        Binding("c", "quick('share_costs')", "Costs", id="share_costs", tooltip="tell others your cost for the marked slots (or the slots you were asked about)"),
        Binding("r", "quick('ask_costs')", "Ask", id="ask_costs", tooltip="ask the other participants for their cost per slot"),
        Binding("b", "open_batch", "Batch", id="open_batch", tooltip="go back to the batch builder (DECISION / VOLUNTARY)"),
        Binding("u", "unqueue", "Take back", show=False, id="unqueue", tooltip="take back the last queued message"),
        Binding("left_square_bracket", "cycle_thread(-1)", "Previous thread", show=False, id="thread_prev", tooltip="show the previous conversation thread"),
        Binding("right_square_bracket", "cycle_thread(1)", "Next thread", show=False, id="thread_next", tooltip="show the next conversation thread"),
        Binding("escape", "leave_composer", "Leave composer", show=False, id="leave_composer", tooltip="leave the composer, back to the calendar"),
    ]

    def __init__(self, *, seat: int, channels: tuple[str, ...], num_agents: int, num_rounds: int = 0,
                 blind: bool = False, participant_words: bool = False) -> None:
        super().__init__()
        # a study game: partners are "Agent N" only (no protocol, no model), the engine's
        # rejections are said in the participant's words (calbench_tui/wording.py)
        self.blind = blind
        self.participant_words = participant_words
        self.seat = seat
        self.channels = tuple(channels)
        self.num_agents = num_agents
        self.num_slots = 0
        self.num_rounds = num_rounds  # known up front (a resumed game replays rounds before registering)
        self.max_turns = 0
        self.round = -1
        self.meeting: dict[str, Any] | None = None
        self.meeting_view = None
        self.pending = None  # HumanRequest (speak) waiting for "end turn"
        self.batch_request = None  # HumanRequest (decide / volunteer) waiting for the builder
        self.outbox: list[ActionMessage] = []
        self._handwritten: set[int] = set()  # ids of outbox messages typed in the composer
        self.penalty = 0
        self.talk: list[int] = []  # the slots the latest message of this round was about
        self.proposal: tuple[int, list[int]] | None = None  # (from, slots) latest proposal to me
        self.proposal_kind: str | None = None  # its typed payload kind (sdmap "propose", dsm "proposals", ...)
        self.protocols: dict[int, str | None] = {}  # seat -> scripted protocol it speaks (from game_start)
        self.cost_request: tuple[int, list[int]] | None = None  # (from, slots) latest ask to me
        self.my_proposal: list[int] = []
        self.reported: dict[int, dict[int, int | None]] = {}  # costs other participants sent me this round
        self.last_writer: int | None = None
        self.game_over = False
        self.timed_out_round: int | None = None  # a study decision that ran out this round (see wording.py)
        self._ready = False
        self._backlog: list[tuple[Any, tuple]] = []  # calls that arrived before the screen was mounted

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
        if self.num_rounds:
            self.banner.update_state(rounds=self.num_rounds)
        self.query_one(ChatPanel).blind = self.blind
        self.query_one(ChatPanel).setup(self.seat, self.num_agents, self.channels)
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
        state = (self.pending is not None, self.proposal is not None, bool(self.outbox),
                 self.batch_request is not None and not self.batch_request.done)
        if state != getattr(self, "_binding_state", None):
            self._binding_state = state
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Every key stays live: pressed at the wrong moment it says why nothing happened
        # (a silent key reads as a frozen game).  The key bar shows only what is useful now.
        return True

    def key_visible(self, action: str, parameters: tuple[object, ...]) -> bool:
        """Whether the key bar lists this action now (the key itself always answers)."""
        if action == "end_turn":
            return self.pending is not None
        if action == "quick":
            if self.pending is None:
                return False
            if parameters and parameters[0] in ("propose", "ask_costs", "share_costs"):
                return True
            return self.proposal is not None
        if action == "open_batch":
            return self.batch_request is not None and not self.batch_request.done
        if action == "unqueue":
            return bool(self.outbox)
        return True

    def not_now(self, action: str, parameters: tuple[object, ...] = ()) -> str | None:
        """Why an action cannot run now, in words (None when it can)."""
        kind = parameters[0] if parameters else None
        if self.game_over:
            return "The game is over."
        if action == "end_turn" and self.pending is None:
            return "It is not your turn to talk: wait for YOUR TURN in the top line."
        if action == "quick":
            if self.pending is None:
                return ("It is not your turn to talk: quick actions are made on your turn "
                        "(you can still write with i; it is sent on your next turn).")
            if kind in ("accept", "decline") and self.proposal is None:
                return f"Nothing to {'accept' if kind == 'accept' else 'decline'}: nobody has proposed a slot to you this round."
        if action == "open_batch" and (self.batch_request is None or self.batch_request.done):
            return "There is no batch to build now: the batch builder opens by itself in DECISION."
        if action == "unqueue" and not self.outbox:
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
        self.num_rounds = briefing.num_rounds
        self.max_turns = briefing.max_turns_per_round
        self.num_slots = briefing.view.num_slots
        self.calendar.set_view(briefing.view)
        self.banner.update_state(rounds=self.num_rounds, budget=self.max_turns)
        self.query_one(MeetingCard).set_penalty(briefing.view.penalty)

    def on_speak(self, request) -> None:
        obs = request.obs
        self.pending = request
        self.penalty = obs.view.penalty
        self.num_slots = obs.view.num_slots
        self.calendar.set_view(obs.view)
        self.meeting_view = obs.meeting
        self.query_one(MeetingCard).set_meeting(obs.meeting, self.seat, obs.view.penalty)
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
        self.batch_request = request
        self.banner.update_state(round=request.obs.round, phase=request.obs.phase, speaker=None,
                                 note="build your batch")
        self.sync_bindings()

    # -- game events --------------------------------------------------------------------
    def on_game_event(self, ev: dict[str, Any]) -> None:
        t = ev["type"]
        seats = self.query_one(SeatsBar)
        agent = ev.get("agent_id")
        if t == "game_start":
            kinds = [short_kind(m, k) for m, k in zip(ev.get("agent_models") or [], ev.get("agent_types") or [])]
            seats.setup(kinds, self.seat, blind=self.blind)
            self.protocols = {a: protocol.protocol_of(m) for a, m in enumerate(ev.get("agent_models") or [])}
            self.num_slots = ev.get("num_slots") or self.num_slots
            return
        if t == "round_start":
            self._new_round(ev)
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
            self._message(ev)
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
            cal = ev.get("calendar_after")
            if isinstance(cal, list):
                self.calendar.set_calendar([item_from_json(it) for it in cal])
            self.penalty += ev.get("cost") or 0
            self.query_one(MeetingCard).set_penalty(self.penalty)
            self.chat.note(Text(f"Your batch was applied (cost {ev.get('cost') or 0}).", style="green"),
                           also_active=True)
            return
        if t == "batch_rejected" and agent == self.seat:
            why = ev.get("conflict_description")
            if self.participant_words:
                if self.timed_out_round == self.round:
                    return  # the timeout's own note said what happened (no move); no engine words
                from ..wording import participant_words

                why = participant_words(str(why))
            self.chat.note(Text(f"Your batch was rejected: {why}", style="red"))
            return
        if t == "batch_rolled_back" and agent == self.seat:
            self.chat.note(Text(f"Nothing was applied: {ev.get('reason')}", style="red"), also_active=True)
            return
        if t == "resolution":
            self._resolution(ev)
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
            self.game_over = True
            self.banner.update_state(phase="GAME_END", speaker=None, note="results are ready")
            seats.all("done")

    def _new_round(self, ev: dict[str, Any]) -> None:
        m = ev.get("meeting") or {}
        self.round = ev.get("round") or 0
        self.meeting = m
        self.meeting_view = None
        self.talk, self.proposal, self.cost_request, self.my_proposal = [], None, None, []
        self.proposal_kind = None
        self.reported = {}
        self.last_writer = None
        if self.outbox:
            self._carry_outbox()
        self.calendar.set_highlight([])
        self.calendar.marks.clear()
        parts = list(m.get("participants") or [])
        mine = self.seat in parts
        self.query_one(MeetingCard).set_meeting(m, self.seat, self.penalty)
        self.query_one(SeatsBar).all("waiting")
        self.banner.update_state(round=self.round, phase="CHEAP_TALK", sweep=0, speaker=None, note="")
        who = ", ".join("you" if p == self.seat else str(p) for p in parts)
        line = Text(f"── Round {self.round + 1}/{self.num_rounds or '?'}: meeting M{m.get('id')} with {who}. ",
                    style="bold")
        line.append("You are in it." if mine else "You are not in it; you speak only if someone writes to you.")
        self.chat.note(line, also_active=True)
        self._update_target()

    def _carry_outbox(self) -> None:
        """A new round: what the person wrote themselves stays queued for their next turn
        (they were told so); a quick action about the last meeting (a typed proposal, costs)
        would mislead the bots in the new round and is dropped, in words."""
        kept = [m for m in self.outbox if id(m) in self._handwritten]
        dropped = len(self.outbox) - len(kept)
        self.outbox[:] = kept
        self.chat.set_outbox(self._outbox_lines(), len(self.outbox))
        if kept:
            self.chat.note(Text(f"{len(kept)} message(s) you wrote are still queued: they are sent on your next "
                                "turn to talk (u takes the last one back).", style="bold"), also_active=True)
        if dropped:
            self.chat.note(f"{dropped} quick action(s) about the last meeting were dropped (not sent).",
                           also_active=True)

    def _message(self, ev: dict[str, Any]) -> None:
        self.chat.add_message(ev)
        slots = protocol.mentioned_slots(ev, self.num_slots or 10**6)
        frm = ev.get("from_agent")
        if frm != self.seat:
            if self.last_writer != frm:
                self.last_writer = frm
                self._update_target()
            kind = protocol.payload_kind(ev.get("payload"))
            if protocol.is_request_for_costs(ev):
                self.cost_request = (frm, slots)
                self.chat.note(Text(f"Agent {frm} asks for your costs: c answers for those slots "
                                    "(only what you choose to share leaves your calendar).", style="italic"))
                if kind == "proposals" and slots:  # a DSM offer: c scores them all, a / d answer one
                    self.proposal, self.proposal_kind = (frm, slots), kind
            elif slots and protocol.is_proposal(ev):
                self.proposal, self.proposal_kind = (frm, slots), kind
                if len(slots) == 1:
                    self.calendar.cursor = slots[0]
                    self.chat.note(Text(f"Agent {frm} proposes slot {slots[0]}: a accepts, d declines; in DECISION "
                                        "that slot is preselected.", style="italic"))
            elif slots and not self.proposal and len(slots) <= 3:
                self.proposal, self.proposal_kind = (frm, slots), kind
            costs = protocol.costs_in_payload(ev.get("payload"))
            if costs is not None:
                self.reported[frm] = costs
                self._suggest_from_costs()
        if slots and len(slots) <= 4:  # a proposal or an answer about a few slots, not a cost list
            self.talk = slots
        self.calendar.set_highlight(self.talk)
        self.sync_bindings()

    def _suggest_from_costs(self) -> None:
        """Once every other participant sent costs, point the cursor at the cheapest common slot."""
        mid, parts = self._meeting_now()
        others = [p for p in parts if p != self.seat]
        if not others or any(p not in self.reported for p in others) or not self.calendar.calendar:
            return
        from personas.base import insertion_costs

        mine = insertion_costs(self.calendar.calendar)
        best: tuple[int, int] | None = None
        for s, c in enumerate(mine):
            if c is None:
                continue
            total = c
            for p in others:
                rc = self.reported[p].get(s)
                if rc is None:
                    total = None
                    break
                total += rc
            if total is not None and (best is None or total < best[0]):
                best = (total, s)
        if best is None:
            self.chat.note(Text("From the costs you got, no slot works for everyone.", style="bold red"),
                           also_active=True)
            return
        self.calendar.cursor = best[1]
        self.chat.note(Text(f"Cheapest common slot from the costs you got: slot {best[1]} (total {best[0]}). "
                            "p proposes it (the cursor is on it).", style="bold"), also_active=True)

    def _resolution(self, ev: dict[str, Any]) -> None:
        cal = ev.get("my_calendar")
        if isinstance(cal, list):
            self.calendar.set_calendar([item_from_json(it) for it in cal])
        if ev.get("participant"):
            mid = ev.get("meeting_id")
            if ev.get("coordinated"):
                text = Text(f"✓ M{mid} is scheduled at slot {ev.get('my_slot')}.", style="bold green")
                if self.meeting and mid == self.meeting.get("id"):
                    self.calendar.participants[mid] = tuple(self.meeting.get("participants") or ())
            else:
                my_slot = ev.get("my_slot")
                where = f"your copy: slot {my_slot}" if my_slot is not None else "you have no copy"
                text = Text(f"✗ M{mid} was not coordinated ({where}).", style="bold red")
            self.query_one(MeetingCard).set_outcome(text.plain)
            self.chat.note(text, also_active=True)
        else:
            self.chat.note("Round over.")
        self.batch_request = None
        self.sync_bindings()

    # -- actions ------------------------------------------------------------------------
    def action_end_turn(self) -> None:
        if self._refuse("end_turn"):
            return
        req = self.pending
        if req is None:
            return
        msgs = tuple(self.outbox)
        self.outbox.clear()
        self.chat.set_outbox([])
        self.pending = None
        self.banner.update_state(speaker=None, note="")
        text = "\n".join(m.content for m in msgs) or None
        req.answer(Reply(actions=msgs, text=text))
        if not msgs:
            self.chat.note("You passed.")
        self.sync_bindings()

    def action_compose(self) -> None:
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
        if self.outbox:
            m = self.outbox.pop()
            self.chat.set_outbox(self._outbox_lines(), len(self.outbox))
            self.notify(f"Taken back: {m.content[:60]}")
            self.sync_bindings()

    def action_open_batch(self) -> None:
        if self._refuse("open_batch"):
            return
        if self.batch_request is not None and not self.batch_request.done:
            self.app.open_batch_builder(self.batch_request)

    def _audience(self) -> list[int]:
        """Whom a message from the feed goes to: the meeting's other participants, or — for a
        seat outside the meeting — the last one who wrote to it this round."""
        mid, parts = self._meeting_now()
        if self.seat in parts:
            return [p for p in parts if p != self.seat]
        if self.last_writer is not None:
            return [self.last_writer]
        return [p for p in parts if p != self.seat]

    def _update_target(self) -> None:
        who = self._audience()
        if "dm" not in self.channels:
            ch = "participant_groupchat" if "participant_groupchat" in self.channels else "all_groupchat"
            text = "the participant chat" if ch == "participant_groupchat" else "the all-agent chat (everyone)"
        elif not who:
            text = "nobody yet"
        else:
            text = ("Agent " if len(who) == 1 else "Agents ") + ", ".join(map(str, who)) + " (DM)"
        self.chat.set_default_target(text)

    def on_chat_panel_send(self, event: ChatPanel.Send) -> None:
        th = event.thread
        if th.channel is None:
            ch, to = self._route(self._audience())
            if ch == "dm" and not to:
                self.notify("Nobody to write to yet: pick a thread with [ or ].", severity="warning")
                return
            msgs = [ActionMessage("dm", event.text, t) for t in to] if ch == "dm" else [ActionMessage(ch, event.text)]
        else:
            msgs = [ActionMessage(th.channel, event.text, th.to if th.channel == "dm" else None)]
        self._handwritten.update(id(m) for m in msgs)
        self._queue(msgs)

    def _queue(self, msgs: list[ActionMessage]) -> None:
        if not msgs:
            return
        self.outbox.extend(msgs)
        self.chat.set_outbox(self._outbox_lines(), len(self.outbox))
        if self.pending is None:
            self.notify("Queued: it is sent on your next turn to talk (in a later round if this round's "
                        "talk is over). u takes it back.", timeout=5)
        self.sync_bindings()

    def _outbox_lines(self) -> list[str]:
        """One line per queued text; the same words by DM to several seats read as one line."""
        groups: dict[tuple[str, str], list[int | None]] = {}
        for m in self.outbox:
            groups.setdefault((m.type, m.content), []).append(m.to)
        out = []
        for (kind, content), tos in groups.items():
            if kind == "dm":
                to = ("Agent " if len(tos) == 1 else "Agents ") + ", ".join(map(str, tos)) + " (DM)"
            else:
                to = CHANNEL_NAME.get(kind, kind)
            out.append(f"→ {to}: {content}")
        return out

    # quick actions ----------------------------------------------------------------------
    def _meeting_now(self):
        if self.meeting_view is not None:
            return self.meeting_view.id, list(self.meeting_view.participants)
        if self.meeting:
            return self.meeting.get("id"), list(self.meeting.get("participants") or [])
        return None, []

    def _route(self, default_to: list[int]) -> tuple[str, list[int]]:
        """Channel and recipients for a quick action.

        The open groupchat thread if one is open; else DMs to the action's natural
        audience (the other participants, or the one who asked / proposed); else the
        first groupchat the game enables.
        """
        th = self.chat.thread()
        if th.channel in ("participant_groupchat", "all_groupchat"):
            return th.channel, []
        if "dm" in self.channels:
            return "dm", default_to
        ch = "participant_groupchat" if "participant_groupchat" in self.channels else self.channels[0]
        return ch, []

    def action_quick(self, kind: str) -> None:
        if self._refuse("quick", (kind,)):
            return
        mid, parts = self._meeting_now()
        if mid is None:
            self.notify("No meeting is being negotiated right now.", severity="warning")
            return
        others = [p for p in parts if p != self.seat] or [a for a in range(self.num_agents) if a != self.seat]
        cal = self.calendar.calendar
        msgs: list[ActionMessage] = []
        from personas.base import insertion_costs

        costs = insertion_costs(cal) if cal else []
        initiator = bool(parts) and self.seat == min(parts)

        def typed(builder, ch: str, to: list[int], *args, **kw) -> list[ActionMessage]:
            """One message per DM recipient in its own protocol; a groupchat line typed only
            when everyone it is meant for speaks the same protocol."""
            if ch == "dm":
                return [m for t in to for m in builder(self.seat, mid, *args, channel=ch, to=[t],
                                                       protocol=self.protocols.get(t), **kw)]
            protos = {self.protocols.get(p) for p in others}
            proto = protos.pop() if len(protos) == 1 else None
            return builder(self.seat, mid, *args, channel=ch, to=to, protocol=proto, **kw)

        if kind == "ask_costs":
            feasible = [s for s, c in enumerate(costs) if c is not None]
            ch, to = self._route(others)
            msgs = typed(quick.ask_costs, ch, to, feasible, initiator=initiator)
        elif kind == "share_costs":
            if self.calendar.marks:
                slots = sorted(self.calendar.marks)
            elif self.cost_request:
                slots = self.cost_request[1] or list(range(len(cal)))
            else:
                slots = list(range(len(cal)))
            asker = [self.cost_request[0]] if self.cost_request else others
            ch, to = self._route(asker)
            if not self.calendar.marks and not self.cost_request and not self._armed("share_costs"):
                whom = "everyone in the chat" if ch != "dm" else ("Agent " if len(to) == 1 else "Agents ") + \
                    ", ".join(map(str, to))
                self.notify(f"Nobody asked: this would send your cost for all {len(slots)} slots to {whom}. "
                            "Press c again to send it, or mark slots with space first.", severity="warning",
                            timeout=8)
                return
            msgs = typed(quick.share_costs, ch, to, {s: costs[s] for s in slots if 0 <= s < len(costs)})
        elif kind == "propose":
            slots = self.calendar.selected_slots()
            blocked = [s for s in slots if 0 <= s < len(costs) and costs[s] is None]
            if blocked:
                self.notify(f"You can't hold {protocol.slots_phrase(blocked)}: it is taken on your calendar by "
                            "something that cannot move. Pick a free slot or an errand you can move.",
                            severity="warning")
                return
            ch, to = self._route(others)
            msgs = typed(quick.propose, ch, to, slots, initiator=initiator)
            self.my_proposal = slots
            self.talk = slots
            self.calendar.set_highlight(slots)
        elif kind in ("accept", "decline"):
            if self.proposal:
                frm, slots = self.proposal
                slot = slots[0] if len(slots) == 1 else (self.calendar.cursor if self.calendar.cursor in slots
                                                         else slots[0])
                to_default = [frm]
            else:
                slot = self.calendar.cursor
                to_default = others
            answering = self.proposal_kind if self.proposal else None
            if initiator and kind == "accept":
                to_default = others  # my confirm / decision goes to every participant
            ch, to = self._route(to_default)
            if kind == "accept":
                msgs = typed(quick.accept, ch, to, slot, answering=answering, initiator=initiator,
                             my_cost=costs[slot] if slot is not None and 0 <= slot < len(costs) else None)
            else:
                msgs = typed(quick.decline, ch, to, slot, answering=answering, initiator=initiator)
            if kind == "accept":
                self.talk = [slot]
                self.calendar.set_highlight([slot])
        self.calendar.marks.clear()
        self.calendar.refresh()
        self._arm = None
        self._queue(msgs)

    def _armed(self, what: str) -> bool:
        """True on the second press of a key that asked for confirmation; else arm it."""
        if getattr(self, "_arm", None) == what:
            self._arm = None
            return True
        self._arm = what
        return False
