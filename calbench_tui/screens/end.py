"""The end screen: how every seat did against the oracle, and — now the game is over — everything.

Per seat: meetings scheduled/assigned, cost paid, the seat's share in the best schedule,
its extra, signed extra, fairness, VPS (typed + free text) and semantic leaks by tier
(sensitive in red).  For the game: meetings scheduled, *excess* — the one game number, the
mean of the seats' extras in cost levels, the very number the saved-games list and
``calbench report`` show — the oracle's schedule beside the one played, and all calendars
side by side with every move marked.  Every cost on this screen is in cost levels (the
player's own calendar figure is added where it differs); ``l`` opens the legend, which
defines each number once (``screens/legend.py``).  Keys: export the trace, open the
replay, play again (through the setup screen), the legend.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Static

from engine.model import Errand, MeetingCopy, item_from_json

from ..widgets.keybar import KeyBar
from ..widgets.metrics import leaks_by_seat, seat_table


def _fmt(v: Any, digits: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}".rstrip("0").rstrip(".") if digits else str(round(v))
    return str(v)


def _fold(trace: dict[str, Any]):
    """The game's events folded (``engine.fold.Fold``), or None for a trace with nothing to fold over."""
    from engine.trace import TraceError, fold_trace

    try:
        return fold_trace(trace, verify=False).fold
    except TraceError:
        return None


def played_schedule(trace: dict[str, Any]) -> dict[int, str]:
    """Meeting id -> where it ended up in the game played (the fold's recorded round outcomes)."""
    out: dict[int, str] = {}
    fold = _fold(trace)
    for _seq, res, _cals in fold.resolutions if fold is not None else ():
        slots = set((res.per_agent_slot or {}).values())
        mid = res.meeting_id
        if res.coordinated and len(slots) == 1:
            out[mid] = f"slot {next(iter(slots))}"
        elif slots == {None}:
            out[mid] = "not scheduled"
        else:
            out[mid] = "ghost (copies apart): " + ", ".join("–" if s is None else str(s) for s in sorted(
                slots, key=lambda x: (x is None, x)))
    fs = trace.get("final_state") or {}
    sched = set(fs.get("scheduled_meeting_ids") or (trace.get("metrics") or {}).get("scheduled_meeting_ids") or [])
    for mid, where in list(out.items()):
        if where.startswith("slot") and sched and mid not in sched:
            out[mid] = where + " (broken later)"
    return out


def moves_by_seat(trace: dict[str, Any]) -> list[dict[int, str]]:
    """Per seat: slot -> a short mark of what moved there or away during the game (the fold's batches)."""
    fold = _fold(trace)
    if fold is None:
        return []
    marks: list[dict[int, str]] = [{} for _ in range(fold.num_agents)]
    for _seq, a, _r, outcome in fold.batches:
        for mv in outcome.moves:
            marks[a][mv.to_slot] = f"←{mv.from_slot}"
            marks[a].setdefault(mv.from_slot, f"→{mv.to_slot}")
        if outcome.scheduled_slot is not None:
            marks[a][outcome.scheduled_slot] = "★"
    return marks


def calendars_table(trace: dict[str, Any], seat: int | None) -> Table:
    fs = trace.get("final_state") or {}
    cals = [[item_from_json(it) for it in cal] for cal in fs.get("calendars") or []]
    marks = moves_by_seat(trace)
    t = Table(box=None, pad_edge=False, padding=(0, 1), show_edge=False, expand=False)
    t.add_column("#", justify="right", style="dim")
    for a in range(len(cals)):
        t.add_column("you" if a == seat else f"Agent {a}", no_wrap=True)
    for s in range(len(cals[0]) if cals else 0):
        row = [str(s)]
        for a, cal in enumerate(cals):
            it = cal[s]
            if it is None:
                cell = Text("·", style="dim")
            elif isinstance(it, MeetingCopy):
                cell = Text(f"M{it.meeting_id}", style="bold cyan")
            elif isinstance(it, Errand):
                cell = Text(f"{'B' if it.blocked else 'E'}{it.errand_id}:{it.cost}",
                            style="red" if it.blocked else "")
            else:
                cell = Text(str(it))
            m = marks[a].get(s) if a < len(marks) else None
            if m:
                cell.append(" " + m, style="bold yellow")
            row.append(cell)
        t.add_row(*row)
    return t


def _sum(values) -> float | None:
    vals = [v for v in values if isinstance(v, (int, float))]
    return sum(vals) if vals else None


def task_optimum(trace: dict[str, Any]) -> tuple[float, list[float], float] | None:
    """The end screen's one yardstick: the task's optimum over *all* its meetings (what the task
    file and the replay call the optimal cost) — ``(total in cost levels, each seat's share in
    cost levels, total in shown costs as the replay prints it)``; None for a trace without a
    task or an infeasible one."""
    from engine.metrics import oracle_cached
    from engine.model import Task

    row = trace.get("task")
    if not isinstance(row, dict):
        return None
    try:
        o = oracle_cached(Task.from_row(row), None)
    except Exception:  # a task row this version cannot read: no yardstick rather than a crash
        return None
    if not o.feasible:
        return None
    return o.cost_levels, list(o.agent_costs_levels), o.cost


def failed_meetings(trace: dict[str, Any]) -> list[int]:
    """The meetings of the task that did not end up scheduled (never reached, apart, broken)."""
    played = played_schedule(trace)
    return [m.get("id") for m in (trace.get("task") or {}).get("meetings") or []
            if not str(played.get(m.get("id"), "")).startswith("slot") or "broken" in played.get(m.get("id"), "")]


NEGATIVE_VPS = ("A part below 0 is a message that moved a guess back toward \"no idea\": it undid some of what "
                "an earlier message revealed (a correction, a change of plan). The parts add up to the total.")


def excess_words(excess: Any) -> str:
    """The game's excess as every screen prints it: two decimals, cost levels, mean per seat."""
    if not isinstance(excess, (int, float)):
        return "–"
    return f"{excess:.2f} per seat (mean extra cost over the best schedule, in cost levels)"


VPS_SOURCES = (("typed_vps", "typed"), ("freetext_vps", "free text"), ("gossip_vps", "gossip"))


def calls_words(c: dict[str, int]) -> str:
    """The LLM seats' calls, each kind named apart (``engine.usage.call_counts``)."""
    return (f"LLM requests: {c['requests']} (of which {c['retries']} retries after a failure); "
            f"{c['capped_turns']} capped turns without a request; {c['rejected_batches']} rejected batches "
            f"asked again; {c['lost_decisions']} decisions lost to the endpoint")


def failure_line(trace: dict[str, Any]) -> str | None:
    """Failed seat calls by whose fault, and the LLM seats' tokens; None when there is neither."""
    from engine.usage import call_counts, failure_counts, token_usage

    events = trace.get("events") or []
    f = failure_counts(events)
    parts = []
    if f["infra"] or f["configuration"] or f["agent"]:
        kinds = ", ".join(f"{k} {n}" for k, n in f["kinds"].items())
        parts.append(f"Failed seat calls: {f['infra']} infrastructure (the endpoint), {f['configuration']} "
                     f"configuration (context overflow), {f['agent']} agent (unreadable or invalid replies)"
                     + (f" — {kinds}" if kinds else ""))
    tok = token_usage(events)["game"]
    if tok["calls"]:
        parts.append(f"LLM tokens: {tok['prompt_tokens']:,} prompt ({tok['cached_tokens']:,} cached), "
                     f"{tok['completion_tokens']:,} completion over {tok['calls']} answered calls")
    counted = call_counts(events)["game"]
    if counted["requests"] or counted["capped_turns"]:
        parts.append(calls_words(counted))
    return "\n".join(parts) or None


def vps_split_text(m: dict) -> str | None:
    """Where the VPS came from, as approximate shares of the (exact) total.

    ``engine.privacy`` credits each belief update to the source of the message, and the
    credits telescope: a part can be negative (a free-text line that moved a belief back
    towards the prior) while the parts still add up to the total.  "typed 50 + free text
    -0.1" reads as nonsense to a player, so the headline shows only the parts that raised
    the score, as rounded percentages of their sum ("mostly typed payloads"), labelled
    approximate; the total itself is printed as is.  None when there is nothing to split.
    """
    parts = [(label, m.get(key)) for key, label in VPS_SOURCES]
    pos = [(label, float(v)) for label, v in parts if isinstance(v, (int, float)) and v > 0]
    total = sum(v for _, v in pos)
    if not pos or total <= 0:
        return None
    shares = [(label, round(100 * v / total)) for label, v in pos]
    shares = [(label, pct) for label, pct in shares if pct > 0]
    if len(shares) == 1:
        return f"≈ all from {shares[0][0]}"
    return "≈ " + ", ".join(f"{pct}% {label}" for label, pct in shares)


class EndScreen(Screen):
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    BINDINGS = [
        Binding("x", "export", "Export", id="export", tooltip="write this game's trace to a JSON file"),
        Binding("v", "replay", "Replay", id="replay"),
        Binding("n", "play_again", "Play again", id="play_again"),
        Binding("l", "legend", "Legend", id="end.legend", tooltip="what each number on this screen means"),
        Binding("g", "saved_games", "Saved games", id="end.games"),
        Binding("q", "app.quit", "Quit", id="end.quit", show=False),
    ]

    def __init__(self, trace: dict[str, Any], *, seat: int | None, game_id: str | None = None) -> None:
        super().__init__()
        self.trace = trace
        self.seat = seat
        self.game_id = game_id or trace.get("game_id")

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="end"):
            yield Static(self._headline(), id="headline")
            opt = task_optimum(self.trace)
            yield Static(seat_table(self.trace, self.seat, best=opt[1] if opt else None,
                                    failed=bool(failed_meetings(self.trace))), id="seats-table",
                         classes="wide")
            yield Static(self._leaks(), id="leaks")
            yield Static(self._schedules(), id="schedules")
            yield Static(Text("All calendars, revealed (★ the meeting placed, ←k moved in from slot k, "
                              "→k moved out to slot k)", style="bold"), classes="section")
            yield Static(calendars_table(self.trace, self.seat), id="calendars", classes="wide")
        yield KeyBar()

    # -- sections -----------------------------------------------------------------------
    def _headline(self) -> Text:
        m = self.trace.get("metrics") or {}
        ps = [r for r in (m.get("per_seat") or []) if isinstance(r, dict)]
        t = Text()
        t.append("GAME OVER", style="bold reverse")
        t.append(f"  {m.get('meetings_scheduled', '?')} of {m.get('meetings_total', '?')} meetings scheduled")
        t.append("   l: what the numbers mean", style="dim")
        excess = m.get("excess")
        t.append("\nExcess ", style="bold")
        t.append(excess_words(excess), style="bold")
        paid = _sum(r.get("cost") for r in ps)
        opt = task_optimum(self.trace)
        every = m.get("meetings_scheduled") == m.get("meetings_total")
        # one yardstick: the task's optimum (with every meeting held, the metrics' oracle is it)
        best = opt[0] if opt is not None else _sum(r.get("oracle_cost") for r in ps) if every else None
        if paid is not None and best is not None:
            t.append(f" · all seats paid {_fmt(paid)}; the best schedule of the task (all "
                     f"{m.get('meetings_total', '?')} meetings, as the task file and the replay say) costs "
                     f"{_fmt(best)}" + (f" ({_fmt(opt[2])} in shown costs)" if opt and opt[2] != opt[0] else ""))
            if excess and paid <= best:
                t.append(" (seats that paid less than their share don't offset those that paid more)", style="dim")
        failed = failed_meetings(self.trace)
        if failed:
            held = _sum(r.get("oracle_cost") for r in ps)
            t.append(f"\n{', '.join(f'M{x}' for x in failed)} failed (not scheduled): "
                     f"{'it has' if len(failed) == 1 else 'they have'} no best slot here and cost nobody "
                     "anything; extra compares each seat with its share in the cheapest way to hold only the "
                     f"meetings that were scheduled ({'held in the table' if opt is not None else 'best in the table'}"
                     f"{f'; {_fmt(held)} in all' if held is not None else ''}).",
                     style="yellow")
        t.append("\nVPS ", style="bold")
        t.append(f"{_fmt(m.get('vps'))}", style="bold")
        t.append(" privacy loss, summed over seats (0 = nothing revealed; lower is better)")
        split = vps_split_text(m)
        if split:
            t.append(f" {split}", style="dim")
        from ..widgets.metrics import vps_parts

        if any(isinstance(x, (int, float)) and x < 0 for r in ps for x in vps_parts(r)[1:]) or any(
                isinstance(m.get(k), (int, float)) and m.get(k) < 0 for k, _ in VPS_SOURCES):
            t.append("\n" + NEGATIVE_VPS, style="dim")
        if self.seat is not None and self.seat < len(ps):
            me = ps[self.seat]
            t.append(f"\nYou (Agent {self.seat}): {me.get('meetings_scheduled')} of {me.get('meetings_assigned')} "
                     f"of your meetings scheduled · paid {_fmt(me.get('cost'))}", style="bold")
            if me.get("cost_shown") is not None and me.get("cost_shown") != me.get("cost"):
                t.append(f" ({_fmt(me.get('cost_shown'))} on your calendar)", style="bold")
            share = opt[1][self.seat] if opt is not None and self.seat < len(opt[1]) else me.get("oracle_cost")
            t.append(f" · your share in the best schedule {_fmt(share)}"
                     + (f" (held {_fmt(me.get('oracle_cost'))}: only the meetings scheduled)"
                        if failed and opt is not None else "")
                     + f" · extra {_fmt(me.get('excess'))}", style="bold")
        fails = failure_line(self.trace)
        if fails:
            t.append("\n" + fails, style="yellow")
        if self.trace.get("stopped"):
            t.append("\n(the game was stopped early)", style="italic")
        return t

    def _leaks(self) -> Text:
        leaks = leaks_by_seat(self.trace)
        t = Text()
        details = leaks.get("details") or []
        if not details:
            t.append("No private label leaked in any message.", style="green")
            return t
        t.append("Label leaks (a message revealed someone's private label):\n", style="bold")
        for d in details[:12]:
            style = "bold red" if d.get("tier") == "sensitive" else ""
            mark = "!! " if d.get("tier") == "sensitive" else "   "
            t.append(f"{mark}Agent {d.get('sender')} → {d.get('to')}: {d.get('tier')} “{d.get('label')}”\n",
                     style=style)
        if len(details) > 12:
            t.append(f"   … and {len(details) - 12} more\n", style="dim")
        return t

    def _schedules(self) -> Table:
        trace = self.trace
        task = trace.get("task") or {}
        played = played_schedule(trace)
        opt = ((task.get("optimal") or {}).get("assignments")) or {}
        t = Table(title="Schedule: played and best (the task's optimum)", title_justify="left", box=None,
                  padding=(0, 2), show_edge=False)
        t.add_column("meeting")
        t.add_column("participants")
        t.add_column("played")
        t.add_column("best")
        for m in task.get("meetings") or []:
            mid = m.get("id")
            o = opt.get(str(mid), opt.get(mid))
            p = played.get(mid, "not reached")
            held = p.startswith("slot") and "broken" not in p
            style = "green" if held else "red"
            # a failed meeting has no best slot to compare with: it was not held (see the headline)
            t.add_row(f"M{mid}", ", ".join(map(str, m.get("participants") or [])), Text(p, style=style),
                      "– (failed)" if not held else "–" if o is None else f"slot {o}")
        return t

    # -- actions ------------------------------------------------------------------------
    def action_export(self) -> None:
        settings = getattr(self.app, "settings", None)
        out_dir = Path(settings.export_dir) if settings is not None and settings.export_dir else Path.cwd()
        gid = str(self.game_id or "game")
        path = out_dir / f"calbench-{gid[:8]}.json"
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            trace = {k: v for k, v in self.trace.items() if k != "saved"}
            path.write_text(json.dumps(trace, indent=1, default=str), encoding="utf-8")
        except OSError as exc:
            self.notify(f"Could not write {path}: {exc}", severity="error")
            return
        self.notify(f"Trace written to {path}")

    def action_replay(self) -> None:
        if importlib.util.find_spec("calbench_tui.screens.replay") is None:
            self.notify("Replay is not available yet.", severity="warning")
            return
        try:
            from . import replay  # type: ignore

            screen_cls = getattr(replay, "ReplayScreen")
            try:
                screen = screen_cls(self.trace, seat=self.seat)
            except TypeError:
                screen = screen_cls(self.trace)
            self.app.push_screen(screen)
        except Exception as exc:  # the replay screen is another issue's work
            self.notify(f"Replay could not open: {exc}", severity="error")

    def action_legend(self) -> None:
        from .legend import LegendScreen

        self.app.push_screen(LegendScreen())

    class PlayAgain(Message):
        """The player asks for another game (``n``)."""

    def action_play_again(self) -> None:
        self.post_message(self.PlayAgain())

    def action_saved_games(self) -> None:
        from .games import SavedGamesScreen

        self.app.push_screen(SavedGamesScreen(getattr(self.app, "store", None)))
