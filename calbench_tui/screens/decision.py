"""The batch builder screen: DECISION (place the meeting) and VOLUNTARY (move your own items).

DECISION: pick the slot (``enter``); whatever sits there must move and the cheapest
destination is suggested; ``m`` moves another item, ``←``/``→`` change a move's
destination, ``x`` undoes it.  Every edit is checked with the engine's own validator
(``engine.rules.check_batch``) and its plain-word message is shown; the cost preview
follows.  ``s`` submits.  A batch the engine rejected comes back with the conflict and
the retries left.

VOLUNTARY (contacted as a non-participant): the same builder without a meeting slot;
``n`` does nothing.

"Valid" only means the engine accepts the batch on this seat's own calendar.  A batch can
be valid and still defeat the table, so the panel also warns in words (and ``s`` asks for
a second press) when the meeting goes to a slot nobody talked about, or when a move takes
an already scheduled meeting out of its slot — which breaks it for its other participants.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Static

from engine.rules import BatchOutcome
from engine.seats import Reply

from ..widgets.keybar import KeyBar
from ..widgets.batch import BatchBuilder, BatchPlan
from ..widgets.calendar import movable
from engine.model import MeetingCopy


def agents_words(seats: list[int]) -> str:
    """[0] → "Agent 0"; [0, 1, 2] → "Agents 0, 1 and 2"."""
    if len(seats) == 1:
        return f"Agent {seats[0]}"
    return "Agents " + ", ".join(map(str, seats[:-1])) + f" and {seats[-1]}"


def batch_warnings(plan: BatchPlan, *, talk: list[int], seat: int,
                   participants: dict[int, tuple[int, ...]], decision: bool,
                   apart: Iterable[int] = ()) -> list[str]:
    """What a valid batch may still get wrong for the table, in plain words.  ``apart``: my
    meetings that ended apart (not coordinated) — moving my copy of one breaks nothing, and
    where the others' copies are is not mine to know (SPEC §5)."""
    apart = set(apart)
    out: list[str] = []
    if decision and plan.target is not None and talk and plan.target not in talk:
        said = ", ".join(map(str, talk))
        out.append(f"The talk was about slot{'s' if len(talk) > 1 else ''} {said}, but you place M{plan.meeting_id} "
                   f"at slot {plan.target}. The meeting counts only if every participant puts it in the same "
                   "slot.")
    for f, t in plan.moves.items():
        item = plan.calendar[f]
        if isinstance(item, MeetingCopy) and item.meeting_id in apart:
            out.append(f"M{item.meeting_id} was not coordinated: moving your copy from slot {f} to slot {t} "
                       f"costs {item.cost} and does not make it count unless every participant's copy ends in "
                       "one slot.")
        elif isinstance(item, MeetingCopy):
            others = [p for p in participants.get(item.meeting_id, ()) if p != seat]
            who = agents_words(others) if others else "its other participants"
            out.append(f"Moving M{item.meeting_id} from slot {f} to slot {t} breaks it: {who} keep "
                       f"{'their copies' if len(others) != 1 else 'their copy'} at slot {f}, so M{item.meeting_id} "
                       "stops counting (for them too) unless they move it as well.")
    return out


class DecisionScreen(Screen):
    """Renders one DECISION / VOLUNTARY request; the person's batch goes up as an
    :class:`Answered` message, and the app answers the engine's request with it and takes
    the screen down (a screen never answers the engine itself)."""

    class Answered(Message):
        def __init__(self, screen: "DecisionScreen", request: Any, reply: Reply) -> None:
            super().__init__()
            self.screen = screen
            self.request = request  # the engine's request it answers (personas.human.HumanRequest)
            self.reply = reply

    CSS_PATH = Path(__file__).with_suffix(".tcss")
    AUTO_FOCUS = "BatchBuilder"

    BINDINGS = [
        Binding("enter", "meet_here", "Meet here", id="meet_here", tooltip="place the meeting at the slot under the cursor"),
        Binding("m", "move", "Move item", id="move", tooltip="move the item under the cursor (to the nearest free slot)"),
        Binding("left", "dest(-1)", "◂ destination", id="dest_prev", tooltip="move the item to the previous free slot"),
        Binding("right", "dest(1)", "destination ▸", id="dest_next", tooltip="move the item to the next free slot"),
        Binding("x", "unmove", "Undo move", id="unmove", tooltip="undo the move under the cursor"),
        Binding("s", "submit", "Submit", id="submit", tooltip="submit the batch (the engine checks it)"),
        Binding("n", "nothing", "Do nothing", id="nothing", tooltip="VOLUNTARY: move nothing"),
        Binding("t", "back_to_talk", "Talk", id="back_to_talk", tooltip="look at the conversation (b comes back)"),
    ]

    def __init__(self, request, *, suggested: int | None = None, talk: list[int] | None = None,
                 apart: Iterable[int] = ()) -> None:
        super().__init__()
        self.request = request
        self.apart = set(apart)  # my meetings that ended apart (personas.seat_model.SeatModel.apart)
        obs = request.obs
        self.obs = obs
        self.decision = request.kind == "decide"
        self.plan = BatchPlan(obs.view.calendar, meeting_id=obs.meeting.id, meeting_cost=obs.meeting.cost,
                              require_schedule=self.decision)
        self.talk = list(talk or [])
        self.armed_invalid = False
        self.armed_warning = False
        self.warnings: list[str] = []
        if self.decision and suggested is not None and 0 <= suggested < self.plan.num_slots:
            self.plan.set_target(suggested)

    def compose(self) -> ComposeResult:
        obs = self.obs
        seat = obs.view.seat
        m = obs.meeting
        who = ", ".join("you" if p == seat else str(p) for p in m.participants)
        head = Text(no_wrap=True, overflow="ellipsis")
        if self.decision:
            head.append("DECISION", style="bold")
            head.append(f" · M{m.id} with {who} · round {obs.round + 1} · attempt {obs.attempt + 1}/"
                        f"{obs.max_attempts + 1}")
        else:
            head.append("VOLUNTARY", style="bold")
            head.append(f" · you were contacted about M{m.id}; you may move your own items (or do nothing)")
        yield Static(head, id="dbanner")
        if obs.rejection:
            left = obs.max_attempts - obs.attempt
            yield Static(Text(f"Rejected: {self._words(obs.rejection)} — "
                              f"{left} retr{'y' if left == 1 else 'ies'} left.", style="bold red"), id="rejection")
        with Horizontal(id="dbody"):
            with VerticalScroll(id="dleft"):
                yield BatchBuilder(self.plan, seat=seat, labels=obs.view.labels,
                                   participants=obs.view.prior_meetings, highlight=self.talk)
            with Vertical(id="dright"):
                yield Static(id="under-cursor")
                yield Static(id="plan")
                yield Static(id="check")
                yield Static(id="cost")
                yield Static(id="talk")
        yield KeyBar()

    def on_mount(self) -> None:
        self.update_panel()
        self.builder.detail = self.query_one("#under-cursor", Static)
        self.builder.detail.update(self.builder.slot_words())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return True  # every key answers; a key of no use now says why (see key_visible)

    def key_visible(self, action: str, parameters: tuple[object, ...]) -> bool:
        if action == "meet_here":
            return self.decision
        if action == "nothing":
            return not self.decision
        if action in ("dest", "unmove"):
            return bool(self.plan.moves)
        return True

    # -- panel --------------------------------------------------------------------------
    def update_panel(self) -> None:
        plan = self.plan
        lines = Text()
        for i, line in enumerate(plan.describe()):
            lines.append(("" if i == 0 else "\n") + line)
        self.query_one("#plan", Static).update(lines)
        out = plan.check()
        self.warnings = batch_warnings(plan, talk=self.talk, seat=self.obs.view.seat,
                                       participants=dict(self.obs.view.prior_meetings), decision=self.decision,
                                       apart=self.apart)
        if isinstance(out, BatchOutcome) and not self.warnings:
            ok = Text("✓ valid: the engine would accept this batch", style="bold green")
        elif isinstance(out, BatchOutcome):
            ok = Text("✓ valid for your calendar, but:", style="bold green")
            for w in self.warnings:
                ok.append("\n⚠ " + w, style="bold yellow")
        else:
            ok = Text(f"✗ {self._words(out.message)}", style="bold red")
        self.query_one("#check", Static).update(ok)
        total = self.obs.view.penalty + plan.cost()
        self.query_one("#cost", Static).update(
            Text(f"Batch cost: {plan.cost()}\nYour total: {self.obs.view.penalty} → {total}", style="bold"))
        talk = ""
        if self.talk:
            talk = "Talked about: " + ", ".join(f"slot {s}" for s in self.talk)
        msgs = getattr(self.obs, "round_messages", ()) or ()
        if msgs:
            last = msgs[-1]
            talk += ("\n" if talk else "") + f"Last message (Agent {last.sender}): {last.content}"
        self.query_one("#talk", Static).update(Text(talk, style="italic"))
        self.armed_invalid = False
        self.armed_warning = False
        if bool(self.plan.moves) != getattr(self, "_had_moves", None):
            self._had_moves = bool(self.plan.moves)
            self.refresh_bindings()

    @property
    def builder(self) -> BatchBuilder:
        return self.query_one(BatchBuilder)

    def on_batch_builder_changed(self, _msg) -> None:
        self.update_panel()


    # -- actions ------------------------------------------------------------------------
    def _edited(self) -> None:
        self.builder.changed()

    def action_meet_here(self) -> None:
        if not self.decision:
            self.notify("VOLUNTARY has no meeting to place: move your own items (m) or do nothing (n).",
                        severity="warning")
            return
        self.plan.set_target(self.builder.cursor)
        self._edited()

    def action_move(self) -> None:
        s = self.builder.cursor
        if not self.plan.add_move(s):
            item = self.plan.calendar[s]
            if item is None:
                why = "it is free"
            elif not movable(item):
                why = "it is blocked"
            else:
                why = "there is no free slot to move it to"
            self.notify(f"Slot {s} cannot be moved: {why}.", severity="warning")
            return
        self._edited()

    def action_dest(self, delta: int) -> None:
        if not self.plan.moves:
            self.notify("No move to change: m moves the item under the cursor first.", severity="warning")
            return
        s = self.builder.cursor
        if s not in self.plan.moves:
            src = next((f for f, t in self.plan.moves.items() if t == s), None)
            if src is None:
                self.notify("Put the cursor on a move (its slot or its destination) to change where it goes.",
                            severity="warning")
                return
            s = src
        self.plan.cycle_destination(s, delta)
        self._edited()

    def action_unmove(self) -> None:
        if not self.plan.moves:
            self.notify("No move to undo.", severity="warning")
            return
        s = self.builder.cursor
        if not self.plan.remove_move(s):
            src = next((f for f, t in self.plan.moves.items() if t == s), None)
            if src is not None:
                self.plan.remove_move(src)
        self._edited()

    def _words(self, message: str) -> str:
        """The engine's message, or in a study the participant's words for it (calbench_tui/wording.py)."""
        from ..wording import participant_words, play_words

        if getattr(self.app, "participant_words", False):
            return participant_words(str(message))
        return play_words(str(message))

    def action_submit(self) -> None:
        out = self.plan.check()
        if not isinstance(out, BatchOutcome) and not self.armed_invalid:
            self.armed_invalid = True
            self.notify(f"Not valid: {self._words(out.message)}. Press s again to submit anyway "
                        f"(the engine will reject it).", severity="warning", timeout=6)
            return
        if isinstance(out, BatchOutcome) and self.warnings and not self.armed_warning:
            self.armed_warning = True
            self.notify("⚠ " + " ".join(self.warnings) + " Press s again to submit anyway.",
                        severity="warning", timeout=10)
            return
        self._answer(Reply(actions=tuple(self.plan.actions()), text=" · ".join(self.plan.describe())))

    def draft(self) -> tuple | None:
        """The batch on screen if the engine would accept it (a study submits it when time runs out)."""
        return tuple(self.plan.actions()) if isinstance(self.plan.check(), BatchOutcome) else None

    def action_nothing(self) -> None:
        if self.decision:
            self.notify("In DECISION you must place the meeting: pick a slot (enter) and submit (s). "
                        "n (do nothing) is for VOLUNTARY only.", severity="warning", timeout=6)
            return
        self._answer(Reply(actions=(), text="no moves"))

    def action_back_to_talk(self) -> None:
        self.notify("Your batch is still open: press b to return to it.", timeout=4)
        self.dismiss()

    def _answer(self, reply: Reply) -> None:
        self.post_message(self.Answered(self, self.request, reply))
