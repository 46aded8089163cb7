"""Issue 35 item 4: "verified" means verified.

A corpus of edited traces, made programmatically from real saved games: every one must
be caught by the check ``calbench import`` and ``calbench trace`` run
(``lab.replaycheck.verify_game``).  Before, a removed or duplicated ``turn_*``/``decide_*``
event with ``seq`` renumbered passed (32 and 33 of 46), and so did relabelling every seat
of an IMAP game as an LLM, replaced message text, an edited ``game_end.coordination_rate``,
``num_agents`` or ``scenario_seed``.
"""

from __future__ import annotations

import asyncio
import copy
import json

import pytest

from lab.replaycheck import verify_game

from .helpers import our_trace

CALLS = ("turn_start", "turn_end", "decide_start", "decide_end")


def clone(trace):
    """A deep copy (a trace is JSON; this is several times faster than copy.deepcopy)."""
    return json.loads(json.dumps(trace))


def renumber(t):
    for i, e in enumerate(t["events"]):
        e["seq"] = i
    return t


def removed(trace, i):
    t = clone(trace)
    del t["events"][i]
    return renumber(t)


def doubled(trace, i):
    t = clone(trace)
    t["events"].insert(i + 1, clone(t["events"][i]))
    return renumber(t)


def relabelled(trace, *, prompts=False, label=False):
    """Every seat an LLM: config, game_start and agent_registered (and the saved label)."""
    t = clone(trace)
    n = len(t["config"]["agents"])
    for a in t["config"]["agents"]:
        a.update(type="llm", kind="llm", model="llm:gpt-4o")
    for e in t["events"]:
        d = e["data"]
        if e["type"] == "game_start":
            d["agent_types"], d["agent_models"] = ["llm"] * n, ["llm:gpt-4o"] * n
        elif e["type"] == "agent_registered":
            d.update(agent_type="llm", kind="llm", model="llm:gpt-4o")
    if label:
        t["saved"] = {"agents": "llm:gpt-4o", "status": "completed"}
    return t


def edited(trace, how):
    t = clone(trace)
    ev = t["events"]
    first = lambda typ: next(e for e in ev if e["type"] == typ)  # noqa: E731
    if how == "message text":
        first("dm_sent")["data"]["content"] = "Agent 0 says nothing of use."
    elif how == "message text, sender's turn too":  # the sender is scripted: its bot says otherwise
        msg = first("dm_sent")["data"]
        end = next(e for e in reversed(ev[:ev.index(first("dm_sent"))]) if e["type"] == "turn_end")
        for call in end["data"]["tool_calls"]:
            if call.get("content") == msg["content"]:
                call["content"] = "Agent 0 says nothing of use."
        for e in ev:
            if e["type"] == "dm_sent" and e["data"]["content"] == msg["content"]:
                e["data"]["content"] = "Agent 0 says nothing of use."
    elif how == "delivered text":
        drained = next(e for e in ev if e["type"] == "turn_start" and e["data"]["inbox_drained"])
        drained["data"]["inbox_drained"][0]["content"] = "something never sent"
    elif how == "delivery dropped":
        drained = next(e for e in ev if e["type"] == "turn_start" and e["data"]["inbox_drained"])
        drained["data"]["inbox_drained"].pop(0)
    elif how == "game_end.coordination_rate":
        ev[-1]["data"]["coordination_rate"] = 0.2
    elif how == "game_start.num_agents":
        first("game_start")["data"]["num_agents"] = 6
    elif how == "config.num_agents":
        t["config"]["num_agents"] = 6
    elif how == "game_start.scenario_seed":
        first("game_start")["data"]["scenario_seed"] = 99
    elif how == "config.seed":
        t["config"]["seed"] = 99
    elif how == "one seat relabelled in config only":
        t["config"]["agents"][1].update(type="llm", kind="llm", model="llm:gpt-4o")
    elif how == "one seat relabelled in its agent_registered only":
        next(e for e in ev if e["type"] == "agent_registered")["data"].update(agent_type="dsm-welfare",
                                                                              model="dsm-welfare")
    elif how == "a scripted seat's decision moved":  # its batch and calendars follow, the fold agrees
        end = next(e for e in ev if e["type"] == "decide_end")
        end["data"]["text"] = "changed my mind"
    elif how == "speaker order":
        first("round_start")["data"]["speaker_order"].reverse()
    elif how == "a turn's prompt":
        first("turn_start")["data"]["prompt_sent"] = "a prompt a scripted seat was never sent"
    return t


EDITS = ("message text", "message text, sender's turn too", "delivered text", "delivery dropped",
         "game_end.coordination_rate", "game_start.num_agents", "config.num_agents", "game_start.scenario_seed",
         "config.seed", "one seat relabelled in config only", "one seat relabelled in its agent_registered only",
         "a scripted seat's decision moved", "speaker order", "a turn's prompt")


def corpus(trace):
    """Every edit of the issue, from one real game: each call event removed and doubled
    (``seq`` renumbered), the seats relabelled, fields edited."""
    out = []
    for i, e in enumerate(trace["events"]):
        if e["type"] in CALLS:
            out.append((f"event {i} ({e['type']}) removed", removed(trace, i)))
            out.append((f"event {i} ({e['type']}) doubled", doubled(trace, i)))
    out.append(("every seat relabelled an LLM", relabelled(trace)))
    out.append(("every seat relabelled an LLM, saved label too", relabelled(trace, label=True)))
    out.extend((how, edited(trace, how)) for how in EDITS)
    return out


def verdicts(items):
    async def go():
        return [(name, (await verify_game(t)).verified) for name, t in items]
    return asyncio.run(go())


@pytest.mark.parametrize("agents", ["imap", "imap,sdmap,dsm-welfare,dsm-private,imap"])
def test_every_edit_of_a_real_game_is_caught(agents):
    trace = our_trace(3, agents)
    assert verdicts([("as played", clone(trace))]) == [("as played", True)]
    items = corpus(trace)
    got = verdicts(items)
    passed = [name for name, ok in got if ok]
    print(f"{agents}: {len(items) - len(passed)} of {len(items)} edits caught")
    assert len(items) > 200 and passed == []


def test_a_relabelled_imap_game_does_not_import_verified(tmp_path, cli):
    """Before: imported as verified, and ``report`` credited IMAP's 100 % to the persona llm."""
    db = str(tmp_path / "r.db")
    f = tmp_path / "relabelled.json"
    f.write_text(json.dumps(relabelled(our_trace(3), label=True)))
    rc, _, err = cli("import", str(f), "--db", db)
    assert rc == 1 and "does not verify, not imported" in err and "no system prompt" in err
    rc, out, _ = cli("trace", str(f))
    assert rc == 1 and "Not verified" in out


async def test_an_llm_game_verifies_and_its_edits_are_caught(mock, make_settings):
    """LLM seats are played again from their own recorded replies: their game verifies; a
    dropped LLM turn, or a delivery that differs from what the LLM sent, does not."""
    from engine.game import GameConfig, run_game
    from engine.generate import generate_scenario
    from personas.llm.factory import make_llm_persona
    from personas.registry import make_personas

    task = generate_scenario(4)
    settings = make_settings(mock, reflection=True)
    seats = [make_llm_persona("llm:mock-model", settings) if a % 2 else make_personas("imap", 1)[0]
             for a in range(task.num_agents)]
    trace = json.loads(json.dumps((await run_game(task, seats, GameConfig(deterministic=True))).trace))
    assert (await verify_game(trace)).verified
    llm_turn = next(i for i, e in enumerate(trace["events"]) if e["type"] == "turn_end" and e["data"]["agent_id"] % 2)
    llm_msg = next(e for e in trace["events"] if e["type"] == "dm_sent" and e["data"]["from_agent"] % 2)
    forged = copy.deepcopy(trace)
    next(e for e in forged["events"] if e["seq"] == llm_msg["seq"])["data"]["content"] = "forged"
    for name, t in (("turn removed", removed(trace, llm_turn)), ("turn doubled", doubled(trace, llm_turn)),
                    ("message forged", forged)):
        res = await verify_game(t)
        assert not res.verified, name
