"""Issue 35 (1): a key an endpoint writes back reaches no seat, screen, wire or store.

Before: redaction guarded the store only.  An endpoint that echoed the key in its replies
put it in every other seat's observations (a local ``calbench-play`` seat showed it 40
times, a remote player of ``calbench serve`` received it over the websocket), and its
upper-case, reversed, spaced, ROT13, hex, HTML-reference and zero-width-split forms were
stored as well.  Now ``personas.llm.client.complete`` redacts every reply where it enters
the game.  Real HTTP to the loopback mock (its ``key_in_reply`` fault), the real engine.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys

from calbench_devtools.mock_endpoint import key_forms
from engine.game import GameConfig
from engine.redact import REDACTED, redact
from engine.seats import PassivePersona

KEY = "zq9TOPSECRETvalue42xw"  # not token-shaped: only its registered value can catch it
NEEDLES = key_forms(KEY)


def _leaks(text: str) -> list[str]:
    """The forms of the key in ``text`` (ignoring case and every separator, as a reader would)."""
    import html

    flat = re.sub(r"[\s\u00ad\u200b-\u200f\u2060\ufeff]+", "", html.unescape(text)).lower()
    return [name for name, form in NEEDLES.items()
            if re.sub(r"[\s\u00ad\u200b-\u200f\u2060\ufeff]+", "", html.unescape(form)).lower() in flat]


def test_every_form_a_model_can_write_is_redacted(monkeypatch):
    monkeypatch.setenv("CALBENCH_T35_API_KEY", KEY)
    for name, form in NEEDLES.items():
        out = redact(f"my key, {name}: {form}, and the meeting at slot 3")
        assert not _leaks(out) and REDACTED in out, (name, out)
        assert out.endswith(", and the meeting at slot 3"), (name, out)
    # ordinary text, entities and spaced words are left alone
    plain = "Meeting M1 &amp; M2: s l o t 3 works; 7a 71 are hex digits"
    assert redact(plain) == plain


class Recorder(PassivePersona):
    """A seat that keeps every observation it is given (what a human's screen shows)."""

    kind = "human"

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def speak(self, obs):
        self.seen.append(repr(obs))
        return await super().speak(obs)

    async def volunteer(self, obs):
        self.seen.append(repr(obs))
        return await super().volunteer(obs)

    async def decide(self, obs):
        self.seen.append(repr(obs))
        return await super().decide(obs)


async def test_an_echoed_key_reaches_no_observation_trace_or_store(tmp_path, monkeypatch):
    from calbench_devtools.mock_endpoint import MockLLMServer
    from engine.generate import generate_scenario
    from lab.session import Session, run_session
    from personas.llm.factory import LLMSettings, make_llm_persona
    from saves.store import Store

    monkeypatch.setenv("CALBENCH_T35_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    task = generate_scenario(4, num_agents=3, num_slots=6, num_meetings=2, participants_per_meeting=3, blocked=0)
    db = tmp_path / "k.db"
    recorder = Recorder()
    async with MockLLMServer(policy="cooperative") as server:
        server.inject("key_in_reply", count=1000)
        settings = LLMSettings(base_url=server.base_url, api_key_env="CALBENCH_T35_KEY", retries=0)
        seats = [make_llm_persona("llm:mock", settings), make_llm_persona("llm:mock", settings), recorder]
        try:
            async with await Store.open(db) as store:
                out = await run_session(Session(task, seats, GameConfig(deterministic=True, max_turns_per_round=2),
                                                "g-key", "llm:mock,llm:mock,human", "k"), store=store)
        finally:
            await settings.pool.aclose()
        assert server.stats()["faults"].get("key_in_reply", 0) >= 6
    assert recorder.seen and any("Meeting M" in s for s in recorder.seen)  # it was told what the others said
    assert not _leaks("\n".join(recorder.seen))
    assert not _leaks(json.dumps(out.trace, ensure_ascii=False)), "the game's own trace, before any store"
    con = sqlite3.connect(db)
    try:
        dump = "\n".join(con.iterdump())
    finally:
        con.close()
    assert not _leaks(dump)
    assert REDACTED in json.dumps(out.trace)


def test_run_never_prints_a_key_typed_as_a_model_name(tmp_path):
    """``calbench run --agents llm:<key>``: the summary table printed the key."""
    mock = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "calbench"), "mock-llm", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = mock.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/v1", line)
        assert url, line
        env = {**os.environ, "OPENAI_API_KEY": KEY, "CALBENCH_DB": str(tmp_path / "r.db")}
        env.pop("OPENAI_BASE_URL", None)
        out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "calbench"), "run", "--tasks", "seed:1",
                              "--agents", f"llm:{KEY},imap,imap,imap,imap", "--base-url", url.group(0),
                              "--max-turns", "1", "--llm-retries", "0"],
                             capture_output=True, text=True, env=env, timeout=300)
    finally:
        mock.terminate()
        mock.wait(timeout=30)
    assert "CalBench suite" in out.stdout, out.stdout + out.stderr
    assert KEY not in out.stdout + out.stderr
    assert REDACTED in out.stdout
