"""The Inspect AI task ``calbench/calbench`` (extra ``inspect``; registered by the package entry point).

::

    inspect eval calbench/calbench --model mockllm/model -T tasks=canonical:0-1 -T seats=1 -T agents=imap

Each task of ``tasks`` is one sample: one game, played by the lab (``lab.runner.play_one``,
the engine's game loop, rules, scoring and privacy boundary — the same path as ``calbench
run``).  The model under evaluation (``--model``) sits in the seats named by ``seats`` (``1``
or ``1,3``) as CalBench's LLM seat (``personas/llm``), whose requests go through Inspect's
model API (:class:`calbench.inspect_client.InspectChatClient`): every Inspect provider works,
and Inspect's retries, limits, caching and transcript apply.  The other seats are ``agents``:
a scripted protocol for every seat (``imap``) or one entry per seat, where ``llm:PROVIDER/MODEL``
is another Inspect model (``llm:openai/gpt-4o-mini``).

The sample's messages are the game's (``lab.inspect_log.sample_messages``: the LLM seats'
prompts and replies, what the other seats said); the scores are the game's figures, one
scorer each with mean and stderr (``lab.inspect_log.SCORES``: coordination, excess_cost,
fairness, vps, vps_typed, vps_free_text, leaks).  ``db=PATH`` also saves every game in a
CalBench database (``calbench games --db PATH`` lists them).
"""

from __future__ import annotations

import functools
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ModelOutput, get_model
from inspect_ai.solver import Generate, TaskState, solver

from lab.inspect_log import STORE_KEY, chat_messages, game_scores, scorers, summary_line

__all__ = ["calbench", "play_calbench_game", "parse_seats"]


def parse_seats(seats: Any) -> tuple[int, ...]:
    """``1``, ``"1,3"``, ``[1, 3]`` -> ``(1, 3)``; a ValueError in one line otherwise."""
    items = seats if isinstance(seats, (list, tuple)) else str(seats).replace(" ", "").split(",")
    try:
        out = tuple(sorted({int(s) for s in items if str(s) != ""}))
    except ValueError:
        raise ValueError(f"seats: give seat numbers like 1 or 1,3, not {seats!r}") from None
    if not out or any(s < 0 for s in out):
        raise ValueError(f"seats: give seat numbers like 1 or 1,3, not {seats!r}")
    return out


@task
def calbench(tasks: str = "canonical:0-9", seats: Any = 1, agents: str = "imap", channels: str = "dm",
             max_turns: int = 15, retries: int = 3, structured: str = "auto", max_tokens: int = 1024,
             db: str | None = None) -> Task:
    """CalBench games with the model under evaluation in ``seats`` (see the module docstring).

    Args:
        tasks: task reference (``canonical:0-9``, ``seed:7``, ``FILE.jsonl``).
        seats: the seat(s) the evaluated model plays, e.g. ``1`` or ``1,3``.
        agents: the other seats: one scripted protocol for all, or one entry per seat
            (``llm:PROVIDER/MODEL`` for another Inspect model).
        channels: message channels, comma separated (``dm``, ``participant_groupchat``, ``all_groupchat``).
        max_turns: CHEAP_TALK turns per round at most.
        retries: DECISION retries after a rejected batch.
        structured: the LLM seat's reply format (``auto``, ``json_schema``, ``json_object``, ``off``).
        max_tokens: the LLM seat's reply budget per request.
        db: also save every game in this CalBench database.
    """
    chans = tuple(c.strip() for c in str(channels).split(",") if c.strip())
    plan = _plan(str(tasks), str(agents), chans, int(max_turns), int(retries))
    model_seats = parse_seats(seats)
    for t in plan.tasks:
        if max(model_seats) >= t.num_agents:
            raise ValueError(f"seats {','.join(map(str, model_seats))}: task {t.task_id} has seats 0-{t.num_agents - 1}")
    samples = [Sample(id=f"{i}:{t.task_id}", input=f"CalBench game {t.task_id}: the model plays seat(s) "
                      f"{', '.join(map(str, model_seats))} of {t.num_agents}",
                      metadata={"task_id": t.task_id, "index": i, "seats": list(model_seats), "agents": str(agents),
                                "cost_mode": t.cost_mode})
               for i, t in enumerate(plan.tasks)]
    return Task(dataset=MemoryDataset(samples, name=f"calbench {tasks}"),
                solver=play_calbench_game(str(tasks), str(agents), list(model_seats), channels=list(chans),
                                          max_turns=int(max_turns), retries=int(retries), structured=str(structured),
                                          max_tokens=int(max_tokens), db=db),
                scorer=scorers(), name="calbench")


@functools.lru_cache(maxsize=8)
def _plan(tasks: str, agents: str, channels: tuple[str, ...], max_turns: int, retries: int) -> Any:
    """``calbench run``'s plan of the suite (``lab.runplan.plan_run``: tasks resolved, agents parsed once)."""
    from lab.runplan import plan_run

    return plan_run(tasks, agents, channels=channels, max_turns=max_turns, retries=retries)


@solver
def play_calbench_game(tasks: str, agents: str, model_seats: list[int], channels: list[str] | None = None,
                       max_turns: int = 15, retries: int = 3, structured: str = "auto", max_tokens: int = 1024,
                       db: str | None = None):
    """Play the sample's game with the evaluated model in ``model_seats`` (``lab.runner.play_one``)."""
    plan = _plan(tasks, agents, tuple(channels or ("dm",)), max_turns, retries)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        from engine.gameid import game_id
        from lab.runner import RunSettings, play_one
        from personas.llm.factory import make_llm_persona
        from personas.llm.settings import LLMSettings
        from personas.registry import make_personas

        from .inspect_client import InspectChatClient

        task = plan.tasks[int(state.metadata["index"])]
        names = plan.spec.for_seats(task.num_agents, allow_bare_llm=True)
        clients: list[InspectChatClient] = []

        def llm_seat(model: Any):
            client = InspectChatClient(model)
            clients.append(client)
            # Inspect retries and times out the request; ours would only repeat it
            settings = LLMSettings(model=str(model), retries=0, timeout=3600.0, structured=structured,
                                   max_tokens=max_tokens)
            return make_llm_persona(f"llm:{model}", settings, client=client)

        def seats_for(_task) -> list[Any]:
            out = []
            for seat, s in enumerate(names):
                if seat in model_seats:
                    out.append(llm_seat(get_model()))
                elif s.kind == "llm":
                    out.append(llm_seat(get_model(s.model)))
                else:
                    out.append(make_personas(s.name, 1)[0])
            return out

        seats_for.spec = ",".join(f"llm:{get_model()}" if i in model_seats else s.name  # the label it is filed under
                                  for i, s in enumerate(names))
        settings = RunSettings(channels=plan.channels, max_turns=plan.max_turns, retries=plan.retries)
        gid = game_id("calbench-inspect", deterministic=False)
        traces: list[dict[str, Any]] = []

        async def keep(trace: dict[str, Any]) -> None:
            traces.append(trace)

        store = None
        if db:
            from saves.store import Store

            store = await Store.open(db)
        try:
            summary = await play_one(task, gid, seats_for, settings=settings, store=store, stream=store is not None,
                                     saver=None if store is not None else keep)
            if store is not None:
                traces.append(await store.load_trace(gid))
        finally:
            if store is not None:
                await store.close()
        limit = next((c.limit for c in clients if c.limit is not None), None)
        if limit is not None:  # Inspect's limit ends the sample as Inspect ends it
            raise limit
        if summary.status != "completed":
            raise RuntimeError(f"game {gid[:8]} of task {task.task_id} failed: {summary.error}")
        trace = traces[0]
        state.messages = chat_messages(trace)
        state.store.set(STORE_KEY, {"game_id": gid, "scores": game_scores(trace)})
        state.output = ModelOutput.from_content(str(get_model()), summary_line(trace))
        return state

    return solve
