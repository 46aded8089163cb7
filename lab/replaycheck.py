"""A saved game played again through the engine: "verified" means verified (issue 35 item 4).

The fold (``engine.trace.fold_trace``) proves the calendars: every batch is re-validated
and the recorded states match.  It does not prove the *conversation*: which seat spoke when,
what each was sent and shown, whether a turn was dropped or doubled, whether the seats are
what the trace says they are.  This module proves those by playing the game again with the
engine itself (``engine.game.play_game``, the one game loop) over the trace's task and
rules, and comparing every event it emits with the recorded one:

- a seat recorded as **scripted** is played by that protocol's bot (``personas.registry``),
  from the scenario: its messages, its decisions and its batches must come out as recorded
  (with ``--fidelity ours``, else ``paper``: a trace does not record which);
- any other seat (an LLM, a person) is played by :class:`Recorded`, which answers each call
  the engine makes with the reply the trace recorded for that seat, in order.  What the
  engine does with the reply — the routing, what each seat is shown (``inbox_drained``),
  the talk's end, the decision order, batches, resolutions, ``game_start`` (``num_agents``,
  ``scenario_seed``...), ``agent_registered`` — must come out as recorded.

A removed or duplicated ``turn_*``/``decide_*`` event (``seq`` renumbered or not), a message
whose text differs from what its sender's turn said, a delivery that differs from what was
sent, an edited ``game_start``: the re-played game differs, and the first difference is the
problem reported.  Before the re-play, :func:`seat_problems` checks that the seats' kinds
and labels agree everywhere they are written (``config.agents``, ``game_start``,
``agent_registered``, the saved agents label, ``human_seat``) and that each seat's record
has its kind's marks: an LLM seat is briefed with a system prompt, a person's every answer
leaves a ``human_input`` event, a scripted seat has neither.

What cannot be proven, and is not claimed (docs/hardening.md, "What verification proves"):
an LLM's or a person's replies themselves (a forger who writes prompts for a scripted
seat relabelled as an LLM makes a trace no check tells from a real LLM seat that answered
the same); the LLM seats' measurement-only ``reflection`` answers (scored, not re-played);
the wording of scripted partners in a study game with a ``phrasebook`` (their seats are
re-played as recorded).
"""

from __future__ import annotations

from typing import Any

from engine.actions import MESSAGE_TYPES, Message, Reschedule, Schedule
from engine.seats import Reply

__all__ = ["Recorded", "check_record", "record_problems", "replay_problems", "seat_problems", "verify_game"]

#: Events the re-play does not produce and the comparison leaves out: measurement-only
#: answers (``reflection``) and the mark a resume leaves (``round_restarted``).
_NOT_REPLAYED = frozenset({"reflection", "round_restarted", "game_end"})
_CALL_START = {"turn_start": "turn_end", "decide_start": "decide_end"}
_FAILURES = frozenset({"parse_error", "seat_timeout", "context_overflow"})
_FRAME = ("round", "turn", "phase", "agent_id")


class _OutOfRecord(BaseException):
    """The re-play asked a recorded seat more than the trace recorded (or passed its end)."""


def _action(raw: Any) -> Any:
    """One recorded action back as the engine's action, exactly (no coercion)."""
    if not isinstance(raw, dict):
        raise ValueError("an action is not an object")
    kind = raw.get("type")
    if kind in MESSAGE_TYPES:
        return Message(kind, raw.get("content"), raw.get("to") if kind == "dm" else None, raw.get("payload"))
    if kind == "schedule":
        return Schedule(raw.get("meeting_id"), raw.get("slot"))
    if kind == "reschedule":
        return Reschedule(raw.get("item_id"), raw.get("from_slot"), raw.get("to_slot"), raw.get("justification", ""))
    raise ValueError(f"unknown action type {kind!r}")


def _calls(events: list[dict[str, Any]], seat: int) -> list[tuple[str | None, Reply | None]]:
    """Seat ``seat``'s recorded calls, in order: ``(prompt sent, reply)`` each (no reply: a
    call the game was stopped in)."""
    out: list[tuple[str | None, Reply | None]] = []
    open_: dict[str, Any] | None = None
    inside: list[dict[str, Any]] = []
    for ev in events:
        d = ev.get("data") or {}
        if d.get("agent_id") != seat:
            continue
        t = ev.get("type")
        if t in _CALL_START:
            open_, inside = ev, []
        elif open_ is not None and t == _CALL_START[open_["type"]]:
            out.append(((open_.get("data") or {}).get("prompt_sent"), _reply(d, inside)))
            open_ = None
        elif open_ is not None:
            inside.append(ev)
    if open_ is not None:  # a stopped game's last call, never answered
        out.append(((open_.get("data") or {}).get("prompt_sent"), None))
    return out


def _reply(end: dict[str, Any], inside: list[dict[str, Any]]) -> Reply:
    extra = dict(end["extra"]) if isinstance(end.get("extra"), dict) else {}
    reply = Reply(actions=tuple(_action(a) for a in end.get("tool_calls") or ()), thinking=end.get("thinking"),
                  text=end.get("text"), usage=end.get("usage"), latency_ms=end.get("latency_ms"),
                  raw=end.get("raw_api_response"))
    notes = []
    for ev in inside:
        d = {k: v for k, v in (ev.get("data") or {}).items() if k not in _FRAME}
        t = ev.get("type")
        if t == "human_input":
            extra["human_input"] = d
        elif t in _FAILURES and "error" in d:
            reply.error, reply.error_detail = d.get("error"), d.get("detail")
            reply.text = d.get("text")
        else:
            notes.append({"type": t, **d})
    if notes:
        extra["seat_events"] = notes
    reply.extra = extra
    return reply


class Recorded:
    """A seat that answers the engine with what the trace recorded for it, call by call."""

    def __init__(self, events: list[dict[str, Any]], seat: int) -> None:
        reg = next((e.get("data") or {} for e in events
                    if e.get("type") == "agent_registered" and (e.get("data") or {}).get("agent_id") == seat), {})
        self.kind = reg.get("kind")
        self.model = reg.get("model")
        self.variant = reg.get("variant")
        self._type = reg.get("agent_type")
        self._system = reg.get("system_prompt")
        self._calls = _calls(events, seat)
        self._prompts = [p for p, _ in self._calls]
        self._replies = [r for _, r in self._calls if r is not None]

    async def register(self, briefing: Any) -> str | None:
        return self._system

    def prompt(self, obs: Any) -> str | None:
        if not self._prompts:
            raise _OutOfRecord()
        return self._prompts.pop(0)

    async def _next(self, obs: Any) -> Reply:
        if not self._replies:
            raise _OutOfRecord()
        return self._replies.pop(0)

    speak = volunteer = decide = _next


class _Until:
    """The re-play's sink: keeps the events, stops the game at the first event that differs
    from the record (what :func:`_compare` reports is the first difference, so nothing after
    it is needed) or once it has passed the record."""

    def __init__(self, record: list[dict[str, Any]]) -> None:
        self.events: list[dict[str, Any]] = []
        self.record = record
        self.replayed = 0  # events compared with the record so far

    async def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        if event.get("type") in _NOT_REPLAYED:
            return
        i = self.replayed
        self.replayed += 1
        if i >= len(self.record) or _project(event) != _project(self.record[i]):
            raise _OutOfRecord()


def _names(trace: dict[str, Any]) -> list[Any]:
    agents = (trace.get("config") or {}).get("agents")
    return agents if isinstance(agents, list) else []


def seat_problems(trace: dict[str, Any], n: int) -> list[str]:
    """The seats' kinds and labels, everywhere they are written, and each kind's marks."""
    from engine.seating import human_seats

    events = [e for e in trace.get("events") or [] if isinstance(e, dict)]
    cfg = trace.get("config") if isinstance(trace.get("config"), dict) else {}
    out: list[str] = []
    agents = _names(trace)
    out.extend(_config_problems(trace, cfg))
    if len(agents) != n:
        out.append(f"config.agents lists {len(agents)} seats but the task has {n}")
        return out
    start = next((e.get("data") or {} for e in events if e.get("type") == "game_start"), {})
    reg = {(e.get("data") or {}).get("agent_id"): e.get("data") or {} for e in events
           if e.get("type") == "agent_registered"}
    types, models = start.get("agent_types"), start.get("agent_models")
    for seat in range(n):
        a = agents[seat] if isinstance(agents[seat], dict) else {}
        r = reg.get(seat)
        if r is None:
            out.append(f"seat {seat} has no agent_registered event")
            continue
        said = {"config.agents": (a.get("type"), a.get("kind"), a.get("model"), a.get("variant")),
                "agent_registered": (r.get("agent_type"), r.get("kind"), r.get("model"), r.get("variant"))}
        if said["config.agents"] != said["agent_registered"]:
            out.append(f"seat {seat} is {_who(said['config.agents'])} in config.agents but "
                       f"{_who(said['agent_registered'])} in its agent_registered event")
        if isinstance(types, list) and isinstance(models, list) and len(types) == len(models) == n \
                and (types[seat], models[seat]) != (r.get("agent_type"), r.get("model")):
            out.append(f"seat {seat} is {types[seat]!r} ({models[seat]!r}) in game_start but "
                       f"{r.get('agent_type')!r} ({r.get('model')!r}) in its agent_registered event")
        out.extend(_marks(events, seat, r))
    kinds = [(reg.get(s) or {}).get("kind") for s in range(n)]
    for seat in human_seats(cfg):
        if 0 <= seat < n and kinds[seat] != "human":
            out.append(f"config names seat {seat} a person's seat, but it is recorded as {kinds[seat]!r}")
    out.extend(_label_problems(trace, n, reg))
    return out


def _config_problems(trace: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    """``config``'s description of the task against the task row (what ``end_game`` writes)."""
    from engine.model import Task, TaskError

    try:
        task = Task.from_row(trace["task"])
    except (TaskError, KeyError, TypeError):
        return []
    want = {"num_agents": task.num_agents, "seed": task.seed, "num_slots": task.num_slots,
            "num_meetings": len(task.meetings), "task_id": task.task_id}
    return [f"config.{k} records {cfg.get(k)!r} but the task gives {v!r}" for k, v in want.items()
            if k in cfg and cfg.get(k) != v]


def _who(t: tuple) -> str:
    typ, kind, model, variant = t
    return f"{typ!r} (kind {kind!r}, model {model!r}{f', variant {variant!r}' if variant else ''})"


def _marks(events: list[dict[str, Any]], seat: int, reg: dict[str, Any]) -> list[str]:
    """What each kind of seat leaves in its record (its kind's marks)."""
    kind = reg.get("kind")
    system = reg.get("system_prompt")
    ends = [e for e in events if e.get("type") in ("turn_end", "decide_end") and (e.get("data") or {}).get("agent_id") == seat]
    prompts = [(e.get("data") or {}).get("prompt_sent") for e in events
               if e.get("type") in _CALL_START and (e.get("data") or {}).get("agent_id") == seat]
    inputs = sum(1 for e in events if e.get("type") == "human_input" and (e.get("data") or {}).get("agent_id") == seat)
    if kind == "llm" and not (isinstance(system, str) and system.strip()):
        return [f"seat {seat} is recorded as an LLM seat but was briefed with no system prompt (every LLM seat is): "
                "a relabelled seat?"]
    if kind == "human" and ends and inputs == 0:
        return [f"seat {seat} is recorded as a person's seat but none of its {len(ends)} answers left a "
                "human_input event (every answer of a person does): a relabelled seat?"]
    if kind == "scripted" and (system is not None or any(p is not None for p in prompts) or inputs):
        return [f"seat {seat} is recorded as scripted but its record carries prompts or a person's input"]
    return []


def _label_problems(trace: dict[str, Any], n: int, reg: dict[int, dict[str, Any]]) -> list[str]:
    """The saved agents label (what reports credit the game to) against the seats' kinds."""
    label = (trace.get("saved") or {}).get("agents") if isinstance(trace.get("saved"), dict) else None
    if label is None:
        return []
    from personas.registry import parse_spec

    try:
        names = parse_spec(str(label), n)
    except Exception as exc:  # noqa: BLE001 - any unreadable label is one line
        return [f"the saved agents label {str(label)[:60]!r} cannot be read: {exc}"]
    out = []
    for seat, name in enumerate(names):
        r = reg.get(seat) or {}
        kind = "human" if name == "human" else "llm" if name.startswith("llm") else "scripted"
        if kind != r.get("kind") or (kind == "scripted" and name != r.get("agent_type")):
            out.append(f"the saved agents label calls seat {seat} {name!r}, but it is recorded as "
                       f"{r.get('agent_type')!r} (kind {r.get('kind')!r})")
    return out


def _project(ev: dict[str, Any]) -> tuple[Any, Any]:
    return ev.get("type"), ev.get("data")


def _describe(ev: dict[str, Any] | None) -> str:
    if ev is None:
        return "nothing"
    d = ev.get("data") or {}
    return f"{ev.get('type')} (round {d.get('round')}, turn {d.get('turn')}, agent {d.get('agent_id')})"


def _first_key(a: dict[str, Any], b: dict[str, Any]) -> str:
    keys = [k for k in list(a) + [k for k in b if k not in a] if a.get(k, ...) != b.get(k, ...)]
    return keys[0] if keys else "?"


async def _replay(trace: dict[str, Any], task: Any, fidelity: str) -> tuple[list[dict[str, Any]], list[Any]]:
    from engine.game import play_game
    from personas.registry import make_personas

    from .gamespec import game_config

    events = [e for e in trace.get("events") or [] if isinstance(e, dict)]
    cfg = trace.get("config") or {}
    phrasebook = bool(cfg.get("phrasebook"))
    seats: list[Any] = []
    for seat in range(task.num_agents):
        rec = Recorded(events, seat)
        if rec.kind == "scripted" and not phrasebook:
            seats.append(make_personas(str(rec._type), 1, fidelity=fidelity)[0])
        else:
            seats.append(rec)
    config = game_config(max_turns=cfg.get("max_turns_per_round", 15), retries=cfg.get("decision_retries", 3),
                         channels=tuple(cfg.get("channels") or ("dm",)), seat_timeout=cfg.get("seat_timeout"),
                         nosy=tuple(cfg.get("nosy_agent_ids") or ()), deterministic=True)
    kept = [e for e in events if e.get("type") not in _NOT_REPLAYED]
    sink = _Until(kept)
    try:
        await play_game(task, seats, config, sink, game_id=trace.get("game_id"))
    except _OutOfRecord:
        pass
    return [e for e in sink.events if e.get("type") not in _NOT_REPLAYED], seats


def _compare(trace: dict[str, Any], got: list[dict[str, Any]], seats: list[Any]) -> str | None:
    events = [e for e in trace.get("events") or [] if isinstance(e, dict) and e.get("type") not in _NOT_REPLAYED]
    stopped = bool(trace.get("stopped"))
    for i, want in enumerate(events):
        have = got[i] if i < len(got) else None
        if have is not None and _project(have) == _project(want):
            continue
        d = want.get("data") or {}
        where = f"event {want.get('seq')} {_describe(want)}"
        agent = d.get("agent_id")
        who = ""
        if isinstance(agent, int) and 0 <= agent < len(seats) and not isinstance(seats[agent], Recorded):
            who = f" (seat {agent} is scripted: re-playing {getattr(seats[agent], 'model', '?')} from the scenario)"
        if have is None:
            return f"{where}: the game played again from the trace's own replies ends before it{who}"
        if have.get("type") != want.get("type") or (have.get("data") or {}).get("agent_id") != agent:
            return f"{where}: the game played again from the trace's own replies gives {_describe(have)} here{who}"
        key = _first_key(d, have.get("data") or {})
        return f"{where}: its {key} is not what the game played again from the trace's own replies gives{who}"
    if len(got) > len(events) and not stopped:
        return (f"the game played again from the trace's own replies goes on after the trace's last event "
                f"({_describe(got[len(events)])}): events are missing")
    return None


async def replay_problems(trace: dict[str, Any]) -> list[str]:
    """The game played again (see the module docstring): [] when it gives the recorded events."""
    from engine.model import Task, TaskError

    row = trace.get("task")
    if not isinstance(row, dict):
        return []  # the authors' traces: no task row to play, the fold is their check
    try:
        task = Task.from_row(row)
    except TaskError:
        return []  # the fold says so
    problems: list[str] = []
    for fidelity in ("ours", "paper"):
        try:
            got, seats = await _replay(trace, task, fidelity)
        except Exception as exc:  # noqa: BLE001 - a record the re-play cannot read is one line
            return [f"the game cannot be played again from the trace ({type(exc).__name__}: {str(exc)[:160]})"]
        diff = _compare(trace, got, seats)
        if diff is None:
            return []
        problems = problems or [diff]
        if all(isinstance(s, Recorded) for s in seats):
            break  # no scripted seat: fidelity changes nothing
    return problems


async def record_problems(trace: dict[str, Any]) -> list[str]:
    """The seats' claims (:func:`seat_problems`), then the re-play (:func:`replay_problems`)."""
    row = trace.get("task")
    n = len(row.get("calendars") or []) if isinstance(row, dict) and isinstance(row.get("calendars"), list) else None
    if n is None:
        return []
    return seat_problems(trace, n) + await replay_problems(trace)



async def verify_game(trace: dict[str, Any]) -> Any:
    """What ``calbench import`` and ``calbench trace`` check: ``engine.verify.verify_trace``
    (the fold, the recorded metrics scored again) plus :func:`record_problems` (the seats,
    the game played again).  Raises ``engine.trace.TraceError`` for what cannot be folded."""
    from engine.verify import verify_trace

    res = verify_trace(trace)
    more = await record_problems(trace)
    if more:
        res.problems.extend(more)
        res.verified = False
    return res


async def check_record(trace: dict[str, Any]) -> list[str]:
    """What ``calbench rescore`` checks before it scores a game again: the record — the fold
    against what the trace recorded, the seats, the game played again — not the metrics
    (scoring them again is the point)."""
    from engine.trace import TraceError, fold_trace

    try:
        problems = list(fold_trace(trace).problems)
    except TraceError as exc:
        return [str(exc)]
    return problems + await record_problems(trace)
