"""``study export``: tidy CSV files (one observation per row, one variable per column) and a
codebook that describes every column.  :data:`CODEBOOK` is the single source of the column
lists: the writer writes exactly those columns, and ``codebook.md`` is generated from it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.model import Task
from engine.privacy import (belief_to_feasibility, belief_updates, feasibility_truth, observer_vps, semantic_leaks,
                            tally)
from engine.protocol import MESSAGE_EVENTS, typed_message
from lab.csvfile import write_dicts

__all__ = ["CODEBOOK", "export_study", "study_rows", "seat_kind", "codebook_markdown"]

CODEBOOK: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "participants.csv": ("One row per participant.", [
        ("participant", "the pseudonymous id given at `study run --participant` (simulated: sim-NNN)"),
        ("simulated", "1 = a scripted participant from `study check --dry-run`, 0 = a person"),
        ("slot", "arrival number within real (or simulated) participants; row of the counterbalancing"),
        ("condition_order", "the conditions in playing order, separated by '|' (practice excluded; current names, "
                            "as in games.csv)"),
        ("seats", "the participant's seat in each of those games, separated by '|'"),
        ("status", "active (not finished), completed, declined (said no at consent; final), screened_out "
                   "(used up a quiz question's max_attempts; final) or timed_out (over [pool] time_limit_minutes "
                   "at the start of a step; final)"),
        ("pool_id", "the id an online pool gave the participant (from the browser link or --pool-id); empty if none"),
        ("started_at", "UTC ISO time the participant was registered"),
        ("completed_at", "UTC ISO time of the thank-you screen (empty if not reached)"),
        ("completion_code", "the participant's own completion code (shown on the thank-you screen, unless "
                            "[pool.completed] sets the pool's code to show there instead: pool_code)"),
        ("pool_code", "the code the online pool is given for how the session ended ([pool.completed] / "
                      "[pool.declined] / [pool.screened_out] / [pool.timed_out] code; completed without one: "
                      "completion_code); empty while active or when the study file gives none"),
        ("return_link", "the link back to the pool shown at the end, with that code (from the study file as it is "
                        "now); empty when there is none"),
        ("steps_completed", "steps completed so far"),
        ("steps_total", "steps in the participant's plan"),
        ("quiz_retries", "wrong quiz answers before passing"),
    ]),
    "steps.csv": ("One row per participant × step of their plan.", [
        ("participant", "participant id"),
        ("simulated", "1 = a row of a simulated participant (`study check --dry-run`), 0 = a person; left out of the export unless --include-simulated"),
        ("step", "0-based position in the plan"),
        ("name", "consent, instructions, quiz, questionnaire:ID[@GAME], game:K, thanks"),
        ("game_id", "the game of a game step"),
        ("started_at", "UTC ISO time the step was first shown"),
        ("completed_at", "UTC ISO time it was completed (empty: not yet)"),
        ("seconds", "wall seconds spent on the step, summed over every run that showed it (a quit or crash "
                    "keeps the time so far: it is written down every 30 s and on the way out); a step not "
                    "completed yet shows the time so far"),
        ("status", "completed or failed (a game that failed)"),
    ]),
    "games.csv": ("One row per game × seat (every seat of every study game).", [
        ("participant", "participant id"),
        ("simulated", "1 for a simulated participant's game"),
        ("condition", "the condition (treatment) of the game, by its name in the study file (games recorded "
                      "under a name listed in a condition's renamed_from are given its current name)"),
        ("game_id", "the game id (also in the saves database and its traces)"),
        ("task_id", "the task id"),
        ("study_game", "index in the participant's plan (0 = practice when there is one)"),
        ("practice", "1 = the practice game"),
        ("status", "completed, running, stopped or failed"),
        ("seat", "seat number"),
        ("kind", "human (the participant's seat), llm or protocol"),
        ("persona", "the persona: human, imap, llm:MODEL ... (sim:PROTOCOL for a simulated participant)"),
        ("is_participant_seat", "1 for the participant's own seat"),
        ("coordination", "the game's coordination rate (scheduled / assigned participant-meetings)"),
        ("success", "this seat's share of its meetings that were scheduled"),
        ("excess_cost", "this seat's cost above the oracle's split, in shown units"),
        ("fairness", "the seat's fairness figure (SPEC §6)"),
        ("vps", "estimated VPS with this seat as the target: how much the others learned about it (SPEC §8)"),
        ("observer_vps", "human seats: the participant's stated-belief VPS over all targets they marked (SPEC §8 on the belief grid)"),
        ("estimator_vps_same_pairs", "human seats: the estimator's VPS over the same (round, target) pairs, for comparison"),
        ("observer_brier", "human seats: the Brier score of the participant's stated beliefs against the truth, mean "
                           "over the cells they marked (0 = knew every cell, 0.25 = no idea, above 0.25 = worse than "
                           "no idea; lower is better; the headline for what an observer learned, docs/metrics.md)"),
        ("estimator_brier_same_cells", "human seats: the estimator's Brier score on exactly the cells the participant "
                                       "marked, for comparison"),
        ("timeouts", "human seats: turns and decisions that ran out of time"),
    ]),
    "messages.csv": ("One row per message sent in a study game.", [
        ("participant", "participant id"),
        ("simulated", "1 = a row of a simulated participant (`study check --dry-run`), 0 = a person; left out of the export unless --include-simulated"),
        ("game_id", "game id"),
        ("seq", "event number in the game"),
        ("round", "round, counted from 1, as in the study file and on every screen"),
        ("turn", "talk sweep within the round, counted from 0"),
        ("sender", "sending seat"),
        ("sender_kind", "human, llm or protocol"),
        ("recipients", "receiving seats, separated by '|'"),
        ("channel", "dm, participant_groupchat or all_groupchat"),
        ("text", "the message text as shown"),
        ("typed_kind", "protocol:kind of a typed protocol message (e.g. imap:costs), empty for free text"),
        ("vps_contribution", "change in the estimator's |belief - 0.5| this message caused, summed over slots and readers"),
        ("leak_tier", "highest tier (public < neutral < sensitive) of a private label the message revealed to an unentitled reader; empty if none"),
        ("interrupted", "1 = sent in a round that was cut short (ctrl+q, a crash) and played again on resume: "
                        "kept as it was sent, but not part of the game's metrics (vps_contribution empty); 0 otherwise"),
    ]),
    "beliefs.csv": ("One row per belief-grid cell shown to the participant (a cell left blank is a row with "
                    "belief empty).", [
        ("participant", "participant id"),
        ("simulated", "1 = a row of a simulated participant (`study check --dry-run`), 0 = a person; left out of the export unless --include-simulated"),
        ("game_id", "game id"),
        ("round", "the round after which the grid was shown, counted from 1, as in the study file and on every screen"),
        ("observer", "the participant's seat"),
        ("target", "the seat the belief is about"),
        ("slot", "calendar slot"),
        ("belief", "the answer to 'as the round started, could the target have taken the meeting in this slot "
                   "(free, or only an errand they could move)?': -3 surely not (a blocked errand or a meeting "
                   "there) .. 0 no idea (typed) .. +3 surely yes; empty = the cell was left blank (no answer: "
                   "missing, NaN in pandas, never 0)"),
        ("feasibility_belief", "belief mapped to a probability the slot was feasible: 0.5 + belief/6 (empty when "
                               "the cell was left blank)"),
        ("truth", "the same question's true answer, taken at the same moment (the start of that round): 1 if the "
                  "slot was free or held a movable errand of the target, 0 if a blocked errand or a meeting"),
        ("took_part", "1 if the participant took part in that round's meeting, 0 if the study asked about a "
                      "round they only watched ([beliefs] watched_rounds = true)"),
    ]),
    "questionnaires.csv": ("Long format: one row per answer (quiz attempts included).", [
        ("participant", "participant id"),
        ("simulated", "1 for a simulated participant"),
        ("questionnaire", "questionnaire id, or quiz"),
        ("game_id", "the game an after-game questionnaire is about"),
        ("item", "item id (quiz: question number from 0)"),
        ("response", "the answer: a Likert point (1..points), a choice's text, free text; quiz: the chosen option's number"),
        ("attempt", "quiz: attempt number (1 = first); 1 otherwise"),
        ("correct", "quiz and attention checks (questionnaire items with an answer): 1 right (passed), 0 wrong "
                    "(failed); empty for other items"),
    ]),
    "timings.csv": ("One row per timed call of the participant's seat.", [
        ("participant", "participant id"),
        ("simulated", "1 = a row of a simulated participant (`study check --dry-run`), 0 = a person; left out of the export unless --include-simulated"),
        ("game_id", "game id"),
        ("round", "round, counted from 1, as in the study file and on every screen"),
        ("turn", "talk sweep within the round, counted from 0 as in messages.csv (talk phase only)"),
        ("phase", "talk, voluntary, decision or beliefs"),
        ("seconds", "seconds from the request to the answer (the limit, when it timed out)"),
        ("timed_out", "1 if the time limit ran out (the turn ended / the batch went as it stood)"),
        ("interrupted", "1 = timed in the attempt of a round that was cut short (ctrl+q, a crash) before it "
                        "started again on resume; 0 otherwise"),
        ("partial", "1 = the call in progress when the participant quit (ctrl+q, a crash): seconds is the time "
                    "until the quit, no answer was given; 0 otherwise"),
    ]),
    "drafts.csv": ("One row per message the participant wrote but had not sent when their session ended (ctrl+q, a "
                   "closed browser tab, a stopped server, a closed terminal; kept as it is typed): queued "
                   "to be sent at the end of their turn, or still in the composer.  Never delivered to anyone.  "
                   "Also one row per written questionnaire answer typed and not given yet (kind answer): the "
                   "resumed questionnaire puts it back in its box, and the answer, once given, replaces it.", [
        ("participant", "participant id"),
        ("simulated", "1 = a row of a simulated participant (`study check --dry-run`), 0 = a person; left out of the export unless --include-simulated"),
        ("game_id", "game id (an answer: the game an after-game questionnaire is about, else empty)"),
        ("round", "the round in play at the quit, counted from 1, as in the study file and on every screen "
                  "(an answer: empty)"),
        ("kind", "queued (waiting for the end of the turn), composer (typed, enter not pressed) or answer (a "
                 "questionnaire's written answer, typed, enter not pressed)"),
        ("questionnaire", "an answer: the questionnaire's id, as in questionnaires.csv (a message: empty)"),
        ("item", "an answer: the item's id, as in questionnaires.csv (a message: empty)"),
        ("channel", "dm, participant_groupchat or all_groupchat (a queued message)"),
        ("recipients", "receiving seats, separated by '|' (a queued message)"),
        ("text", "the words as written"),
        ("recorded_at", "UTC ISO time this draft was saved as it stands (the copy is rewritten whenever what is "
                        "unsent changes, so: its last change)"),
    ]),
    "assignment.csv": ("The randomisation record: one row per game of each participant's plan, as stored when they "
                       "arrived (never recomputed).", [
        ("participant", "participant id"),
        ("simulated", "1 for a simulated participant"),
        ("method", "the study's assignment method: latin, random or fixed"),
        ("slot", "the counterbalancing slot (arrival number; a slot given up is taken again by the next arrival)"),
        ("cycle", "the counterbalancing cycle of the slot (1 = first)"),
        ("cycle_row", "the row of that cycle (1..participants per cycle)"),
        ("study_game", "index in the participant's plan (0 = practice when there is one)"),
        ("practice", "1 = the practice game"),
        ("position", "position in the condition order (0 = first; -1 for practice)"),
        ("condition", "the condition of the game"),
        ("condition_order", "every condition of the participant in playing order, separated by '|'"),
        ("seat", "the participant's seat in the game"),
        ("block", "the task block played at this position (-1 for practice)"),
        ("task_id", "the task played"),
        ("task_ref", "how the task is found again: pool:K (the pool's K-th task, from 0) or practice"),
        ("game_id", "the game, once started (empty: not reached yet)"),
    ]),
    "payments.csv": ("One row per participant: what they earned under [payment] (no rows when the study file has "
                     "no [payment]).", [
        ("participant", "participant id"),
        ("simulated", "1 for a simulated participant (not to be paid)"),
        ("pool_id", "the online pool's id for the participant, to pay them there"),
        ("state", "active, completed, declined, screened_out or timed_out"),
        ("completion_code", "the completion code (completed participants)"),
        ("pool_code", "the code the online pool is given for how the session ended (as in participants.csv)"),
        ("currency", "the currency of the amounts, as written in [payment]"),
        ("show_up", "the show-up fee (completed participants only)"),
        ("meetings", "meetings of the participant's scheduled in their assigned games (practice excluded)"),
        ("cost", "cost the participant's own moves incurred in those games, in shown units"),
        ("bonus", "max(0, per_meeting × meetings − per_cost × cost), at most cap"),
        ("total", "show_up + bonus"),
    ]),
}

# the paper's message audit (issue 21): its own module, one file more
from .audit_export import AUDIT_CODEBOOK, audit_rows  # noqa: E402

CODEBOOK.update(AUDIT_CODEBOOK)

_TIERS = ("public", "neutral", "sensitive")


def round_from_1(r: Any) -> Any:
    """A trace's round (counted from 0) as every CSV writes it: counted from 1, like the study
    file and the screens (empty stays empty)."""
    return r + 1 if isinstance(r, int) and not isinstance(r, bool) else r


def seat_kind(persona: str | None, model: str | None) -> str:
    p, m = (persona or ""), (model or "")
    if p == "human":
        return "human"
    if p == "llm" or m.startswith("llm") or p.startswith("llm"):
        return "llm"
    return "protocol"


def codebook_markdown() -> str:
    out = ["# Codebook", "",
           "Written by `calbench study export`. Every file is UTF-8 CSV with a header row; empty cells "
           "are missing values. Ids join the files: `participant` everywhere, `game_id` between games, "
           "messages, beliefs, timings and after-game questionnaires. `study.json` beside them is the "
           "study file as it was validated (conditions, timing, items), for the methods section.", "",
           "A text cell that would begin with `=`, `+`, `-`, `@`, a tab or a carriage return is written "
           "with a single quote in front (`'=HYPERLINK(...)`), so no spreadsheet runs it as a formula "
           "(OWASP's rule against CSV injection; pool ids and chat text come from outside). Numbers are "
           "never changed (`-3` and `-0.25` stay numbers). To get the text back, drop one leading `'` "
           "where one of those characters follows it; pandas reads the quote as part of the text.", ""]
    for name, (desc, cols) in CODEBOOK.items():
        out += [f"## {name}", "", desc, "", "| column | meaning |", "| --- | --- |"]
        out += [f"| `{c}` | {m} |" for c, m in cols]
        out.append("")
    return "\n".join(out)


async def study_rows(study, store, *, skipped: list[str] | None = None,
                     reveal: bool = False) -> dict[str, list[dict[str, Any]]]:
    """Every row of every file, as dicts keyed by the codebook's columns.

    A game a participant is still playing is left out (its rows would hold the other seats'
    messages and calendars) unless ``reveal``; ``skipped`` gets one line per game left out
    (``saves.guard``, the one guard of every path that writes a game)."""
    from saves.guard import admit, skip_line
    from saves.study import StudyStore

    db = StudyStore(store, study.name)
    parts = await db.participants()
    steps = await db.all_steps()
    answers = await db.answers()
    beliefs = await db.beliefs()
    timings = await db.timings()
    drafts = await db.drafts()
    answer_drafts = await db.answer_drafts()
    sim = {p["participant"]: p["simulated"] for p in parts}
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in CODEBOOK}
    by_part_steps: dict[str, list] = {}
    for s in steps:
        by_part_steps.setdefault(s["participant"], []).append(s)
    quiz_retries: dict[str, int] = {}
    for a in answers:
        if a["questionnaire"] == "quiz" and a["correct"] == 0:
            quiz_retries[a["participant"]] = quiz_retries.get(a["participant"], 0) + 1
    renamed: dict[str, dict[str, Any]] = {}

    def named(g: dict[str, Any]) -> dict[str, Any]:
        """``g`` under its condition's name in the file now (renamed_from), else as recorded."""
        now = study.current_name(g["condition"])
        if now is None or now == g["condition"]:
            return g
        r = renamed.setdefault(g["condition"], {"to": now, "games": 0})
        r["games"] += not g["practice"]
        return dict(g, condition=now)

    for p in parts:
        p["assignment"] = [named(g) for g in p["assignment"]]
    out["_renamed"] = renamed  # not a file: what the report says it mapped (planned games per old name)
    for p in parts:
        plan = [g for g in p["assignment"] if not g["practice"]]
        ps = by_part_steps.get(p["participant"], [])
        out["participants.csv"].append({
            "participant": p["participant"], "simulated": p["simulated"], "slot": p["slot"],
            "condition_order": "|".join(g["condition"] for g in plan), "seats": "|".join(str(g["seat"]) for g in plan),
            "status": p["state"], "pool_id": p.get("pool_id"), "started_at": p["started_at"], "completed_at": p["completed_at"],
            "completion_code": p["completion_code"],
            **dict(zip(("pool_code", "return_link"), study.pool.ending(p["state"], p["completion_code"],
                                                                       p.get("pool_id")))),
            "steps_completed": sum(1 for s in ps if s["completed_at"]),
            "steps_total": len(ps), "quiz_retries": quiz_retries.get(p["participant"], 0)})
    for s in steps:
        out["steps.csv"].append({"participant": s["participant"], "simulated": sim.get(s["participant"]),
                                 "step": s["step"], "name": s["name"],
                                 "game_id": s["game_id"], "started_at": s["started_at"],
                                 "completed_at": s["completed_at"],
                                 "seconds": None if s["seconds"] is None else round(s["seconds"], 3),
                                 "status": (s["data"] or {}).get("status")})
    timeouts: dict[str, int] = {}
    timing_rows: dict[str, list[tuple[dict[str, Any], str | None]]] = {}
    for t in timings:
        timeouts[t["game_id"]] = timeouts.get(t["game_id"], 0) + int(t["timed_out"])
        row = {k: t[k] for k in ("participant", "game_id", "round", "turn", "phase", "seconds", "timed_out")}
        row.update(simulated=sim.get(t["participant"]), interrupted=0, partial=int(t.get("partial") or 0))
        out["timings.csv"].append(row)
        timing_rows.setdefault(t["game_id"], []).append((row, t.get("recorded_at")))
    bel_by_game: dict[str, list] = {}
    for b in beliefs:
        bel_by_game.setdefault(b["game_id"], []).append(b)
    plan_of = {p["participant"]: p["assignment"] for p in parts}
    for s in steps:
        if not s["name"].startswith("game:") or not s["game_id"]:
            continue
        gid, pid = s["game_id"], s["participant"]
        g = plan_of[pid][int(s["name"].split(":")[1])]
        try:
            trace = await store.load_trace(gid)
        except Exception:
            continue
        if not admit(trace, reveal=reveal):
            if skipped is not None:
                skipped.append(skip_line(trace, "the study export", flag=False) + f" (participant {pid})")
            continue
        await _game_rows(out, trace, pid, sim[pid], g, bel_by_game.get(gid, []), timeouts.get(gid, 0))
        _mark_interrupted_timings(trace, timing_rows.get(gid, []))
    for row in out["timings.csv"]:
        row["round"] = round_from_1(row["round"])
    for d in drafts:
        out["drafts.csv"].append({"participant": d["participant"], "simulated": sim.get(d["participant"]),
                                  "game_id": d["game_id"], "round": round_from_1(d["round"]), "kind": d["kind"],
                                  "questionnaire": None, "item": None,
                                  "channel": d["channel"], "recipients": d["recipients"], "text": d["text"],
                                  "recorded_at": d["recorded_at"]})
    for d in answer_drafts:
        out["drafts.csv"].append({"participant": d["participant"], "simulated": sim.get(d["participant"]),
                                  "game_id": d["game_id"], "round": None, "kind": "answer",
                                  "questionnaire": d["questionnaire"], "item": d["item"], "channel": None,
                                  "recipients": None, "text": d["text"], "recorded_at": d["recorded_at"]})
    _assignment_rows(out, study, parts, steps)
    if study.payment is not None:
        from .payment import payments

        out["payments.csv"] = [{c: r.get(c) for c, _ in CODEBOOK["payments.csv"][1]}
                               for r in await payments(study, store)]
    for a in answers:
        out["questionnaires.csv"].append({"participant": a["participant"], "simulated": sim.get(a["participant"]),
                                          "questionnaire": a["questionnaire"], "game_id": a["game_id"],
                                          "item": a["item"], "response": a["response"], "attempt": a["attempt"],
                                          "correct": a["correct"]})
    return out


async def _game_rows(out, trace, pid, simulated, g, beliefs, timeouts) -> None:
    events = trace.get("events") or []
    task = Task.from_row(trace["task"])
    cfg = trace.get("config") or {}
    agents = cfg.get("agents") or []
    metrics = trace.get("metrics") or {}
    per_seat = metrics.get("per_seat") or []
    status = (trace.get("saved") or {}).get("status")
    priv = metrics.get("privacy") if isinstance(metrics.get("privacy"), dict) else None
    per_target = (priv or {}).get("per_target_vps")
    # a cell left blank is missing: not a stated belief (not the prior 0 either)
    rows = [(b["round"], b["observer"], b["target"], b["slot"], b["belief"]) for b in beliefs
            if b["belief"] is not None]
    obs = observer_vps(task, events, rows) if rows else None
    kinds = []
    for seat in range(task.num_agents):
        a = agents[seat] if seat < len(agents) and isinstance(agents[seat], dict) else {}
        kind = seat_kind(a.get("type"), a.get("model"))
        kinds.append(kind)
        ps = per_seat[seat] if seat < len(per_seat) and isinstance(per_seat[seat], dict) else {}
        mine = seat == g["seat"]
        out["games.csv"].append({
            "participant": pid, "simulated": simulated, "condition": g["condition"], "game_id": trace["game_id"],
            "task_id": task.task_id, "study_game": g["index"], "practice": int(g["practice"]), "status": status,
            "seat": seat, "kind": kind, "persona": a.get("model") or a.get("type"),
            "is_participant_seat": int(mine), "coordination": metrics.get("coordination_rate"),
            "success": ps.get("success"), "excess_cost": ps.get("excess_shown", ps.get("excess")),
            "fairness": ps.get("fairness"),
            "vps": ps.get("vps", per_target[seat] if isinstance(per_target, list) and seat < len(per_target) else None),
            "observer_vps": obs["observer_vps"] if (mine and obs) else None,
            "estimator_vps_same_pairs": obs["estimator_vps"] if (mine and obs) else None,
            "observer_brier": obs["observer_brier"] if (mine and obs) else None,
            "estimator_brier_same_cells": obs["estimator_brier"] if (mine and obs) else None,
            "timeouts": timeouts if mine else None})
    audit_rows(out, trace, pid, g, kinds, [out_row["persona"] for out_row in out["games.csv"][-task.num_agents:]])
    for r in out["message_audit.csv"]:
        r.setdefault("simulated", simulated)
    contrib = tally(belief_updates(task, events), task.num_agents).by_seq
    leaks = semantic_leaks(task, [e for e in events if e.get("type") not in MESSAGE_EVENTS
                                  or typed_message(e.get("data") or {}) is None])
    tier: dict[Any, str] = {}
    for it in leaks.get("items") or []:
        old = tier.get(it["seq"])
        if old is None or _TIERS.index(it["tier"]) > _TIERS.index(old):
            tier[it["seq"]] = it["tier"]
    aside = [e for e in trace.get("interrupted_events") or () if isinstance(e, dict)]
    if aside:  # messages of a round cut short: read by people, so scanned for leaks too
        for it in semantic_leaks(task, [e for e in aside if e.get("type") in MESSAGE_EVENTS
                                        and typed_message(e.get("data") or {}) is None]).get("items") or []:
            old = tier.get(it["seq"])
            if old is None or _TIERS.index(it["tier"]) > _TIERS.index(old):
                tier[it["seq"]] = it["tier"]
    cut = {id(e) for e in aside}
    for ev in sorted(list(events) + aside, key=lambda e: e.get("seq") if isinstance(e.get("seq"), int) else -1):
        if ev.get("type") not in MESSAGE_EVENTS:
            continue
        d = ev.get("data") or {}
        sender = d.get("from_agent")
        tm = typed_message(d)
        interrupted = id(ev) in cut
        out["messages.csv"].append({
            "participant": pid, "simulated": simulated, "game_id": trace["game_id"], "seq": ev.get("seq"),
            "round": round_from_1(d.get("round")),
            "turn": d.get("turn"), "sender": sender,
            "sender_kind": kinds[sender] if isinstance(sender, int) and 0 <= sender < len(kinds) else None,
            "recipients": "|".join(str(r) for r in _recipients(d, task)), "channel": d.get("channel"),
            "text": d.get("content"), "typed_kind": f"{tm[0]}:{tm[1]}" if tm else None,
            "vps_contribution": None if interrupted else round(contrib.get(ev.get("seq"), 0.0), 6),
            "leak_tier": tier.get(ev.get("seq")), "interrupted": int(interrupted)})
    truths: dict[tuple[int, int], list[bool]] = {}
    for b in beliefs:
        key = (b["round"], b["target"])
        if key not in truths:
            truths[key] = feasibility_truth(task, events, *key)
        blank = b["belief"] is None
        out["beliefs.csv"].append({
            "participant": pid, "simulated": simulated, "game_id": trace["game_id"],
            "round": round_from_1(b["round"]), "observer": b["observer"],
            "target": b["target"], "slot": b["slot"], "belief": b["belief"],
            "feasibility_belief": None if blank else round(belief_to_feasibility(b["belief"]), 6),
            "truth": int(truths[key][b["slot"]]) if b["slot"] < len(truths[key]) else None,
            "took_part": int(b["observer"] in _meeting_of(task, b["round"]))})


def _assignment_rows(out, study, parts, steps) -> None:
    """The randomisation record (assignment.csv) from each participant's stored plan."""
    from .assign import cycle_length

    n = cycle_length(study)
    game_of = {(s["participant"], s["name"]): s["game_id"] for s in steps if s["name"].startswith("game:")}
    for p in parts:
        plan = p["assignment"]
        order = "|".join(g["condition"] for g in plan if not g["practice"])
        for g in plan:
            out["assignment.csv"].append({
                "participant": p["participant"], "simulated": p["simulated"], "method": study.assignment.method,
                "slot": p["slot"], "cycle": p["slot"] // n + 1, "cycle_row": p["slot"] % n + 1,
                "study_game": g["index"], "practice": int(g["practice"]), "position": g["position"],
                "condition": g["condition"], "condition_order": order, "seat": g["seat"], "block": g["block"],
                "task_id": g["task_id"], "task_ref": g["task_ref"],
                "game_id": game_of.get((p["participant"], f"game:{g['index']}"))})


def _mark_interrupted_timings(trace: dict[str, Any], rows: list[tuple[dict[str, Any], str | None]]) -> None:
    """A timing row of round r recorded before that round's ``round_restarted`` event belongs
    to the attempt that was cut short (both times are UTC ISO strings: comparable as text)."""
    restarts = [((e.get("data") or {}).get("round"), e.get("timestamp")) for e in trace.get("events") or ()
                if e.get("type") == "round_restarted"]
    for r, ts in restarts:
        if not isinstance(ts, str) or not ts[:1].isdigit():
            continue  # a logical clock's stamp: no moment to compare with
        for row, at in rows:
            if row["round"] == r and isinstance(at, str) and at < ts:
                row["interrupted"] = 1


def _meeting_of(task: Task, round_: int) -> tuple[int, ...]:
    """The seats of round ``round_``'s meeting (counted from 0)."""
    return tuple(task.meetings[round_].participants) if 0 <= round_ < len(task.meetings) else ()


def _recipients(d: dict[str, Any], task: Task) -> list[int]:
    for key in ("recipients", "to_agents"):
        if isinstance(d.get(key), list):
            return [int(x) for x in d[key]]
    if isinstance(d.get("to_agent"), int):
        return [d["to_agent"]]
    sender = d.get("from_agent")
    if d.get("channel") == "all_groupchat":
        return [a for a in range(task.num_agents) if a != sender]
    mid = d.get("meeting_id")
    for m in task.meetings:
        if m.id == mid:
            return [a for a in m.participants if a != sender]
    return []


async def export_study(study, store, out_dir: str | Path, *, skipped: list[str] | None = None,
                       reveal: bool = False, include_simulated: bool = False) -> dict[str, int]:
    """Write every CSV and ``codebook.md`` into ``out_dir``; returns rows per file.  Games in
    play are left out, one line each in ``skipped`` (see :func:`study_rows`).  Every file has a
    ``simulated`` column; simulated participants' rows (a dry run into the study's database)
    are left out unless ``include_simulated``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = await study_rows(study, store, skipped=skipped, reveal=reveal)
    if not include_simulated:
        rows = {name: ([r for r in got if not r.get("simulated")] if isinstance(got, list) else got)
                for name, got in rows.items()}
    counts = {}
    for name, (_, cols) in CODEBOOK.items():
        with open(out / name, "w", newline="", encoding="utf-8") as fh:
            write_dicts(fh, [c for c, _ in cols],  # formula cells neutralised (lab/csvfile.py)
                        ({k: ("" if v is None else v) for k, v in r.items()} for r in rows[name]))
        counts[name] = len(rows[name])
    (out / "codebook.md").write_text(codebook_markdown(), encoding="utf-8")
    (out / "study.json").write_text(json.dumps(study.model_dump(mode="json"), indent=2), encoding="utf-8")
    return counts
