"""Replay: step through a saved game, event by event (``calbench replay``; ``v`` on the end screen).

Everything shown is *folded* from the trace — ``engine.trace.fold_trace`` for the
calendars and ``engine.privacy.belief_updates`` for the beliefs — and no persona is ever
called.  Our traces and the paper authors' (their event types, no task row) both work.

Layout: a status line (the verification badge, where we are, autoplay), the timeline on
the left (grouped by round and phase), and four views on the right:

* **Calendars** — every calendar side by side as it was after the current event, the
  move of the current event marked (omniscient: replay happens after the game);
* **Seat** — one seat's view at that moment: its calendar (with its own labels), its
  inbox this round, the prompt it was last sent, its raw reply and thinking;
* **Messages** — every message so far, with the VPS each one caused;
* **Beliefs** — the belief updates of the current event (per observer and target) and
  the VPS so far, per observer × target this round and per target in the game.

Keys: ``→``/``←`` one event, ``]``/``[`` one round, ``home``/``end``, ``space`` autoplay,
``+``/``-`` speed, ``c``/``s``/``m``/``b`` views, ``0``–``9`` choose the seat,
``escape``/``q`` close, ``?`` one screen on how to read the replay.  Rounds are numbered
from 1 as in the game ("Round 1/5"); the trace's own 0-based numbers stay in the files.
:class:`ReplayModel` is the screen's pure part (no Textual state), so it can be reused and
tested on its own.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import OptionList, Static, TabbedContent, TabPane
from textual.widgets.option_list import Option

from engine import protocols
from engine.channels import channel_label
from engine.events import MESSAGE_EVENTS
from engine.model import Errand, MeetingCopy

from ..widgets.calendar import CalendarView
from ..widgets.keybar import KeyBar

MESSAGE_TYPES = MESSAGE_EVENTS  # (declared once, in engine.events)
REPLY_TYPES = ("turn_end", "decide_end")
PROMPT_TYPES = ("turn_start", "decide_start")
SPEEDS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)  # events per second
DEFAULT_SPEED = 3  # 4 events/s
MAX_MESSAGES_SHOWN = 300


def _short(text: Any, n: int = 70) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= n else s[: n - 1] + "…"


def fmt_actions(actions: Any) -> str:
    """Tool calls / batch actions in a few words: 'move #3 5→12, M2@5'."""
    if not isinstance(actions, list) or not actions:
        return "nothing"
    parts = []
    for a in actions:
        if not isinstance(a, dict):
            continue
        t = a.get("type")
        if t == "schedule":
            parts.append(f"M{a.get('meeting_id')}@{a.get('slot')}")
        elif t == "reschedule":
            parts.append(f"move #{a.get('item_id')} {a.get('from_slot')}→{a.get('to_slot')}")
        elif t == "dm":
            parts.append(f"dm→{a.get('to')}")
        elif t in ("participant_groupchat", "all_groupchat"):
            parts.append(channel_label(t))
        else:
            parts.append(str(t))
    return ", ".join(parts) or "nothing"


def _payload_kind(d: dict[str, Any]) -> str | None:
    p = d.get("payload")
    if isinstance(p, dict) and p.get("kind"):
        return f"{p.get('protocol', '')}:{p['kind']}".lstrip(":")
    c = d.get("content")
    if isinstance(c, str) and c.startswith("{"):
        try:
            j = json.loads(c)
        except ValueError:
            return None
        if isinstance(j, dict):
            for key, _proto in protocols.author_keys():
                if isinstance(j.get(key), str):
                    return f"{key}:{j[key]}"
    return None


def readers_of(d: dict[str, Any], num_agents: int) -> list[int]:
    """Who received a message event."""
    if d.get("channel", "dm") == "dm" or d.get("recipients") is None:
        to = d.get("to_agent")
        return [to] if isinstance(to, int) else []
    return [int(x) for x in d.get("recipients") or [] if isinstance(x, int)]


# ---------------------------------------------------------------------------------------
# The pure model
# ---------------------------------------------------------------------------------------
class ReplayModel:
    """A trace folded once; answers "what was true after event i" for the views."""

    def __init__(self, trace: dict[str, Any]) -> None:
        from engine.privacy import belief_updates, tally
        from engine.trace import fold_trace

        from engine.trace import task_for_trace

        self.trace = trace
        self.events: list[dict[str, Any]] = [e for e in trace.get("events") or [] if isinstance(e, dict)]
        self.seqs = [e["seq"] if isinstance(e.get("seq"), int) else i for i, e in enumerate(self.events)]
        self.fold = fold_trace(trace)  # TraceError when there is nothing to fold over
        self.task = task_for_trace(trace)
        self.num_agents = len(self.fold.initial_calendars)
        self.num_slots = len(self.fold.initial_calendars[0]) if self.num_agents else 0
        try:
            self.beliefs = belief_updates(self.task, self.events) if self.task is not None else []
        except Exception:  # an unreadable message must not stop the replay
            self.beliefs = []
        self.beliefs_by_seq: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for u in self.beliefs:
            self.beliefs_by_seq[u["seq"]].append(u)
        self.delta_vps = tally(self.beliefs, self.num_agents).by_seq
        # the meeting of every round: the one fold's (round_start's, else the task's)
        self.meetings: dict[int, dict[str, Any]] = dict(self.fold.fold.meetings)
        if self.task is not None:
            for r, m in enumerate(self.task.meetings):
                self.meetings.setdefault(r, m.to_json())
        # where each round starts in the timeline, and each event's round (navigation)
        self.round_starts: list[int] = []
        self.round_of: list[int | None] = []
        for i, ev in enumerate(self.events):
            r = (ev.get("data") or {}).get("round")
            self.round_of.append(r if isinstance(r, int) else None)
            if ev.get("type") == "round_start" and isinstance(r, int):
                self.round_starts.append(i)
        self.participants = {m.get("id"): tuple(m.get("participants") or ()) for m in self.meetings.values()}
        self.round_match = {r["seq"]: r["matches"] for r in self.fold.rounds}
        self.agents = self._agents()

    # -- identity -------------------------------------------------------------------------
    def _agents(self) -> list[str]:
        cfg = self.trace.get("config") or {}
        agents = cfg.get("agents") or []
        out = []
        for a in range(self.num_agents):
            spec = agents[a] if a < len(agents) and isinstance(agents[a], dict) else {}
            out.append(str(spec.get("model") or spec.get("type") or "?"))
        return out

    def who(self, a: Any) -> str:
        if isinstance(a, int) and 0 <= a < len(self.agents):
            return f"Agent {a} ({self.agents[a]})"
        return f"Agent {a}"

    # -- verification ---------------------------------------------------------------------
    @property
    def verified(self) -> bool:
        """Every check passed and no round differs from its record (a round can differ only in
        its recorded state hash, which fold_trace marks on the round without a problem line)."""
        return self.fold.verified and self.first_mismatch() is None

    def first_mismatch(self) -> dict[str, Any] | None:
        """The first round whose folded state differs from the record (None if none)."""
        return next((r for r in self.fold.rounds if r["matches"] is False), None)

    def badge(self) -> Text:
        f = self.fold
        who = "the paper authors' harness" if f.source == "authors" else "CalBench"
        if self.verified and not f.rounds:
            return Text.assemble(("– nothing to verify", "bold yellow"),
                                 f": the trace has no finished round ({who} trace)")
        if self.verified:
            n = len(f.rounds)
            return Text.assemble(("✓ verified", "bold green"),
                                 f": all {n} round{'s' if n != 1 else ''} match the recorded state ({who} trace)")
        bad = self.first_mismatch()
        t = Text()
        if bad is not None:
            t.append(f"✗ stops matching at round {_rn(bad['round'])} (event {bad['seq']})", style="bold red")
        else:
            t.append("✗ does not verify", style="bold red")
        if bad is not None and not f.problems:
            t.append(": its recorded state hash differs from the folded calendars' hash")
        if f.problems:
            t.append(f": {_short(f.problems[0], 110)}")
            if len(f.problems) > 1:
                t.append(f" (+{len(f.problems) - 1} more)", style="dim")
        return t

    # -- per event ------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.events)

    def phase_key(self, i: int) -> tuple[Any, str]:
        d = self.events[i].get("data") or {}
        return self.round_of[i], str(d.get("phase") or "")

    def header(self, i: int) -> str:
        r, phase = self.phase_key(i)
        if r is None or r < 0:
            return "── Setup ──"
        m = self.meetings.get(r)
        if m is None:
            return f"── End · {phase} ──" if self.events[i].get("type") == "game_end" else f"── Round {_rn(r)} · {phase} ──"
        parts = ", ".join(str(p) for p in m.get("participants") or [])
        return f"── Round {_rn(r)} · M{m.get('id')} with {parts} · {phase} ──"

    def describe(self, i: int) -> Text:
        """One line for the timeline."""
        ev = self.events[i]
        t = ev.get("type")
        d = ev.get("data") or {}
        a = d.get("agent_id")
        seq = self.seqs[i]
        line = Text(f"{seq:>4} ", style="dim", no_wrap=True, overflow="ellipsis")
        if t == "game_start":
            line.append(f"game starts: {d.get('num_agents', self.num_agents)} agents, "
                        f"{d.get('num_slots', self.num_slots)} slots, optimal cost {d.get('optimal_cost', '?')}")
        elif t == "agent_registered":
            line.append(f"{self.who(a)} registered")
        elif t == "round_start":
            m = d.get("meeting") or {}
            order = d.get("speaker_order") or m.get("speaker_order") or []
            line.append(f"round {_rn(d.get('round'))}: M{m.get('id')} with {_seats(m.get('participants'))}, "
                        f"speaking order {_seats(order)}", style="bold")
        elif t == "turn_start":
            n = len(d.get("inbox_drained") or [])
            line.append(f"A{a} turn {_rn(d.get('turn'))}" + (f" · {n} in inbox" if n else ""))
        elif t == "turn_end":
            calls = d.get("tool_calls") or []
            line.append(f"A{a} → " + (fmt_actions(calls) if calls else "passes"), style="" if calls else "dim")
        elif t in MESSAGE_TYPES:
            to = channel_label(t) if t != "dm_sent" else str(d.get("to_agent"))
            kind = _payload_kind(d)
            line.append(f"A{d.get('from_agent', a)}→{to} ", style="bold cyan")
            if kind:
                line.append(f"[{kind}] ", style="magenta")
            line.append(_short(d.get("content"), 60))
            dv = self.delta_vps.get(seq)
            if dv:
                line.append(f"  VPS {dv:+.2f}", style="yellow")
        elif t == "decide_start":
            what = "may volunteer moves" if d.get("phase") == "VOLUNTARY" else "decides"
            line.append(f"A{a} {what}")
        elif t == "decide_end":
            line.append(f"A{a}: {fmt_actions(d.get('tool_calls'))}" + (f" ({d['status']})" if d.get("status") else ""))
        elif t == "batch_applied":
            line.append(f"✓ A{a} applies {fmt_actions(d.get('actions'))}", style="green")
        elif t == "batch_rejected":
            line.append(f"✗ A{a} rejected: {_short(d.get('conflict_description'), 50)}", style="red")
        elif t == "batch_rolled_back":
            line.append(f"↺ A{a} rolled back", style="yellow")
        elif t == "resolution":
            slots = d.get("per_agent_slot") or {}
            if d.get("coordinated"):
                s = next(iter(slots.values()), None)
                line.append(f"M{d.get('meeting_id')} scheduled at slot {s}", style="bold green")
            else:
                line.append(f"M{d.get('meeting_id')} failed: {_copies(slots)}", style="bold red")
            ok = self.round_match.get(seq)
            if ok is True:
                line.append("  · replay matches the record", style="dim")
            elif ok is False:
                line.append("  ✗ differs from the record", style="bold red")
        elif t == "meeting_broken":
            line.append(f"M{d.get('meeting_id')} broken", style="red")
        elif t == "round_restarted":
            line.append(f"round {_rn(d.get('round'))} starts again after a stop: events {d.get('from_seq')}–"
                        f"{d.get('to_seq')} ({d.get('messages', 0)} messages) kept apart as interrupted",
                        style="bold yellow")
        elif t == "parse_error":
            line.append(f"A{a} parse error: {_short(d.get('detail') or d.get('error'), 50)}", style="red")
        elif t == "game_end":
            line.append(f"game over: {d.get('meetings_scheduled', '?')} meetings scheduled", style="bold")
        else:
            line.append(f"{t}" + (f" A{a}" if isinstance(a, int) else ""))
        return line

    def calendars_at(self, i: int):
        return self.fold.calendars_at(self.seqs[i]) if i >= 0 else self.fold.initial_calendars

    def marks(self, i: int) -> dict[tuple[int, int], str]:
        """(agent, slot) -> a short mark for the current event."""
        ev = self.events[i]
        d = ev.get("data") or {}
        t = ev.get("type")
        out: dict[tuple[int, int], str] = {}
        if t == "batch_applied" and isinstance(d.get("agent_id"), int):
            a = d["agent_id"]
            for act in d.get("actions") or []:
                if not isinstance(act, dict):
                    continue
                if act.get("type") == "reschedule":
                    out[(a, act.get("to_slot"))] = f"←{act.get('from_slot')}"
                    out.setdefault((a, act.get("from_slot")), f"→{act.get('to_slot')}")
                elif act.get("type") == "schedule":
                    out[(a, act.get("slot"))] = "★"
        elif t == "resolution":
            ok = "✓" if d.get("coordinated") else "✗"
            for k, s in (d.get("per_agent_slot") or {}).items():
                if str(k).isdigit() and isinstance(s, int):
                    out[(int(k), s)] = ok
        for u in self.beliefs_by_seq.get(self.seqs[i], ()):
            out.setdefault((u["target"], u["slot"]), "?")
        return out

    def active_agents(self, i: int) -> set[int]:
        d = self.events[i].get("data") or {}
        out = set()
        if isinstance(d.get("agent_id"), int):
            out.add(d["agent_id"])
        if self.events[i].get("type") in MESSAGE_TYPES:
            out |= set(readers_of(d, self.num_agents))
        return out

    def messages_upto(self, i: int) -> list[int]:
        return [k for k in range(i + 1) if self.events[k].get("type") in MESSAGE_TYPES]

    def inbox(self, seat: int, i: int) -> list[int]:
        """Messages delivered to ``seat`` in the current round, up to event i."""
        r = self.round_of[i]
        return [k for k in self.messages_upto(i)
                if self.round_of[k] == r and seat in readers_of(self.events[k].get("data") or {}, self.num_agents)]

    def last_of(self, seat: int, i: int, types: tuple[str, ...]) -> int | None:
        for k in range(i, -1, -1):
            ev = self.events[k]
            if ev.get("type") in types and (ev.get("data") or {}).get("agent_id") == seat:
                return k
        return None

    def registration(self, seat: int) -> dict[str, Any] | None:
        for ev in self.events:
            d = ev.get("data") or {}
            if ev.get("type") == "agent_registered" and d.get("agent_id") == seat:
                return d
        return None

    def vps_so_far(self, i: int) -> tuple[dict[tuple[int, int], float], list[float]]:
        """(this round: (observer, target) -> VPS, the game: per target) after event i."""
        from engine.privacy import tally

        r = self.round_of[i]
        t = tally(self.beliefs, self.num_agents, upto_seq=self.seqs[i])
        return {(o, tt): v for (rr, o, tt), v in t.per_round_pair.items() if rr == r}, t.per_target

    def round_index_before(self, i: int) -> int:
        """The event index of the previous round start (``[``)."""
        starts = [k for k in self.round_starts if k < i]
        return starts[-1] if starts else 0

    def round_index_after(self, i: int) -> int:
        starts = [k for k in self.round_starts if k > i]
        return starts[0] if starts else len(self.events) - 1


# ---------------------------------------------------------------------------------------
# Renderers
# ---------------------------------------------------------------------------------------
def _cell(item) -> Text:
    if item is None:
        return Text("·", style="dim")
    if isinstance(item, MeetingCopy):
        return Text(f"M{item.meeting_id}", style="bold cyan")
    if isinstance(item, Errand):
        return Text(f"{'B' if item.blocked else 'E'}{item.errand_id}:{item.cost}", style="red" if item.blocked else "")
    return Text(str(item))


def calendars_table(model: ReplayModel, i: int, seat: int | None) -> Text:
    """All calendars side by side after event i (a plain text grid: fast to redraw per step)."""
    cals = model.calendars_at(i)
    marks = model.marks(i)
    active = model.active_agents(i)
    r = model.round_of[i]
    parts = set((model.meetings.get(r) or {}).get("participants") or []) if isinstance(r, int) else set()
    cells: list[list[Text]] = []
    for s in range(model.num_slots):
        row = []
        for a, cal in enumerate(cals):
            cell = _cell(cal[s])
            m = marks.get((a, s))
            if m:
                cell.append(" " + m, style="bold yellow")
                if m != "?":
                    cell.stylize("reverse")
            row.append(cell)
        cells.append(row)
    heads = [Text(f"A{a}" + ("*" if a in parts else "") + (" (you)" if a == seat else ""),
                  style="bold reverse" if a in active else ("bold" if a in parts else "")) for a in range(len(cals))]
    widths = [max([heads[a].cell_len] + [row[a].cell_len for row in cells]) for a in range(len(cals))]
    sw = len(str(max(0, model.num_slots - 1)))
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append(" " * sw + " ")
    for a, h in enumerate(heads):
        out.append_text(h)
        out.append(" " * (widths[a] - h.cell_len + 2))
    for s, row in enumerate(cells):
        out.append("\n")
        out.append(f"{s:>{sw}} ", style="dim")
        for a, c in enumerate(row):
            out.append_text(c)
            out.append(" " * (widths[a] - c.cell_len + 2))
    return out


def _message_line(model: ReplayModel, k: int, current: bool) -> Text:
    ev = model.events[k]
    d = ev.get("data") or {}
    t = ev.get("type")
    to = str(d.get("to_agent")) if t == "dm_sent" else channel_label(t) if t in MESSAGE_TYPES else "?"
    line = Text("▶ " if current else "  ", style="bold yellow")
    line.append(f"r{_rn(d.get('round'))}·{_rn(d.get('turn'))} ", style="dim")
    line.append(f"A{d.get('from_agent')}→{to}: ", style="bold cyan")
    kind = _payload_kind(d)
    if kind:
        line.append(f"[{kind}] ", style="magenta")
    line.append(str(d.get("content") or ""))
    dv = model.delta_vps.get(model.seqs[k])
    if dv:
        line.append(f"   VPS {dv:+.2f}", style="yellow")
    if current:
        line.stylize("on #303000")
    return line


def messages_text(model: ReplayModel, i: int) -> Text:
    ks = model.messages_upto(i)
    out = Text()
    if not ks:
        out.append("No message has been sent yet.", style="dim")
        return out
    out.append(f"{len(ks)} message(s) so far\n", style="bold")
    if len(ks) > MAX_MESSAGES_SHOWN:
        out.append(f"… {len(ks) - MAX_MESSAGES_SHOWN} earlier messages not shown\n", style="dim")
        ks = ks[-MAX_MESSAGES_SHOWN:]
    for k in ks:
        out.append_text(_message_line(model, k, k == i))
        out.append("\n")
    return out


def beliefs_renderable(model: ReplayModel, i: int) -> Text:
    """The belief updates of event i, and the VPS so far (plain text: cheap to redraw per step)."""
    from engine.privacy import credit

    seq = model.seqs[i]
    rows = model.beliefs_by_seq.get(seq, [])
    out = Text(no_wrap=True, overflow="ellipsis")
    if model.task is None:
        out.append("Beliefs cannot be computed: the trace's initial calendars cannot be rebuilt.", style="yellow")
        return out
    if rows:
        out.append(f"Belief updates caused by event {seq}\n", style="bold")
        out.append(f"{'observer':>8} {'about':>5} {'slot':>4}  {'source':<16} {'e':>5} {'α':>5} {'before':>7} "
                   f"{'after':>7} {'Δ|Bel−½|':>9}\n", style="bold")
        for u in rows:
            d = credit(u)
            out.append(f"{'A' + str(u['observer']):>8} {'A' + str(u['target']):>5} {u['slot']:>4}  "
                       f"{str(u['source'])[:16]:<16} {u['evidence']:>5.2f} {u['strength']:>5.2f} "
                       f"{u['before']:>7.3f} {u['after']:>7.3f} ")
            out.append(f"{d:>+9.3f}\n", style="yellow" if d > 0 else "green")
        out.append(f"VPS moved by {model.delta_vps.get(seq, 0.0):+.3f} slot-equivalents\n", style="bold")
    else:
        out.append("This event moves no belief.\n", style="dim")
    pair, per_target = model.vps_so_far(i)
    r = _played_round(model, i)
    n = model.num_agents
    if r is not None:
        out.append(f"\nRound {_rn(r)} so far: VPS of each observer (row) about each target (column)\n", style="bold")
        out.append(f"{'observer':>8}" + "".join(f"{'A' + str(t):>8}" for t in range(n)) + "\n", style="bold")
        for o in range(n):
            cells = "".join(f"{('—' if o == t else (f'{pair[(o, t)]:.2f}' if (o, t) in pair else '0')):>8}"
                            for t in range(n))
            out.append(f"{'A' + str(o):>8}{cells}\n")
    out.append("\nGame so far: VPS about each target (sum over observers and rounds)\n", style="bold")
    out.append("".join(f"{'A' + str(t):>8}" for t in range(n)) + f"{'total':>9}\n", style="bold")
    out.append("".join(f"{v:>8.2f}" for v in per_target) + f"{sum(per_target):>9.2f}")
    return out


def _ms(v: Any) -> str:
    return f"{v:,.0f} ms" if isinstance(v, (int, float)) and not isinstance(v, bool) else "–"


def call_lines(d: dict[str, Any]) -> list[str]:
    """How an LLM call went, from its reply event's ``extra``: attempts (each with its outcome,
    latency, reply budget and limits), the finish reason, the latencies and the context budget."""
    extra = d.get("extra") if isinstance(d.get("extra"), dict) else {}
    if not extra or "attempts" not in extra and "context" not in extra:
        return []
    out = []
    n = extra.get("attempts")
    head = f"  call: {n} attempt{'s' if n != 1 else ''}" if n is not None else "  call:"
    if extra.get("retried"):
        head += f" (retried after {', '.join(map(str, extra['retried']))}; waited {extra.get('waits')} s)"
    head += f" · finish_reason {extra.get('finish_reason') or 'stop'}"
    head += f" · latency {_ms(d.get('latency_ms'))} (whole call {_ms(extra.get('wall_ms'))}"
    if extra.get("queue_ms"):
        head += f", queued {_ms(extra.get('queue_ms'))}"
    head += ")"
    if extra.get("failure"):
        head += f" · failed: {extra.get('failure_kind') or extra['failure']}"
    out.append(head)
    for a in extra.get("attempt_log") or []:
        if not isinstance(a, dict):
            continue
        line = f"    attempt {a.get('attempt')}: {a.get('outcome')}"
        if a.get("detail"):
            line += f" — {a['detail']}"
        line += f" · {_ms(a.get('latency_ms'))}"
        if a.get("first_token_ms") is not None:
            line += f" (first token {_ms(a['first_token_ms'])})"
        line += (f" · max_tokens {a.get('max_tokens')} · silence limit {a.get('silence_s')} s, deadline "
                 f"{a.get('deadline_s')} s" + (" · streamed" if a.get("streamed") else ""))
        if a.get("endpoint"):
            line += f" · {a['endpoint']}"
        out.append(line)
    ctx = extra.get("context") if isinstance(extra.get("context"), dict) else None
    if ctx:
        parts = [f"window {ctx.get('window') or 'unknown'}" + (f" ({ctx['window_source']})"
                                                                if ctx.get("window_source") else "")]
        if ctx.get("est_prompt_tokens") is not None:
            parts.append(f"prompt ≈ {ctx['est_prompt_tokens']:,} tokens")
        if ctx.get("reply_tokens") is not None:
            parts.append(f"reply budget {ctx['reply_tokens']}")
        elif ctx.get("max_tokens") is not None:
            parts.append(f"reply budget {ctx['max_tokens']}")
        if ctx.get("digested_upto"):
            parts.append(f"rounds before {ctx['digested_upto']} digested")
        if ctx.get("trimmed_rounds"):
            parts.append(f"this call digested rounds {ctx['trimmed_rounds']}")
        if ctx.get("dropped_messages"):
            parts.append(f"{ctx['dropped_messages']} earlier messages left out")
        out.append("  context budget: " + " · ".join(parts))
    return out


def seat_text(model: ReplayModel, seat: int, i: int) -> Text:
    """Everything but the calendar of the seat view."""
    out = Text()
    seq = model.seqs[i]
    out.append(f"{model.who(seat)} — as it was at event {seq}", style="bold")
    r = model.round_of[i]
    m = model.meetings.get(r) if isinstance(r, int) else None
    if m is not None:
        role = "a participant" if seat in (m.get("participants") or []) else "not a participant"
        out.append(f" · round {_rn(r)}, meeting M{m.get('id')} ({role})")
    out.append("\n")
    box = model.inbox(seat, i)
    out.append(f"\nInbox this round ({len(box)})\n", style="bold underline")
    if not box:
        out.append("  (empty)\n", style="dim")
    for k in box:
        out.append_text(_message_line(model, k, k == i))
        out.append("\n")
    p = model.last_of(seat, i, PROMPT_TYPES)
    rep = model.last_of(seat, i, REPLY_TYPES)
    out.append("\nPrompt it was sent\n", style="bold underline")
    if p is None:
        out.append("  (none yet)\n", style="dim")
    else:
        d = model.events[p].get("data") or {}
        out.append(f"  event {model.seqs[p]} ({model.events[p].get('type')}, {d.get('phase')})\n", style="dim")
        prompt = d.get("prompt_sent")
        out.append((str(prompt) if prompt else "  (no prompt recorded: this seat is not prompted in text)") + "\n",
                   style="" if prompt else "dim")
    out.append("\nIts reply\n", style="bold underline")
    if rep is None or (p is not None and rep < p):
        out.append("  (no reply yet at this moment)\n", style="dim")
    else:
        d = model.events[rep].get("data") or {}
        out.append(f"  event {model.seqs[rep]} ({model.events[rep].get('type')}"
                   + (f", status {d.get('status')}" if d.get("status") else "") + ")\n", style="dim")
        out.append("  actions: ", style="bold")
        out.append(fmt_actions(d.get("tool_calls")) + "\n")
        if d.get("thinking"):
            out.append("  thinking: ", style="bold")
            out.append(str(d["thinking"]) + "\n", style="italic")
        if d.get("text"):
            out.append("  text: ", style="bold")
            out.append(str(d["text"]) + "\n")
        raw = d.get("raw_api_response")
        if raw:
            out.append("  raw reply: ", style="bold")
            out.append((raw if isinstance(raw, str) else json.dumps(raw, indent=1, default=str)) + "\n", style="dim")
        if d.get("usage"):
            out.append(f"  usage: {d.get('usage')}  latency: {d.get('latency_ms')} ms\n", style="dim")
        for line in call_lines(d):
            out.append(line + "\n", style="dim")
    reg = model.registration(seat)
    if reg and reg.get("system_prompt"):
        out.append("\nSystem prompt (at registration)\n", style="bold underline")
        out.append(str(reg["system_prompt"]) + "\n", style="dim")
    return out


# ---------------------------------------------------------------------------------------
# The screen
# ---------------------------------------------------------------------------------------
class ReplayScreen(Screen):
    """Step through one trace.  ``seat`` opens the seat view on that seat."""

    CSS_PATH = Path(__file__).with_suffix(".tcss")

    BINDINGS = [
        Binding("right,l", "step(1)", "Next event", show=False, id="replay.next", priority=True),
        Binding("left,h", "step(-1)", "Previous event", show=False, id="replay.prev", priority=True),
        Binding("right_square_bracket", "round(1)", "Next round", show=False, id="replay.next_round",
                priority=True),
        Binding("left_square_bracket", "round(-1)", "Previous round", show=False, id="replay.prev_round",
                priority=True),
        Binding("home", "jump('first')", "First event", show=False, id="replay.first", priority=True),
        Binding("end", "jump('last')", "Last event", show=False, id="replay.last", priority=True),
        Binding("space", "autoplay", "Play", show=False, id="replay.play", priority=True),
        Binding("plus,equals_sign", "speed(1)", "Faster", show=False, id="replay.faster"),
        Binding("minus", "speed(-1)", "Slower", show=False, id="replay.slower"),
        Binding("c", "view('calendars')", "Calendars", id="replay.calendars"),
        Binding("s", "view('seat')", "Seat", id="replay.seat"),
        Binding("m", "view('messages')", "Messages", id="replay.messages"),
        Binding("b", "view('beliefs')", "Beliefs", id="replay.beliefs"),
        *[Binding(str(k), f"choose_seat({k})", f"Seat {k}", show=False, id=f"replay.seat{k}") for k in range(10)],
        Binding("escape,q", "close", "Close", id="replay.close"),
        Binding("question_mark", "how_to_read", "How to read", id="replay.how"),
    ]

    def __init__(self, trace: dict[str, Any], seat: int | None = None) -> None:
        super().__init__()
        self.model = ReplayModel(trace)
        n = self.model.num_agents
        self.seat = seat if isinstance(seat, int) and 0 <= seat < n else None
        self.view_seat = self.seat if self.seat is not None else 0
        self.pos = 0
        self.speed_index = DEFAULT_SPEED
        self.playing = False
        self._timer = None
        self._option_of: dict[int, int] = {}
        self._lines: dict[str, int | None] = {}
        self._event_of: dict[int, int] = {}

    # -- layout ---------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="replay-status")
        with Horizontal(id="replay-body"):
            yield OptionList(*self._options(), id="timeline")
            with TabbedContent(initial="seat" if self.seat is not None else "calendars", id="views"):
                with TabPane("Calendars", id="calendars"):
                    with VerticalScroll():
                        yield Static(id="calendars-view")
                with TabPane("Seat", id="seat"):
                    with VerticalScroll(id="seat-scroll"):
                        yield CalendarView(id="seat-calendar")
                        yield Static(id="seat-view")
                with TabPane("Messages", id="messages"):
                    with VerticalScroll():
                        yield Static(id="messages-view")
                with TabPane("Beliefs", id="beliefs"):
                    with VerticalScroll():
                        yield Static(id="beliefs-view")
        yield Static(Text("← → event · [ ] round · home end · space play · + - speed · 0-9 seat",
                          style="dim", no_wrap=True, overflow="ellipsis"), id="replay-hint")
        yield KeyBar()

    def action_how_to_read(self) -> None:
        self.app.push_screen(ReplayHelp())

    def _options(self) -> list[Option]:
        opts: list[Option] = []
        prev = object()
        for i in range(len(self.model)):
            key = self.model.phase_key(i)
            if key != prev:
                prev = key
                opts.append(Option(Text(self.model.header(i), style="bold"), disabled=True))
            self._option_of[i] = len(opts)
            self._event_of[len(opts)] = i
            opts.append(Option(self.model.describe(i), id=f"ev{i}"))
        return opts

    def on_mount(self) -> None:
        self.query_one("#timeline", OptionList).focus()
        self.show()

    # -- state ----------------------------------------------------------------------------
    @property
    def seq(self) -> int:
        return self.model.seqs[self.pos] if len(self.model) else 0

    def go(self, i: int) -> None:
        if not len(self.model):
            return
        i = max(0, min(len(self.model) - 1, i))
        if i == self.pos and self.is_mounted and self._shown:
            return
        self.pos = i
        self.show()

    _shown = False

    def show(self) -> None:
        if not len(self.model):
            self.query_one("#replay-status", Static).update(self.status_text())
            return
        self._shown = True
        tl = self.query_one("#timeline", OptionList)
        want = self._option_of[self.pos]
        if tl.highlighted != want:
            tl.highlighted = want
        self._set("#replay-status", self.status_text())
        self.refresh_view()

    def _set(self, selector: str, content: Any) -> None:
        """Update a Static; skip the layout pass when its text has as many lines as before
        (stepping through a game mostly redraws same-sized views, and layout is the costly part)."""
        lines = content.plain.count("\n") if isinstance(content, Text) else None
        same = lines is not None and self._lines.get(selector) == lines
        self._lines[selector] = lines
        self.query_one(selector, Static).update(content, layout=not same)

    def status_text(self) -> Text:
        m = self.model
        i = self.pos
        if not len(m):
            return Text.assemble(m.badge(), "\n", ("This trace has no events.", "yellow"))
        ev = m.events[i]
        d = ev.get("data") or {}
        t = Text()
        t.append_text(m.badge())
        t.append("\n")
        r = _played_round(m, i)
        t.append(f"event {i + 1}/{len(m)} (seq {m.seqs[i]})", style="bold")
        if r is not None:
            t.append(f" · round {_rn(r)}/{len(m.round_starts) or '?'}")
        if d.get("phase"):
            t.append(f" · {d.get('phase')}")
        t.append(f" · {ev.get('type')}")
        state = "▶ playing" if self.playing else "❚❚ paused"
        t.append(f"   {state} at {SPEEDS[self.speed_index]:g} events/s", style="dim")
        return t

    def active_view(self) -> str:
        return self.query_one("#views", TabbedContent).active or "calendars"

    def refresh_view(self) -> None:
        if not len(self.model):
            return
        view = self.active_view()
        m, i = self.model, self.pos
        if view == "calendars":
            legend = Text("All calendars after this event (· free, E errand:cost, B blocked, M meeting; ★ scheduled, "
                          "←k moved in from k, →k moved out to k, ? a belief about that slot moved; * participant)\n",
                          style="dim")
            self._set("#calendars-view", Text.assemble(legend, calendars_table(m, i, self.seat)))
        elif view == "seat":
            self._show_seat()
        elif view == "messages":
            self._set("#messages-view", messages_text(m, i))
        elif view == "beliefs":
            self._set("#beliefs-view", beliefs_renderable(m, i))

    def _show_seat(self) -> None:
        m, i, s = self.model, self.pos, self.view_seat
        cv = self.query_one("#seat-calendar", CalendarView)
        cal = m.calendars_at(i)[s]
        cv.seat = s
        cv.labels = m.task.labels if m.task is not None else None
        cv.participants = {k: v for k, v in m.participants.items() if isinstance(k, int)}
        cv.calendar = ()  # no "moved" accumulation across jumps
        cv.set_calendar(cal)
        cv.set_highlight({slot for (a, slot) in m.marks(i) if a == s and isinstance(slot, int)})
        self._set("#seat-view", seat_text(m, s, i))

    # -- actions --------------------------------------------------------------------------
    def action_step(self, delta: int) -> None:
        self.go(self.pos + delta)

    def action_round(self, delta: int) -> None:
        if delta > 0:
            self.go(self.model.round_index_after(self.pos))
        else:
            self.go(self.model.round_index_before(self.pos))

    def action_jump(self, where: str) -> None:
        self.go(0 if where == "first" else len(self.model) - 1)

    def action_autoplay(self) -> None:
        if not len(self.model):
            return
        if self.playing:
            self._stop()
        else:
            if self.pos >= len(self.model) - 1:
                self.go(0)
            self.playing = True
            self._start_timer()
        self._set("#replay-status", self.status_text())

    def _start_timer(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_interval(1.0 / SPEEDS[self.speed_index], self._tick)

    def _stop(self) -> None:
        self.playing = False
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def _tick(self) -> None:
        if self.pos >= len(self.model) - 1:
            self._stop()
            self._set("#replay-status", self.status_text())
            return
        self.go(self.pos + 1)

    def action_speed(self, delta: int) -> None:
        self.speed_index = max(0, min(len(SPEEDS) - 1, self.speed_index + delta))
        if self.playing:
            self._start_timer()
        self._set("#replay-status", self.status_text())

    def action_view(self, name: str) -> None:
        self.query_one("#views", TabbedContent).active = name
        self.refresh_view()

    def action_choose_seat(self, seat: int) -> None:
        if not 0 <= seat < self.model.num_agents:
            self.notify(f"No agent {seat}: this game has agents 0–{self.model.num_agents - 1}.", severity="warning")
            return
        self.view_seat = seat
        self.action_view("seat")

    def action_close(self) -> None:
        self._stop()
        self.dismiss(None)

    # -- events ---------------------------------------------------------------------------
    @on(TabbedContent.TabActivated)
    def _tab_changed(self, event: TabbedContent.TabActivated) -> None:
        if self._shown:
            self.refresh_view()

    @on(OptionList.OptionHighlighted, "#timeline")
    def _timeline_moved(self, event: OptionList.OptionHighlighted) -> None:
        tl = self.query_one("#timeline", OptionList)
        if event.option_index != tl.highlighted:  # a stale message from an earlier step
            return
        i = self._event_of.get(event.option_index)
        if i is not None and i != self.pos:
            self.pos = i
            self.show()


def _played_round(model: Any, i: int) -> int | None:
    """The round event ``i`` belongs to, or None before the first and after the last one
    (``game_end`` carries the number of rounds as its round: "round 6/5" on a 5-round game)."""
    r = model.round_of[i]
    if not isinstance(r, int) or r < 0 or (model.round_starts and r >= len(model.round_starts)):
        return None
    return r


def _rn(r: Any) -> Any:
    """A 0-based round (or turn) number from the trace, as the game shows it (from 1)."""
    return r + 1 if isinstance(r, int) else r


def _seats(seats: Any) -> str:
    return ", ".join(map(str, seats)) if isinstance(seats, (list, tuple)) else str(seats)


def _copies(per_agent_slot: dict) -> str:
    """Where each participant's copy ended: "copies at slot 7 (A0, A2), slot 10 (A1)"."""
    by_slot: dict[Any, list[str]] = {}
    for k, s in per_agent_slot.items():
        by_slot.setdefault(s, []).append(f"A{k}")
    parts = [("no copy" if s is None else f"slot {s}") + f" ({', '.join(who)})"
             for s, who in sorted(by_slot.items(), key=lambda kv: (kv[0] is None, kv[0] if kv[0] is not None else 0))]
    return "copies at " + ", ".join(parts) if parts else "no copies"


#: The one screen on how to read a replay (``?``): (what, how to read it).
HOW_TO_READ: tuple[tuple[str, str], ...] = (
    ("What it is", "The game folded again from its saved events: nothing is played, no bot is asked."),
    ("Top line", "✓ verified: the calendars rebuilt from the events match the state recorded at the end of "
                 "every round (✗ names the first round that differs). Then where you are: event k of n, the "
                 "round (from 1, as in the game), the phase (CHEAP_TALK is the talk) and the kind of event."),
    ("Left", "The timeline, one line per event, grouped by round and phase. A0, A1 … are the agents; "
             "\"A2→3\" is a DM from Agent 2 to Agent 3, \"A2→participant chat\" and \"A2→all-agent chat\" "
             "messages to the two group channels; [kind] names a typed message; \"VPS +0.50\" is how much that message told "
             "others about someone's calendar."),
    ("Calendars (c)", "Every calendar after this event: · free, E errand:cost, B blocked, M meeting; ★ the "
                      "meeting placed, ←k / →k moved in from / out to slot k, ? someone's guess about that slot "
                      "changed."),
    ("Seat (s)", "One seat as it was then: its calendar, its inbox this round, the prompt it was sent and its "
                 "reply. 0–9 picks the seat."),
    ("Messages (m)", "Every message so far, with the VPS each one caused."),
    ("Beliefs (b)", "Who learnt what about whom: VPS by observer (row) and target (column)."),
    ("VPS", "Privacy loss: how far the others' guesses about a calendar moved from \"no idea\". 0 means "
            "nothing was revealed; lower is better. A negative step (\"VPS −0.20\") is a message that moved a "
            "guess back toward \"no idea\": it undid some of what an earlier message revealed (a correction, "
            "a change of plan), so the steps add up to the total."),
    ("Keys", "→ / ← one event · ] / [ one round · home / end the first / last event · space plays and "
             "pauses · + / - faster / slower · esc closes the replay"),
)


def how_to_read() -> Table:
    t = Table(box=None, show_header=False, padding=(0, 1), expand=True)
    t.add_column("what", style="bold cyan", no_wrap=True)
    t.add_column("how", ratio=1)
    for what, how in HOW_TO_READ:
        t.add_row(what, Text(how))
    return t


class ReplayHelp(ModalScreen):
    """``?`` in the replay: one screen on how to read it."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "Close", id="replay.help.close")]
    DEFAULT_CSS = """
    ReplayHelp { align: center middle; }
    ReplayHelp > VerticalScroll { width: 96%; max-width: 96; height: 96%; border: round $accent;
                                  background: $surface; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll() as v:
            v.border_subtitle = "esc closes"
            yield Static(Text("How to read a replay", style="bold reverse"))
            yield Static(how_to_read())

    def action_close(self) -> None:
        self.dismiss(None)
