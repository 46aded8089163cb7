"""``study check``: the design in numbers, and the dry run of one cycle of simulated participants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .assign import assignment, cycle_length, order_design
from .model import Study, pool_tasks
from .runner import QuizFailed, StudyRunner, plan_steps
from .simulate import SimulatedDriver, simulated_ids

__all__ = ["design", "dry_run"]


def design(study: Study) -> dict[str, Any]:
    """What ``study check`` prints: conditions, positions, cycle, games and time per participant."""
    tasks = pool_tasks(study)
    n = cycle_length(study)
    plans = [assignment(study, p, tasks) for p in range(n)]
    games = study.games_per_participant + (1 if study.tasks.practice else 0)
    conds = []
    for c in study.conditions:
        seats = sorted({g.seat for plan in plans for g in plan if g.condition == c.name and not g.practice})
        positions = sorted({g.position for plan in plans for g in plan if g.condition == c.name and not g.practice})
        conds.append({"name": c.name, "partners": c.partners, "channels": c.channels, "max_turns": c.max_turns,
                      "seats": seats, "positions": positions, "uses_llm": c.uses_llm,
                      "blinded": not c.reveal_partners, "phrasebook": c.phrasebook})
    steps = plan_steps(study, plans[0])
    kind, rows = order_design(study) if study.assignment.method == "latin" else (study.assignment.method, [])
    used = {int(g.task_ref.split(":")[1]) for plan in plans for g in plan if not g.practice}
    unused = [t.task_id for i, t in enumerate(tasks) if i not in used]
    return {
        "study": study.name,
        "method": study.assignment.method,
        "conditions": conds,
        "participants_per_cycle": n,
        "games_per_participant": study.games_per_participant,
        "practice": bool(study.tasks.practice),
        "steps_per_participant": len(steps),
        "expected_minutes": round(games * study.study.minutes_per_game + 2 + len(study.quiz) * 0.5
                                  + sum(len(q.items) for q in study.questionnaires) * 0.25, 1),
        "latin_square": [[study.conditions[i].name for i in row] for row in rows] or None,
        "order_design": kind,
        "unused_tasks": unused,
        "cycle": [[{"condition": g.condition, "task_id": g.task_id, "seat": g.seat, "practice": g.practice}
                   for g in plan] for plan in plans],
        "payment": study.payment.model_dump() if study.payment else None,
        "return_url": study.pool.return_url,
        "attention_checks": sum(1 for q in study.questionnaires for it in q.items if it.is_check),
        "beliefs": _beliefs(study, tasks),
    }


def _beliefs(study: Study, tasks: list[Any]) -> dict[str, Any] | None:
    """When the belief grid is shown: rounds counted from 1, as the participant sees them."""
    b = study.beliefs
    if not b.enabled:
        return None
    n = min((len(t.meetings) for t in tasks), default=0)
    rounds = (list(range(1, n + 1)) if b.rounds == "all" else [n] if b.rounds == "last" else list(b.rounds))
    return {"rounds": rounds, "of_rounds": n, "targets": b.targets, "practice": b.practice,
            "watched_rounds": b.watched_rounds}


def with_endpoint(study: Study, base_url: str) -> Study:
    """The study with every LLM condition pointed at ``base_url`` (the dry run's own mock)."""
    conds = [c.model_copy(update={"llm": c.llm.model_copy(update={"base_url": base_url})}) if c.uses_llm else c
             for c in study.conditions]
    out = study.model_copy(update={"conditions": conds})
    out._base = study._base
    return out


async def dry_run(study: Study, store: Any, *, base: Path | None = None, progress=None,
                  mock: bool = False) -> dict[str, Any]:
    """One full cycle of simulated participants, end to end into ``store`` (earlier simulated
    participants of this study are withdrawn first).  Every game goes through run_session.

    ``mock``: the LLM conditions talk to the project's loopback mock endpoint, started here
    for the dry run and stopped after it (nothing else to start, nothing leaves the machine)."""
    if mock and any(c.uses_llm for c in study.conditions):
        from calbench_devtools.mock_endpoint import MockLLMServer

        async with MockLLMServer(policy="cooperative") as server:
            out = await dry_run(with_endpoint(study, server.base_url), store, base=base, progress=progress)
            out["mock"] = server.base_url
            return out
    from saves.study import StudyStore

    removed = await StudyStore(store, study.name).delete_simulated()
    n = cycle_length(study)
    out = {"participants": n, "games": 0, "completed": 0, "steps": 0, "steps_completed": 0,
           "replaced_simulated": removed, "failures": [], "participant_ids": []}
    for pid in simulated_ids(n):
        runner = StudyRunner(study, store, pid, SimulatedDriver(study, pid), base=base)
        await runner.enroll()
        out["participant_ids"].append(pid)
        out["steps"] += len(runner.steps)
        try:
            results = await runner.run()
        except (QuizFailed, ValueError) as exc:
            out["failures"].append(f"{pid}: {exc}")
            results = runner.results
        for r in results:
            if r.name.startswith("game:"):
                out["games"] += 1
                out["completed"] += r.status == "completed"
                if r.status != "completed":
                    out["failures"].append(f"{pid} {r.name}: {r.data.get('error')}")
                elif r.data.get("partner_failures"):
                    # the game ended, but a partner could not answer: the setup is not ready for people
                    out["failures"].append(f"{pid} {r.name}: {r.data['partner_failures']} partner call(s) failed "
                                           f"({r.data.get('partner_failure')})")
            out["steps_completed"] += r.status == "completed"
        if progress is not None:
            progress(pid, results)
    out["ok"] = (not out["failures"] and out["steps_completed"] == out["steps"]
                 and out["completed"] == out["games"])
    out["fixes"] = endpoint_fixes(study, out["failures"])
    return out


def endpoint_fixes(study: Study, failures: list[str]) -> list[str]:
    """What to start when partner calls went unanswered: one line per LLM condition, naming its URL."""
    if not any("partner call(s) failed" in f for f in failures):
        return []
    from urllib.parse import urlparse

    out = []
    for c in study.conditions:
        if not c.uses_llm:
            continue
        url = c.llm.base_url or "$OPENAI_BASE_URL"
        u = urlparse(c.llm.base_url or "")
        start = ""
        if u.hostname in ("127.0.0.1", "localhost"):
            start = f" For the project's loopback mock there: calbench mock-llm --port {u.port or 80} &"
        out.append(f"Condition {c.name!r}: the LLM endpoint {url} did not answer. Start it (or fix base_url in "
                   f"[conditions.llm]).{start} Or let the dry run start the loopback mock itself: add --mock.")
    return out
