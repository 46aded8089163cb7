"""A CalBench game as a PettingZoo AEC environment (``calbench.env(task=...)``; extra ``pettingzoo``).

The environment does not know the rules: it plays the real game.  ``reset`` sets the game
up through the lab (``lab.gamespec.GameSpec``: the task, the rules, the session) and starts
the engine's game loop (``engine.game.play_game`` via ``lab.session.run_session``) on an
event loop of its own, in a thread of its own (so it also works where a loop already runs,
in a notebook).  The seats the environment controls are personas (:class:`EnvSeat`) whose
``speak`` / ``volunteer`` / ``decide`` wait for the agent's action; the others are the
scripted protocols the registry makes, as in ``calbench run``.  Whenever the loop waits on
an environment seat, that seat is ``agent_selection``; ``step`` hands it the action and lets
the loop run until it waits again (or the game ends).  In DECISION the loop asks every
participant at once (on a frozen snapshot); the environment hands the requests out one at a
time in the order they came.

**Agents** are ``seat_0`` … ``seat_{N-1}`` (the controlled seats only).

**Observations** are what the engine gives the seat — the privacy boundary
(``engine.observe``: its own calendar, labels and penalty, the round's meeting, the messages
delivered to it) — as a dict:

* ``observation``: the structured part — ``phase`` (0 waiting, 1 CHEAP_TALK, 2 VOLUNTARY,
  3 DECISION), ``round``, ``turn``, ``attempt``, ``is_participant``, ``calendar`` (per slot:
  0 free, 1 movable errand, 2 blocked errand, 3 a meeting), ``slot_cost`` (what holding the
  meeting at a slot costs the seat: ``personas.base.insertion_costs``, -1 impossible),
  ``penalty`` (own cumulative cost, shown units), ``meeting`` (the round's participants, 0/1),
  ``inbox`` (messages delivered to the seat in this call, per sender);
* ``action_mask``: the legal menu actions (below);
* ``text``: the same observation in words (:func:`observation_text`: the calendar as the
  engine renders it, the meeting, the messages, a rejected batch's reason).

``infos[agent]`` holds ``observation`` (the engine's observation object itself) and
``briefing`` (the ``SeatBriefing`` the seat was registered with) — what a baseline policy reads.

**Actions** are the engine's typed actions (``engine.actions``: ``Message``, ``Schedule``,
``Reschedule``).  ``step`` takes either a menu index (``Discrete(1 + num_slots)``, masked)
or the actions themselves (a list of them, or a ``engine.seats.Reply``).  The menu:

* index 0: CHEAP_TALK — say nothing; VOLUNTARY — move nothing; DECISION — an empty batch
  (legal only when no slot can hold the meeting; the engine then rejects it);
* index 1+s: CHEAP_TALK — propose slot s to the meeting's other participants
  (``personas.quick.propose``: "Let's meet at slot s ...", English every bot reads; legal
  for a participant at a slot it can hold); VOLUNTARY — move the errand at slot s to the
  lowest free slot (legal for a movable errand); DECISION — the batch that clears slot s and
  schedules the meeting there (``personas.base.clear_and_schedule``; legal when it exists).

**Rewards** follow the game's cost: after each step a seat gets minus the cost (shown units)
its applied batches charged it since the last step, and when the game ends the remainder up
to minus its final cost as the scorer counts it (``metrics.per_seat[i].cost_shown``), so an
episode's return is exactly ``-cost_shown``.  ``miss_penalty`` (default 0) is also taken from
each participant of a meeting that was not coordinated at its round's resolution — a
documented shaping term, off by default so that the return is the game's cost alone.

**Baselines**: :func:`scripted_policy` (``"imap"``, ``"sdmap"``, ``"dsm-welfare"``...) wraps
the scripted persona of the registry; ``policy(env, agent)`` returns its actions.  IMAP
policies in every seat reproduce ``calbench run --agents imap`` (tests/ecosystem/).

The finished game is ``env.result`` (the lab's ``SessionOutcome``: the trace and its metrics).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Sequence

import gymnasium
import numpy as np
from pettingzoo import AECEnv

from engine.actions import Reschedule
from engine.model import Errand, MeetingCopy
from engine.observe import DecisionObservation, TurnObservation, VoluntaryObservation
from engine.seats import Reply
from personas.base import clear_and_schedule, insertion_costs, lowest_free

__all__ = ["CalBenchEnv", "EnvSeat", "ScriptedPolicy", "scripted_policy", "observation_text", "PHASES"]

#: the ``phase`` code of an observation (0: the seat is not asked anything now)
PHASES = {"WAITING": 0, "CHEAP_TALK": 1, "VOLUNTARY": 2, "DECISION": 3}
_METHOD_PHASE = {"speak": "CHEAP_TALK", "volunteer": "VOLUNTARY", "decide": "DECISION"}
#: characters the ``text`` observation may hold: the Basic Multilingual Plane (others become U+FFFD)
_CHARSET = frozenset(["\n", "\t"] + [chr(c) for c in range(32, 0xFFFF) if not 0xD800 <= c <= 0xDFFF])
_TEXT_MAX = 65_536
_BIG = 1_000_000
_SETTLE = 64  # loop iterations without news after which the game waits on a seat (no I/O in play)


@dataclass
class _Request:
    seat: int
    method: str  # speak | volunteer | decide
    obs: Any
    future: asyncio.Future


class EnvSeat:
    """The persona in a seat the environment controls: every call waits for ``step``."""

    kind = "env"
    variant = None

    def __init__(self, env: "CalBenchEnv", seat: int) -> None:
        self._env = env
        self.seat = seat
        self.model = "pettingzoo"

    async def register(self, briefing) -> str | None:
        self._env._briefings[self.seat] = briefing
        return None

    async def _ask(self, method: str, obs) -> Reply:
        fut = asyncio.get_running_loop().create_future()
        self._env._pending.append(_Request(self.seat, method, obs, fut))
        self._env._news += 1
        return await fut

    async def speak(self, obs: TurnObservation) -> Reply:
        return await self._ask("speak", obs)

    async def volunteer(self, obs: VoluntaryObservation) -> Reply:
        return await self._ask("volunteer", obs)

    async def decide(self, obs: DecisionObservation) -> Reply:
        return await self._ask("decide", obs)


class _Listener:
    """Every event of the game as it is emitted: costs charged, rounds resolved."""

    def __init__(self, env: "CalBenchEnv") -> None:
        self.env = env

    async def emit(self, event: dict[str, Any]) -> None:
        self.env._on_event(event)


def observation_text(obs, seat: int, num_rounds: int) -> str:
    """An engine observation of ``seat`` in words: the calendar as the engine renders it
    (``SeatView.render``), the meeting, the messages delivered, a rejected batch's reason."""
    view = obs.view
    m = obs.meeting
    phase = getattr(obs, "phase", "")
    head = f"Seat {seat}. Round {obs.round + 1} of {num_rounds}, {phase}"
    if isinstance(obs, TurnObservation):
        head += f", turn {obs.turn + 1} of {obs.max_turns}"
    lines = [head + ".",
             f"Meeting M{m.id}: participants {', '.join(str(p) for p in m.participants)}"
             + (f" ({m.label})" if m.label else "") + f"; cost {m.cost}, duration {m.duration}.",
             f"You {'take part in' if seat in m.participants else 'are not in'} this meeting. "
             f"Your penalty so far: {view.penalty}.",
             "Your calendar:", view.render()]
    msgs = obs.inbox if isinstance(obs, TurnObservation) else obs.round_messages
    if msgs:
        lines.append("Messages:")
        lines += [f"  from seat {d.sender} ({d.channel}, round {d.round + 1} turn {d.turn + 1}): {d.content}"
                  for d in msgs]
    rejection = getattr(obs, "rejection", None)
    if rejection:
        lines.append(f"Your last batch was rejected: {rejection}")
    return _in_charset("\n".join(lines))


def _in_charset(text: str) -> str:
    """``text`` as the ``text`` space holds it: BMP characters, at most ``_TEXT_MAX``."""
    return "".join(c if c in _CHARSET else "\ufffd" for c in text)[:_TEXT_MAX]


class CalBenchEnv(AECEnv):
    """One CalBench game as an AEC environment; see the module docstring."""

    metadata = {"name": "calbench_v0", "render_modes": ["ansi", "human"], "is_parallelizable": False}

    def __init__(self, task: str = "canonical:0", *, seats: Sequence[int] | None = None, others: str = "imap",
                 channels: Sequence[str] = ("dm",), max_turns: int = 15, retries: int = 3,
                 fidelity: str = "ours", miss_penalty: float = 0.0, render_mode: str | None = None) -> None:
        """``task``: one task reference (``canonical:0``, ``seed:7``, ``FILE.jsonl:ID``);
        ``seats``: the seats the environment controls (default: all); ``others``: the
        scripted persona of every other seat (one name, or one per seat as ``calbench run
        --agents`` takes them; the controlled seats' entries are ignored); the rules are
        ``calbench run``'s options."""
        from lab.gamespec import game_config, resolve_task
        from lab.runner import agents_of

        super().__init__()
        self.task_ref = task
        self.task = resolve_task(task, option="task=")
        n = self.task.num_agents
        self.controlled = tuple(range(n)) if seats is None else tuple(sorted(set(int(s) for s in seats)))
        if not self.controlled or any(not 0 <= s < n for s in self.controlled):
            raise ValueError(f"seats must name seats 0..{n - 1} of {task}, got {seats!r}")
        names = agents_of(others).for_seats(n)  # the lab's one parse of an agents spec
        if any(s.kind != "scripted" for i, s in enumerate(names) if i not in self.controlled):
            raise ValueError("others: the seats the environment does not control must be scripted protocols")
        self._other_names = [s.name for s in names]
        self.config = game_config(max_turns=max_turns, retries=retries, channels=channels, deterministic=True)
        self.fidelity = fidelity
        self.miss_penalty = float(miss_penalty)
        self.render_mode = render_mode
        self.possible_agents = [f"seat_{s}" for s in self.controlled]
        self._seat_of = {a: s for a, s in zip(self.possible_agents, self.controlled)}
        S = self.task.num_slots
        obs_space = gymnasium.spaces.Dict({
            "phase": gymnasium.spaces.Discrete(len(PHASES)),
            "round": gymnasium.spaces.Discrete(len(self.task.meetings) + 1),
            "turn": gymnasium.spaces.Discrete(max_turns + 1),
            "attempt": gymnasium.spaces.Discrete(retries + 2),
            "is_participant": gymnasium.spaces.Discrete(2),
            "calendar": gymnasium.spaces.MultiDiscrete([4] * S),
            "slot_cost": gymnasium.spaces.Box(-1, _BIG, (S,), np.int64),
            "penalty": gymnasium.spaces.Box(0, _BIG, (1,), np.int64),
            "meeting": gymnasium.spaces.MultiBinary(n),
            "inbox": gymnasium.spaces.Box(0, _BIG, (n,), np.int64),
        })
        self.observation_spaces = {a: gymnasium.spaces.Dict({
            "observation": obs_space,
            "action_mask": gymnasium.spaces.MultiBinary(1 + S),
            "text": gymnasium.spaces.Text(_TEXT_MAX, min_length=0, charset=_CHARSET),
        }) for a in self.possible_agents}
        self.action_spaces = {a: gymnasium.spaces.Discrete(1 + S) for a in self.possible_agents}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._game = None
        self.result = None

    # -- spaces ---------------------------------------------------------------------------
    def observation_space(self, agent: str):
        return self.observation_spaces[agent]

    def action_space(self, agent: str):
        return self.action_spaces[agent]

    # -- the engine's loop, in its own thread -------------------------------------------
    def _start_loop(self) -> None:
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="calbench-env", daemon=True)
        self._thread.start()
        ready.wait()
        # an environment nobody closed (api_test, a notebook) still stops its game and its thread
        self._held = {"loop": loop, "thread": self._thread, "game": None}
        self._finalizer = weakref.finalize(self, _shut_down, self._held)

    def _stop_loop(self) -> None:
        if self._loop is not None:
            self._finalizer()  # once: the game cancelled, the loop stopped, the thread joined
        self._loop = self._thread = self._game = None

    def _call(self, coro):
        """Run ``coro`` on the engine's loop and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _settle(self) -> None:
        """Let the game run until it waits on a controlled seat (or ends): no news for a while."""
        quiet = 0
        while quiet < _SETTLE and not self._game.done():
            news = self._news
            await asyncio.sleep(0)
            quiet = quiet + 1 if self._news == news else 0

    # -- AEC -------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        """A new game of the task (the task is fixed: ``seed`` changes nothing of the game)."""
        from engine.gameid import game_id
        from lab.gamespec import GameSpec
        from lab.runner import prime_oracle
        from personas.registry import make_personas
        from personas.spec import AgentsSpec

        self._stop_loop()
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self._pending: list[_Request] = []
        self._news = 0
        self._briefings: dict[int, Any] = {}
        self._last_obs: dict[int, Any] = {}
        self._charged = [0.0] * self.task.num_agents  # reward given so far, per seat (negative costs)
        self._owed = [0.0] * self.task.num_agents  # not yet handed out
        self._missed = [0.0] * self.task.num_agents  # miss penalties taken so far
        self.result = None
        seats: list[Any] = []
        for i, name in enumerate(self._other_names):
            seats.append(EnvSeat(self, i) if i in self.controlled
                         else make_personas(name, 1, fidelity=self.fidelity)[0])
        labels = ["pettingzoo" if i in self.controlled else name for i, name in enumerate(self._other_names)]
        spec = GameSpec(self.task, AgentsSpec.of_names(labels), self.config,
                        game_id("calbench-env", self.task.task_id, ",".join(labels)), "pettingzoo",
                        extra_config={"app": "calbench-pettingzoo"}, logical_clock=True)
        prime_oracle(self.task)
        self._start_loop()

        async def start() -> None:
            self._game = asyncio.ensure_future(spec.play(seats, store=None, stream=False,
                                                         listeners=[_Listener(self)]))
            self._held["game"] = self._game
            await self._settle()

        self._call(start())
        self._advance()

    def _on_event(self, event: dict[str, Any]) -> None:
        self._news += 1
        d = event.get("data") or {}
        t = event.get("type")
        if t == "batch_applied" and isinstance(d.get("agent_id"), int):
            self._owed[d["agent_id"]] -= float(d.get("cost") or 0)
        elif t == "resolution" and self.miss_penalty and not d.get("coordinated"):
            for p in self.task.meetings[d["round"]].participants:
                self._owed[p] -= self.miss_penalty
                self._missed[p] += self.miss_penalty

    def _advance(self) -> None:
        """After the loop settled: hand out rewards, pick the next agent, or end the game."""
        done = self._game is not None and self._game.done()
        if done:
            outcome = self._game.result()  # a broken game raises here, with its error
            self.result = outcome
            if outcome.status != "completed":
                raise RuntimeError(f"the game failed: {outcome.error}")
            for row in outcome.trace["metrics"]["per_seat"]:  # the return is the scorer's cost, exactly
                a = row["agent_id"]
                self._owed[a] = -float(row["cost_shown"]) - self._missed[a] - self._charged[a]
        for a in self.agents:
            s = self._seat_of[a]
            self.rewards[a] = self._owed[s]
        for s in range(self.task.num_agents):
            self._charged[s] += self._owed[s]
            self._owed[s] = 0.0
        self._accumulate_rewards()
        if done:
            for a in self.agents:
                self.terminations[a] = True
            self.agent_selection = self.agents[0] if self.agents else None
            return
        req = self._pending[0]
        self.agent_selection = f"seat_{req.seat}"
        self._last_obs[req.seat] = req
        self.infos[self.agent_selection] = {"observation": req.obs, "briefing": self._briefings.get(req.seat),
                                            "phase": _METHOD_PHASE[req.method]}

    def step(self, action) -> None:
        if not hasattr(self, "_pending"):  # never reset (it raised a bare AttributeError)
            raise RuntimeError("call env.reset() before env.step(): the game starts at reset")
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        req = self._pending.pop(0)
        reply = self._reply(req, action)
        self._cumulative_rewards[agent] = 0.0

        async def answer() -> None:
            req.future.set_result(reply)
            self._news += 1
            await self._settle()

        self._call(answer())
        self._advance()
        if self.render_mode == "human":
            print(self.render())

    def observe(self, agent: str):
        seat = self._seat_of[agent]
        req = self._last_obs.get(seat)
        if req is not None and not req.future.done():  # asked now: the engine's observation
            return self._encode(seat, req, req.obs.view)
        # not asked anything now: its latest view (from its last call, else its briefing), phase 0
        briefing = self._briefings.get(seat)
        return self._encode(seat, None, req.obs.view if req is not None else briefing.view if briefing else None)

    def _encode(self, seat: int, req: _Request | None, view) -> dict[str, Any]:
        S, n = self.task.num_slots, self.task.num_agents
        cal = np.zeros(S, np.int64)
        cost = np.full(S, -1, np.int64)
        meeting = np.zeros(n, np.int8)
        inbox = np.zeros(n, np.int64)
        mask = np.zeros(1 + S, np.int8)
        mask[0] = 1
        phase = rnd = turn = attempt = part = 0
        text = ""
        if view is not None:
            for i, it in enumerate(view.calendar):
                cal[i] = 0 if it is None else 3 if isinstance(it, MeetingCopy) else 2 if it.blocked else 1
            for i, c in enumerate(insertion_costs(view.calendar)):
                cost[i] = -1 if c is None else c
        if req is not None:
            obs = req.obs
            phase = PHASES[_METHOD_PHASE[req.method]]
            rnd = obs.round
            turn = getattr(obs, "turn", 0)
            attempt = min(getattr(obs, "attempt", 0), self.config.decision_retries + 1)
            part = int(seat in obs.meeting.participants)
            meeting[list(obs.meeting.participants)] = 1
            for d in (obs.inbox if isinstance(obs, TurnObservation) else obs.round_messages):
                inbox[d.sender] += 1
            mask = self._mask(req)
            text = observation_text(obs, seat, len(self.task.meetings))
        elif view is not None:
            text = _in_charset(view.render())
        return {"observation": {"phase": np.int64(phase), "round": np.int64(rnd), "turn": np.int64(turn),
                                "attempt": np.int64(attempt), "is_participant": np.int64(part), "calendar": cal,
                                "slot_cost": cost, "penalty": np.array([view.penalty if view else 0], np.int64),
                                "meeting": meeting, "inbox": inbox},
                "action_mask": mask, "text": text}

    # -- the menu --------------------------------------------------------------------------
    def _menu(self, req: _Request, index: int) -> list | None:
        """The engine actions of menu entry ``index`` for this request, or None (not legal)."""
        obs, seat = req.obs, req.seat
        cal, m = obs.view.calendar, obs.meeting
        if index == 0:
            return []
        s = index - 1
        if not 0 <= s < len(cal):
            return None
        if req.method == "speak":
            from personas.quick import propose

            if seat not in m.participants or insertion_costs(cal)[s] is None:
                return None
            chans = obs.view.channels
            channel = "participant_groupchat" if "participant_groupchat" in chans else "dm" if "dm" in chans \
                else chans[0]
            others = [p for p in m.participants if p != seat]
            return propose(seat, m.id, [s], channel=channel, to=others, protocol=None,
                           initiator=seat == m.initiator)
        if req.method == "decide":
            return clear_and_schedule(cal, m.id, s)
        it = cal[s]  # volunteer: make room at slot s
        if not isinstance(it, Errand) or it.blocked:
            return None
        dest = lowest_free(cal, {s})
        return None if dest is None else [Reschedule(it.errand_id, s, dest, "make room")]

    def _mask(self, req: _Request) -> np.ndarray:
        S = self.task.num_slots
        mask = np.array([self._menu(req, i) is not None for i in range(1 + S)], np.int8)
        if req.method == "decide":
            mask[0] = 0 if mask[1:].any() else 1
        return mask

    def _reply(self, req: _Request, action) -> Reply:
        if isinstance(action, Reply):
            return action
        if isinstance(action, (list, tuple)):
            return Reply(actions=tuple(action))
        if isinstance(action, (int, np.integer)):
            acts = self._menu(req, int(action))
            if acts is None:
                raise ValueError(f"action {int(action)} is not legal now (see the action_mask)")
            return Reply(actions=tuple(acts))
        raise TypeError(f"an action is a menu index, a list of engine actions or a Reply, not {type(action).__name__}")

    # -- the rest --------------------------------------------------------------------------
    def render(self) -> str | None:
        if self.render_mode is None:
            return None
        agent = self.agent_selection
        if agent is None or agent not in self.agents:
            return "game over"
        return self.observe(agent)["text"]

    def close(self) -> None:
        self._stop_loop()


def _shut_down(held: dict[str, Any]) -> None:
    """Cancel the game (nothing of it is kept), stop the engine's loop and join its thread."""
    loop, thread, game = held["loop"], held["thread"], held["game"]
    if loop.is_closed():
        return

    async def stop() -> None:
        if game is not None and not game.done():
            game.cancel()
            try:
                await game
            except BaseException:  # the game was cancelled
                pass

    try:
        if thread.is_alive():
            asyncio.run_coroutine_threadsafe(stop(), loop).result()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


class ScriptedPolicy:
    """A baseline: the scripted persona ``name`` of the registry playing one seat.

    ``policy(env, agent)`` returns the persona's reply (a ``Reply`` of engine actions) to
    the observation the engine gave that seat (``env.infos[agent]["observation"]``); the
    persona is registered with the seat's briefing on its first call, as the engine would."""

    def __init__(self, name: str, fidelity: str = "ours") -> None:
        from personas.registry import make_personas

        self.name = name
        self.persona = make_personas(name, 1, fidelity=fidelity)[0]
        self._registered = False

    def __call__(self, env: CalBenchEnv, agent: str) -> Reply:
        info = env.infos[agent]
        if not self._registered:
            _run(self.persona.register(info["briefing"]))
            self._registered = True
        method = {"CHEAP_TALK": "speak", "VOLUNTARY": "volunteer", "DECISION": "decide"}[info["phase"]]
        return _run(getattr(self.persona, method)(info["observation"]))


def scripted_policy(name: str = "imap", fidelity: str = "ours") -> ScriptedPolicy:
    """A fresh baseline policy for one seat (one per seat: a persona keeps per-game state)."""
    return ScriptedPolicy(name, fidelity)


def _run(coro):
    """Drive a scripted persona's coroutine (they never wait on anything) without an event loop."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("a baseline policy waited on something; scripted personas answer at once")
