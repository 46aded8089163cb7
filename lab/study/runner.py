"""One participant's way through a study, step by step, into the database.

A participant's plan is a list of named steps fixed when they first arrive::

    consent, instructions, quiz, questionnaire:pre, game:0 (practice), game:1,
    questionnaire:game@1, game:2, questionnaire:game@2, questionnaire:post, thanks

:class:`StudyRunner` plays the steps from the first one not yet complete, so a crash or a
ctrl+q resumes at the same step with the same assignment (the assignment is stored with
the participant, never recomputed).  A game step that was cut short continues the same
game from its last complete round (``engine.game.resume_point``); every game goes
through ``lab.gamespec.GameSpec`` (set up there, played by ``lab.session.run_session``).

What happens at each step is the *driver*'s business (:class:`Driver`): the terminal
app asks a person, :class:`lab.study.simulate.SimulatedDriver` answers by script.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from engine.events import EventSink
from engine.game import resume_point
from engine.gameid import game_id as new_game_id
from engine import protocols
from engine.phrasebook import Phrasebook
from personas.voice import Voice

from ..gamespec import GameSpec, close_pools, game_config, settings_key
from personas.spec import AgentsSpec
from ..session import SessionOutcome
from .assign import Game, assignment
from .model import Questionnaire, Study, condition_task, practice_task, pool_tasks
from .seat import BeliefRequest, StudySeat, belief_rounds

__all__ = ["StudyRunner", "Driver", "GameContext", "plan_steps", "completion_code", "design_hash",
           "StepResult", "QuizFailed", "with_phrasebook"]


def with_phrasebook(seats: list[Any], mode: str, participant: int, game_id: str) -> list[Any]:
    """The seats of a study game with the condition's ``phrasebook`` (``lab.study.model``):
    ``off`` leaves them as they are; ``scripted`` puts every scripted partner's messages to
    the participant through the phrasebook (``personas.voice.Voice``); ``all`` every LLM
    partner's too, typed only (what the reader tells in them; the rest is withheld)."""
    if mode == "off":
        return seats
    book = Phrasebook(game_id)
    out = list(seats)
    for a, seat in enumerate(seats):
        kind = getattr(seat, "kind", None)
        if a != participant and (kind == "scripted" or (kind == "llm" and mode == "all")):
            out[a] = Voice(seat, book, listener=participant, typed_only=kind == "llm")
    return out


class QuizFailed(Exception):
    """The driver gave up on the quiz (a person who leaves rather than answer)."""


#: Final states of a participant who left before the end (``study_participants.outcome``).
LEFT = ("declined", "screened_out", "timed_out")


@dataclass
class GameContext:
    """What a driver is told about a game step."""

    participant: str
    step: int
    game: Game
    task: Any
    condition: Any
    game_id: str
    resumed: bool
    seat_persona: StudySeat | None = None


@dataclass
class StepResult:
    name: str
    status: str  # completed | failed
    data: dict[str, Any] = field(default_factory=dict)


class Driver(Protocol):
    """Who answers the steps (the terminal app or a script)."""

    simulated: bool

    async def consent(self, text: str) -> bool: ...
    async def instructions(self, text: str) -> None: ...
    async def quiz(self, questions: Sequence[Any]) -> list[dict[str, Any]]: ...
    async def questionnaire(self, q: Questionnaire, *, game: GameContext | None) -> list[dict[str, Any]]: ...
    # a driver whose quiz / questionnaire also take ``prior`` (what was answered before a quit)
    # and ``record`` (awaited with each answer as it is given, which stores it) gets both:
    # the terminal app does, so a quit never resets an attempt count or erases an answer;
    # a questionnaire that also takes ``drafts`` ({item: text typed before a quit, not given})
    # and ``keep`` (awaited with (item, text) as a written answer is typed) gets both too
    async def beliefs(self, ctx: GameContext, req: BeliefRequest) -> dict[int, list[int]]: ...
    def human_persona(self, ctx: GameContext) -> Any: ...
    def draft(self) -> Sequence[Any] | None: ...
    def listeners(self, ctx: GameContext) -> Sequence[EventSink]: ...
    async def game_started(self, ctx: GameContext) -> None: ...
    async def game_over(self, ctx: GameContext, outcome: SessionOutcome) -> None: ...
    async def thanks(self, code: str, **info: Any) -> None: ...
    # optional: async def goodbye(self, outcome: str, **info) -> None  (declined consent, screened out by
    # the quiz, over the pool's time limit; ``info``: ``code`` and ``return_link`` for the pool, when the
    # driver's goodbye takes them)


#: Keys added to the study file later, left out of the hash while at their default so that a
#: file written before them keeps its hash (returning participants are not told it changed).
_LATER_KEYS = {"": {"payment": None, "pool": {"id_param": "participant", "return_url": None}},
               "pool": {"max_participants": None, "participant_prefix": "W", "time_limit_minutes": None,
                        "completed": None, "declined": None, "screened_out": None, "timed_out": None},
               "study": {"participant_pattern": "[A-Za-z0-9]+"}, "conditions": {"reveal_partners": False},
               "quiz": {"max_attempts": None}, "items": {"answer": None}}


_LATER_KEYS["beliefs"] = {"watched_rounds": False}  # [beliefs] watched_rounds (issue 30)


def _drop_later(d: Any, where: str = "") -> Any:
    if isinstance(d, list):
        return [_drop_later(x, where) for x in d]
    if not isinstance(d, dict):
        return d
    later = _LATER_KEYS.get(where, {})
    out = {}
    for k, v in d.items():
        v = _drop_later(v, k)  # first the keys inside it (a [pool] of old keys only is then left out whole)
        if not (k in later and v == later[k]):
            out[k] = v
    return out


def design_hash(study: Study) -> str:
    import json

    data = _drop_later(json.loads(study.model_dump_json()))
    if "simulated_protocol" not in study.study.model_fields_set:
        # simulated participants are no part of what a person meets; a file that does not name
        # them hashes as before their default became "person-like" (issue 29)
        data["study"]["simulated_protocol"] = protocols.default_seat()
    return hashlib.sha256(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()[:16]


def completion_code(study: Study, participant: str) -> str:
    """A code the participant reports to the recruiting platform; reproducible from the seed."""
    h = hashlib.sha256(f"{study.name}:{study.study.seed}:{participant}".encode()).digest()
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
    code = "".join(alphabet[b % len(alphabet)] for b in h[:6])
    return f"{study.study.code_prefix}-{code}" if study.study.code_prefix else code


def plan_steps(study: Study, games: Sequence[Game]) -> list[str]:
    steps = ["consent", "instructions"]
    if study.quiz:
        steps.append("quiz")
    steps += [f"questionnaire:{q.id}" for q in study.questionnaires_at("before")]
    for g in games:
        steps.append(f"game:{g.index}")
        if not g.practice:
            steps += [f"questionnaire:{q.id}@{g.index}" for q in study.questionnaires_at("after_game")]
    steps += [f"questionnaire:{q.id}" for q in study.questionnaires_at("after_study")]
    steps.append("thanks")
    return steps


class _Stopwatch:
    """Time on one step, taken in parts (each :meth:`take` returns the time since the last)."""

    def __init__(self) -> None:
        self.mark = time.perf_counter()

    def take(self) -> float:
        now = time.perf_counter()
        spent, self.mark = now - self.mark, now
        return spent


class StudyRunner:
    """Plays one participant's remaining steps (see the module docstring)."""

    #: how often the time spent on the current step is written down while it runs
    CHECKPOINT_SECONDS = 30.0

    def __init__(self, study: Study, store: Any, participant: str, driver: Driver, *,
                 base: Path | None = None, deterministic: bool | None = None,
                 on_step: Callable[[int, str], None] | None = None) -> None:
        from saves.study import StudyStore

        self.study = study
        self.store = store
        self.db = StudyStore(store, study.name)
        self.participant = participant
        self.driver = driver
        self.base = base or Path(".")
        self.deterministic = driver.simulated if deterministic is None else deterministic
        self.games: list[Game] = []
        self.steps: list[dict[str, Any]] = []
        self.results: list[StepResult] = []
        self._tasks: list[Any] | None = None
        self._llm: dict[str, Any] = {}
        self.design_changed = False
        self.outcome: str | None = None  # declined | screened_out | timed_out once the participant has left for good
        self.pool_id: str | None = None  # the online pool's id for this participant, from the link
        self.started_at: str | None = None  # when the participant was registered (the pool's time limit)
        self.on_step = on_step  # told (index, name) as each step begins, e.g. for a status line

    # -- registration ------------------------------------------------------------------------------
    async def enroll(self, *, pool_id: str | None = None) -> dict[str, Any]:
        """Register the participant (the lowest open counterbalancing slot) or load them; returns the row.
        ``pool_id``: the id an online pool gave them (kept with the row; the first one given wins)."""
        row = await self.db.participant(self.participant)
        if row is None:
            def plan(slot: int):
                games = assignment(self.study, slot, self.pool())
                return [g.to_json() for g in games], plan_steps(self.study, games)

            await self.db.register(self.participant, simulated=self.driver.simulated, plan=plan,
                                   design_hash=design_hash(self.study), pool_id=pool_id)
            row = await self.db.participant(self.participant)
        elif bool(row["simulated"]) != self.driver.simulated:
            raise ValueError(f"participant {self.participant!r} is "
                             f"{'a simulated' if row['simulated'] else 'a real'} participant; use another id")
        elif pool_id and not row.get("pool_id"):
            await self.db.set_pool_id(self.participant, pool_id)
            row["pool_id"] = pool_id
        self.pool_id = row.get("pool_id")
        self.started_at = row.get("started_at")
        self.outcome = row.get("outcome")
        self.games = [Game(**g) for g in row["assignment"]]
        lost = sorted({g.condition for g in self.games if self.study.current_name(g.condition) is None})
        if lost:
            raise ValueError(f"participant {self.participant!r} was assigned condition {lost[0]!r}, which the study "
                             f"file no longer names; if it was renamed, add renamed_from = [\"{lost[0]}\"] to "
                             "that condition, or put the old name back")
        self.steps = await self.db.steps(self.participant)
        # the file was edited since this participant started: their stored plan is kept
        self.design_changed = row["design_hash"] != design_hash(self.study)
        return row

    def pool(self) -> list[Any]:
        if self._tasks is None:
            self._tasks = pool_tasks(self.study)
        return self._tasks

    def next_step(self) -> int | None:
        for s in self.steps:
            if not s["completed_at"]:
                return s["step"]
        return None

    # -- the loop ------------------------------------------------------------------------------------
    async def run(self) -> list[StepResult]:
        """Play every step not yet complete, in order; returns what was played now.

        The participant's lease (``lab.lease``) is held while it runs: a second live session
        of the same participant, or a withdraw, is refused in one line (``LeaseHeld``)."""
        from ..lease import Lease, participant_subject

        async with Lease(self.store, participant_subject(self.study.name, self.participant), role="study run",
                         what=f"participant {self.participant}"):
            return await self._run()

    async def _run(self) -> list[StepResult]:
        if not self.steps:
            await self.enroll()
        if self.outcome in LEFT:  # declined or screened out: final, nothing more is asked
            await self._goodbye()
            return self.results
        while (i := self.next_step()) is not None:
            name = self.steps[i]["name"]
            if name != "thanks" and self.timed_out():
                self.outcome = "timed_out"
                await self.db.set_outcome(self.participant, "timed_out")
                await self._goodbye()
                break
            if self.on_step is not None:
                self.on_step(i, name)
            await self.db.start_step(self.participant, i)
            spent = _Stopwatch()
            beat = asyncio.ensure_future(self._checkpoint(i, spent)) if self.CHECKPOINT_SECONDS else None
            try:
                result = await self._play_step(i, name)
            except BaseException:
                # ctrl+q, Ctrl-C, a crash: the time spent so far on this step is kept, and the
                # next run adds to it (steps.csv ``seconds`` is summed over resumes)
                if beat is not None:
                    beat.cancel()
                await asyncio.shield(self._add_seconds(i, spent.take()))
                raise
            if beat is not None:
                beat.cancel()
            await self.db.complete_step(self.participant, i, seconds=spent.take(),
                                        data={"status": result.status, **result.data})
            self.steps[i]["completed_at"] = "now"
            self.results.append(result)
            if result.status in LEFT:
                self.outcome = result.status
                await self.db.set_outcome(self.participant, result.status)
                await self._goodbye()
                break
        await self._close_llm()
        return self.results

    async def _add_seconds(self, i: int, seconds: float) -> None:
        try:
            await self.db.add_seconds(self.participant, i, seconds)
        except Exception:  # the store is closing under a quit: the time is lost, never the step
            pass

    async def _checkpoint(self, i: int, spent: "_Stopwatch") -> None:
        """Every CHECKPOINT_SECONDS, add the time spent on step ``i`` to its row, so a killed
        process (no chance to record on the way out) loses at most that much."""
        while True:
            await asyncio.sleep(self.CHECKPOINT_SECONDS)
            await self._add_seconds(i, spent.take())

    async def _play_step(self, i: int, name: str) -> StepResult:
        d = self.driver
        if name == "consent":
            if not await d.consent(self.study.consent.read(self.base)):
                return StepResult(name, "declined", {"consent": False})
            return StepResult(name, "completed", {"consent": True})
        if name == "instructions":
            await d.instructions(self.study.instructions.read(self.base))
            return StepResult(name, "completed")
        if name == "quiz":
            return await self._quiz(i)
        if name.startswith("questionnaire:"):
            return await self._questionnaire(i, name)
        if name.startswith("game:"):
            return await self._game(i, int(name.split(":")[1]))
        if name == "thanks":
            from .payment import payment_of

            code = completion_code(self.study, self.participant)
            await self.db.complete_participant(self.participant, code)
            pay = await payment_of(self.study, self.store, self.participant)
            pool_code, link = self.study.pool.ending("completed", code, self.pool_id)
            await d.thanks(code, payment=pay, return_link=link, pool_code=pool_code)
            return StepResult(name, "completed", {"completion_code": code,
                                                  **({"payment": pay["total"]} if pay else {})})
        raise ValueError(f"unknown step {name!r}")

    def timed_out(self, now: datetime | None = None) -> bool:
        """A real participant registered longer ago than ``[pool] time_limit_minutes`` (checked as
        each step begins, the last step excepted: a step under way is never cut short)."""
        limit = self.study.pool.time_limit_minutes
        if limit is None or self.driver.simulated or not self.started_at:
            return False
        try:
            start = datetime.fromisoformat(self.started_at)
        except ValueError:
            return False
        return ((now or datetime.now(timezone.utc)) - start).total_seconds() / 60 > limit

    async def _goodbye(self) -> None:
        bye = getattr(self.driver, "goodbye", None)
        if bye is None:
            return
        params = inspect.signature(bye).parameters.values()
        if any(p.kind is p.VAR_KEYWORD for p in params):
            code, link = self.study.pool.ending(self.outcome, None, self.pool_id)  # the pool's, for how they left
            await bye(self.outcome, code=code, return_link=link)
        else:
            await bye(self.outcome)

    async def _stored(self, i: int, questionnaire: str) -> list[dict[str, Any]]:
        """The answers of step ``i`` already stored (given before a quit)."""
        return [a for a in await self.db.answers(self.participant)
                if a["step"] == i and a["questionnaire"] == questionnaire]

    async def _quiz(self, i: int) -> StepResult:
        """Every attempt is stored as it is given (``record``), so a quit never resets the count:
        the same command continues at the question and try where the participant left, and a
        question whose ``max_attempts`` were used up before the quit screens out at once."""
        qs = self.study.quiz

        def grade(r: dict[str, Any]) -> dict[str, Any]:
            k = int(r["item"])
            return {"item": str(k), "response": r["response"], "attempt": int(r["attempt"]),
                    "correct": int(r["response"]) == qs[k].answer}

        prior = [grade(a) for a in await self._stored(i, "quiz")]
        seen = {(r["item"], r["attempt"]) for r in prior}

        async def record(r: dict[str, Any]) -> None:
            row = grade(r)
            if (row["item"], row["attempt"]) not in seen:
                seen.add((row["item"], row["attempt"]))
                await self.db.add_answers(self.participant, i, "quiz", [row])

        rows = list(prior)
        if self._quiz_outcome(rows) is None:
            given = [{"item": int(r["item"]), "response": int(r["response"]), "attempt": r["attempt"]} for r in prior]
            records = await self._ask(self.driver.quiz, qs, prior=given, record=record)
            before = {(x["item"], x["attempt"]) for x in prior}
            rows += [grade(r) for r in records if (str(int(r["item"])), int(r["attempt"])) not in before]
        rows.sort(key=lambda r: (int(r["item"]), r["attempt"]))
        out = self._quiz_outcome(rows)
        if out is not None and out >= 0:  # used up a question's tries: screened out (recorded, the slot given up)
            keep = [r for r in rows if int(r["item"]) < out
                    or (int(r["item"]) == out and int(r["attempt"]) <= qs[out].max_attempts)]
            await self._store_new(i, "quiz", keep, seen)
            return StepResult("quiz", "screened_out", {"retries": sum(1 for r in keep if not r["correct"]),
                                                       "attempts": len(keep), "failed_question": out})
        if out is None:
            await self._store_new(i, "quiz", rows, seen)
            raise QuizFailed("the quiz was not passed")
        await self._store_new(i, "quiz", rows, seen)
        return StepResult("quiz", "completed", {"retries": sum(1 for r in rows if not r["correct"]),
                                                "attempts": len(rows)})

    def _quiz_outcome(self, rows: list[dict[str, Any]]) -> int | None:
        """-1 passed (every question right), K >= 0 screened out on question K (right only past
        its ``max_attempts``, or not at all within them), None not decided yet."""
        for k, q in enumerate(self.study.quiz):
            mine = sorted((r for r in rows if int(r["item"]) == k), key=lambda r: r["attempt"])
            right = next((r["attempt"] for r in mine if r["correct"]), None)
            if q.max_attempts is not None and (right > q.max_attempts if right is not None
                                               else len(mine) >= q.max_attempts):
                return k
            if right is None:
                return None
        return -1

    async def _store_new(self, i: int, questionnaire: str, rows: list[dict[str, Any]], seen: set,
                         game_id: str | None = None) -> None:
        """Store the rows a driver returned that its ``record`` did not store as they were given."""
        new = [r for r in rows if (r["item"], r.get("attempt", 1)) not in seen]
        if new:
            await self.db.add_answers(self.participant, i, questionnaire, new, game_id=game_id)
            seen.update((r["item"], r.get("attempt", 1)) for r in new)

    @staticmethod
    async def _ask(fn: Callable[..., Any], *args: Any, prior: Any, record: Any, drafts: Any = None,
                   keep: Any = None, **kw: Any) -> Any:
        """Call a driver's quiz or questionnaire, with what was answered before a quit and a
        callback that stores each answer as it is given, when the driver takes them (a
        scripted driver answers everything in one go and needs neither); a questionnaire's
        written answers typed and not given (``drafts``) and the callback that keeps them as
        they are typed (``keep``) likewise."""
        import inspect

        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = {}
        if "record" in params:
            kw.update(prior=prior, record=record)
        if keep is not None and "keep" in params:
            kw.update(drafts=drafts, keep=keep)
        return await fn(*args, **kw)

    async def _questionnaire(self, i: int, name: str) -> StepResult:
        """Each answer is stored as it is given; a resume offers only the items not answered
        yet (an attention check answered before a quit is never asked again), and a written
        answer typed but not given before the quit is back in its box (``study_answer_drafts``)."""
        qid, _, at = name.split(":", 1)[1].partition("@")
        q = next(q for q in self.study.questionnaires if q.id == qid)
        game_ctx = None
        game_id = None
        if at:
            step = next(s for s in self.steps if s["name"] == f"game:{at}")
            game_id = step.get("game_id")
            g = self.games[int(at)]
            game_ctx = GameContext(self.participant, step["step"], g, None, self.study.condition(g.condition),
                                   game_id or "", False)
        known = {it.id: it for it in q.items}

        def row_of(a: dict[str, Any]) -> dict[str, Any]:
            if a["item"] not in known:
                raise ValueError(f"questionnaire {qid}: unknown item {a['item']!r}")
            # an attention check is recorded passed (1) or failed (0); other items leave it empty
            return {"item": a["item"], "response": a.get("response"), "attempt": 1,
                    "correct": known[a["item"]].correct(a.get("response"))}

        prior = [{"item": a["item"], "response": a["response"], "attempt": 1,
                  "correct": None if a["correct"] is None else bool(a["correct"])}
                 for a in await self._stored(i, qid)]
        seen = {(r["item"], 1) for r in prior}

        async def record(a: dict[str, Any]) -> None:
            row = row_of(a)
            if (row["item"], 1) not in seen:
                seen.add((row["item"], 1))
                await self.db.add_answers(self.participant, i, qid, [row], game_id=game_id)

        # written answers typed before a quit and not given: put back in their box
        drafts = {d["item"]: d["text"] for d in await self.db.answer_drafts(self.participant)
                  if d["step"] == i and d["questionnaire"] == qid and d["item"] in known
                  and (d["item"], 1) not in seen}

        async def keep(item: str, text: str) -> None:
            if item in known and (item, 1) not in seen:
                await self.db.keep_answer_draft(self.participant, i, qid, item, text, game_id=game_id)

        rows = list(prior)
        if any(it.id not in {r["item"] for r in prior} for it in q.items):
            answers = await self._ask(self.driver.questionnaire, q, game=game_ctx,
                                      prior=[{"item": r["item"], "response": r["response"]} for r in prior],
                                      record=record, drafts=drafts, keep=keep)
            answered = {r["item"] for r in prior}
            for a in answers:
                r = row_of(a)
                if r["item"] not in answered:  # an item answered before the quit keeps its first answer
                    answered.add(r["item"])
                    rows.append(r)
        missing = [it.id for it in q.items if not it.optional and not any(r["item"] == it.id and
                                                                           r["response"] not in (None, "")
                                                                           for r in rows)]
        if missing:
            raise ValueError(f"questionnaire {qid}: no answer for {', '.join(missing)}")
        await self._store_new(i, qid, rows, seen, game_id=game_id)
        checks = [r["correct"] for r in rows if r["correct"] is not None]
        return StepResult(name, "completed", {"items": len(rows), **({"attention_checks": len(checks),
                                                                      "attention_failed": checks.count(False)}
                                                                     if checks else {})})

    # -- games -----------------------------------------------------------------------------------------
    def task_of(self, g: Game) -> Any:
        base = practice_task(self.study) if g.task_ref == "practice" else self.pool()[int(g.task_ref.split(":")[1])]
        return condition_task(self.study, self.study.condition(g.condition), base)

    def _llm_settings(self, cond) -> Any:
        if not cond.uses_llm:
            return None
        if cond.name not in self._llm:
            from personas.llm.settings import LLMSettings

            e = cond.llm
            self._llm[cond.name] = LLMSettings(base_url=e.base_url, api_key_env=e.api_key_env,
                                               temperature=e.temperature, timeout=e.timeout, retries=e.retries,
                                               backoff_base=0.05, max_calls_per_round=e.max_calls_per_round)
        return self._llm[cond.name]

    async def _close_llm(self) -> None:
        await close_pools(*self._llm.values())
        self._llm.clear()

    async def _game(self, i: int, index: int) -> StepResult:
        from personas.registry import make_personas

        g = self.games[index]
        cond = self.study.condition(g.condition)
        task = self.task_of(g)
        step = self.steps[i]
        game_id = step.get("game_id")
        resumed = False
        resume_upto = None
        if game_id:
            status = await self._game_status(game_id)
            if status == "completed":
                return StepResult(f"game:{index}", "completed", {"game_id": game_id, "resumed": True})
            if status in ("running", "stopped"):
                events = await self.store.load_events(game_id)
                resume_upto = resume_point(events)
                resumed = True
            else:  # failed or missing: a fresh game
                game_id = None
        if not game_id:
            game_id = new_game_id("calbench-study", self.study.name, self.participant, index,
                                  deterministic=self.deterministic)
            await self.db.start_step(self.participant, i, game_id=game_id)
            step["game_id"] = game_id
        ctx = GameContext(self.participant, i, g, task, cond, game_id, resumed)
        answered = {b["round"] for b in await self.db.beliefs(self.participant) if b["game_id"] == game_id}
        seat_persona = self._seat(ctx, answered)
        ctx.seat_persona = seat_persona  # on resume it owes the grids due but not stored (engine.game.reflect_again)
        names = cond.partner_names(task.num_agents, g.seat)
        spec = AgentsSpec.of_names(names)  # the condition's seats, as named: parsed here once
        seats = make_personas(spec, task.num_agents, llm=self._llm_settings(cond), humans={g.seat: seat_persona},
                              fidelity=cond.fidelity)
        seats = with_phrasebook(seats, cond.phrasebook, g.seat, game_id)
        config = game_config(max_turns=cond.max_turns, channels=cond.channel_names(), deterministic=self.deterministic)
        extra = {"study": self.study.name, "participant": self.participant, "condition": cond.name,
                 "practice": g.practice, "simulated": self.driver.simulated, "study_game": index}
        if cond.phrasebook != "off":
            extra["phrasebook"] = cond.phrasebook
        game = GameSpec(task, spec, config, game_id, settings_key({"study": self.study.name, "condition": cond.name}),
                        extra_config=extra, human_seat=g.seat, logical_clock=self.deterministic and not resumed)
        await self.driver.game_started(ctx)
        outcome = await game.play(seats, store=self.store, stream=True, listeners=list(self.driver.listeners(ctx)),
                                  resume_upto=resume_upto, owner="study run")
        await self.driver.game_over(ctx, outcome)
        infra = [e for e in outcome.trace.get("events") or () if e.get("type") == "seat_timeout"
                 and (e.get("data") or {}).get("agent_id") != g.seat]
        return StepResult(f"game:{index}", outcome.status,
                          {"game_id": game_id, "condition": cond.name, "practice": g.practice, "seat": g.seat,
                           "resumed": resumed, "timeouts": seat_persona.timeouts,
                           # partner calls that never got an answer (an endpoint down, retries exhausted)
                           "partner_failures": len(infra),
                           **({"partner_failure": (infra[0].get("data") or {}).get("detail")} if infra else {}),
                           **({"error": outcome.error} if outcome.error else {})})

    async def _game_status(self, game_id: str) -> str | None:
        return await self.store.game_status(game_id)

    def _seat(self, ctx: GameContext, answered: set[int] = frozenset()) -> StudySeat:
        study, g = self.study, ctx.game
        t = study.timing
        b = study.beliefs
        own = None if b.watched_rounds else [r for r, m in enumerate(ctx.task.meetings) if g.seat in m.participants]
        rounds = belief_rounds(b.rounds, len(ctx.task.meetings), own) \
            if b.enabled and (b.practice or not g.practice) else set()

        async def on_timing(*, phase, round_, turn, seconds, timed_out, partial=False):
            await self.db.add_timing(self.participant, ctx.game_id, round_=round_, turn=turn, phase=phase,
                                     seconds=seconds, timed_out=timed_out, partial=partial)

        async def ask(req: BeliefRequest):
            return await self.driver.beliefs(ctx, req)

        async def on_beliefs(req: BeliefRequest, grid):
            await self.db.add_beliefs(self.participant, ctx.game_id, req.round, req.seat, grid)

        inner = self.driver.human_persona(ctx)
        if self.driver.simulated and ctx.condition.phrasebook != "off":
            # a scripted participant's messages read as a person's quick actions do (personas/seat_model.py)
            inner = Voice(inner, Phrasebook(ctx.game_id), listener=None)
        model = "human" if not self.driver.simulated else f"sim:{study.study.simulated_protocol}"
        return StudySeat(inner, model=model, talk_seconds=t.talk_seconds, decision_seconds=t.decision_seconds,
                         on_decision_timeout=t.on_decision_timeout, on_timing=on_timing, rounds=rounds,
                         targets=b.targets, watched_rounds=b.watched_rounds, ask_beliefs=ask,
                         on_beliefs=on_beliefs, draft=self.driver.draft,
                         on_timeout=getattr(self.driver, "timed_out", None),
                         answered=answered)
