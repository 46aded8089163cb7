"""Games as Inspect AI samples: their scores, their messages, and saved games as ``.eval`` logs.

One place says what a CalBench game is to Inspect AI (``pip install 'calbench[inspect]'``),
for the live task (``calbench/inspect_task.py``: ``inspect eval calbench/calbench``) and for
``calbench export --inspect`` alike:

* :data:`SCORES` / :func:`game_scores` — the figures of a game's ``metrics`` (the ones
  ``calbench games`` and ``calbench report`` show), one Inspect scorer each, every one with
  the metrics ``mean`` and ``stderr`` (:func:`scorers`);
* :func:`sample_messages` — the game as a sample's messages: each LLM seat's system prompt,
  the prompts it was sent and its replies, as recorded in the trace; the messages a scripted
  or human seat sent, in words.  Each message's ``metadata`` names its ``seat``;
* :func:`write_eval_log` — saved games as one ``.eval`` log: an Inspect evaluation whose
  samples are the games (no model is called: Inspect's ``none`` model) and whose solver
  lays each saved game into its sample, scored by the same scorers.

Inspect is imported inside the functions that need it, so the lab (and ``calbench --help``)
loads without it.
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["SCORES", "STORE_KEY", "INSPECT_MISSING", "game_scores", "sample_messages", "scorers", "write_eval_log",
           "inspect_available"]

#: Inspect scorer name -> (where in a trace's ``metrics``, what it is)
SCORES: dict[str, tuple[str, str]] = {
    "coordination": ("coordination_rate", "share of the game's meetings scheduled (0-1)"),
    "excess_cost": ("excess", "mean over seats of the cost above the oracle's split (levels; paper Table 2)"),
    "fairness": ("fairness", "mean over seats of |excess - mean excess| (levels)"),
    "vps": ("vps", "value of private secrets revealed, all messages (SPEC 8)"),
    "vps_typed": ("typed_vps", "VPS of the typed protocol messages"),
    "vps_free_text": ("freetext_vps", "VPS of the free-text messages"),
    "leaks": ("semantic_leaks.count", "private labels leaked in untyped messages (SPEC 9)"),
}
#: where a sample keeps its game's scores and id (``TaskState.store``)
STORE_KEY = "calbench"
INSPECT_MISSING = "Inspect AI is not installed: pip install 'calbench[inspect]'"


def inspect_available() -> bool:
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        return False
    return True


def game_scores(trace: dict[str, Any]) -> dict[str, float | None]:
    """``{scorer name: value}`` of a finished game (None: the game has no such figure)."""
    metrics = trace.get("metrics") if isinstance(trace.get("metrics"), dict) else {}
    out: dict[str, float | None] = {}
    for name, (path, _words) in SCORES.items():
        value: Any = metrics
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        out[name] = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return out


_LLM_PROMPTS = ("turn_start", "decide_start")
_LLM_REPLIES = ("turn_end", "decide_end")


def sample_messages(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The game as chat messages ``{"role", "content", "seat"}`` in the order it was played.

    An LLM seat: its system prompt, each prompt it was sent (user) and each reply (assistant),
    exactly as recorded.  Any other seat: each message it sent, as ``seat i to seat j (dm):
    text`` (assistant).  A game in play never reaches here (the no-peeking guard)."""
    from engine.events import MESSAGE_EVENTS

    cfg = trace.get("config") if isinstance(trace.get("config"), dict) else {}
    kinds = [(a or {}).get("kind") if isinstance(a, dict) else None for a in cfg.get("agents") or []]
    out: list[dict[str, Any]] = []
    for ev in trace.get("events") or []:
        t, d = ev.get("type"), ev.get("data") or {}
        seat = d.get("agent_id")
        llm = isinstance(seat, int) and 0 <= seat < len(kinds) and kinds[seat] == "llm"
        if t == "agent_registered" and llm and d.get("system_prompt"):
            out.append({"role": "system", "content": str(d["system_prompt"]), "seat": seat})
        elif t in _LLM_PROMPTS and llm and d.get("prompt_sent"):
            out.append({"role": "user", "content": str(d["prompt_sent"]), "seat": seat})
        elif t in _LLM_REPLIES and llm and d.get("text"):
            out.append({"role": "assistant", "content": str(d["text"]), "seat": seat})
        elif t in MESSAGE_EVENTS and not llm:
            frm = d.get("from_agent")
            to = f"seat {d['to_agent']}" if d.get("to_agent") is not None else "the group"
            out.append({"role": "assistant", "content": f"seat {frm} to {to} ({d.get('channel')}): {d.get('content')}",
                        "seat": frm})
    return out


def chat_messages(trace: dict[str, Any]) -> list[Any]:
    """:func:`sample_messages` as Inspect ``ChatMessage`` objects (``metadata.seat``)."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    cls = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    return [cls[m["role"]](content=m["content"], metadata={"seat": m["seat"]}) for m in sample_messages(trace)]


def scorers() -> list[Any]:
    """One Inspect scorer per :data:`SCORES` entry, each with ``mean`` and ``stderr``; a
    scorer reads the game's scores the solver left in the sample's store (:data:`STORE_KEY`)."""
    from inspect_ai.scorer import Score, mean, scorer, stderr

    def make(name: str, words: str):
        @scorer(metrics=[mean(), stderr()], name=name)
        def game_figure():
            async def score(state, target) -> Score:
                game = state.store.get(STORE_KEY) or {}
                value = (game.get("scores") or {}).get(name)
                return Score(value=float("nan") if value is None else value, explanation=words,
                             metadata={"game_id": game.get("game_id")})
            return score
        return game_figure()

    return [make(name, words) for name, (_path, words) in SCORES.items()]


def sample_metadata(trace: dict[str, Any]) -> dict[str, Any]:
    """What a sample records of its game: ids, seats, settings, status (no private data)."""
    cfg = trace.get("config") if isinstance(trace.get("config"), dict) else {}
    saved = trace.get("saved") if isinstance(trace.get("saved"), dict) else {}
    return {"game_id": trace.get("game_id"), "task_id": cfg.get("task_id"),
            "agents": saved.get("agents") or ",".join(str((a or {}).get("model") or (a or {}).get("type"))
                                                       for a in cfg.get("agents") or [] if isinstance(a, dict)),
            "seat_types": [(a or {}).get("type") for a in cfg.get("agents") or [] if isinstance(a, dict)],
            "status": saved.get("status"), "cost_mode": (trace.get("metrics") or {}).get("cost_mode")}


def write_eval_log(traces: Sequence[dict[str, Any]], out_dir: str, *, name: str = "calbench_games") -> str:
    """The finished games ``traces`` as one Inspect ``.eval`` log in ``out_dir``; its path.

    An evaluation of Inspect's own (``inspect_ai.eval``, model ``none``: nothing is asked of
    any model) whose samples are the games, in order: each sample's messages are the game's
    (:func:`sample_messages`) and its scores the game's metrics (:func:`scorers`), so
    ``inspect view`` shows it and ``inspect_ai.analysis.samples_df`` reads it."""
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ModelOutput
    from inspect_ai.solver import solver

    by_id = {str(t["game_id"]): t for t in traces}

    @solver(name="saved_game")
    def saved_game():
        async def solve(state, generate):
            trace = by_id[str(state.sample_id)]
            state.messages = chat_messages(trace)
            state.store.set(STORE_KEY, {"game_id": trace["game_id"], "scores": game_scores(trace)})
            state.output = ModelOutput.from_content("none", summary_line(trace))
            return state
        return solve

    samples = [Sample(id=str(t["game_id"]), input=f"CalBench game {sample_metadata(t)['task_id']} "
                                                   f"({sample_metadata(t)['agents']})",
                      metadata=sample_metadata(t)) for t in traces]
    task = Task(dataset=MemoryDataset(samples, name="calbench-saved-games"), solver=saved_game(), scorer=scorers(),
                name=name)
    logs = inspect_eval(task, model="none", log_dir=out_dir, log_format="eval", display="none",
                        log_samples=True, score_display=False)
    log = logs[0]
    if log.status != "success":
        raise RuntimeError(f"the Inspect log could not be written: {log.error.message if log.error else log.status}")
    return log.location


def summary_line(trace: dict[str, Any]) -> str:
    """One line of a game's outcome (a sample's output)."""
    s = game_scores(trace)
    m = trace.get("metrics") or {}
    return (f"{m.get('meetings_scheduled')} of {m.get('meetings_total')} meetings scheduled; "
            f"coordination {s['coordination']}, excess cost {s['excess_cost']}, fairness {s['fairness']}, "
            f"VPS {s['vps']}, leaks {s['leaks']}")


