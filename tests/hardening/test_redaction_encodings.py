"""Issue 24 (7): every encoding of a key is redacted, in every column and in argparse's lines.

Before: a key holding ``"`` or ``\\`` was stored in its JSON-escaped form (``\\"``, ``\\\\``)
where ``redact`` looked for the raw text only (90 copies in one game); URL-encoded and
basic-auth (base64 of ``user:key``) forms went through; ``games.agents`` and
``seat_results.model`` were written without redaction; argparse's error line echoed the
offending argument.  Real HTTP to the loopback mock; a real SQLite file.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))

from llmkit import small_task  # noqa: E402

from engine.game import GameConfig  # noqa: E402
from engine.redact import REDACTED, redact  # noqa: E402

# not token-shaped (no "sk-", no "Bearer" right before a long run): only its value can catch it
KEY = 'pa"ss\\w0rd/QUOTEKEY+9=x'
NEEDLE = "QUOTEKEY"  # in every readable encoding of the key but base64


@pytest.fixture(autouse=True)
def _fresh_secrets(monkeypatch):
    """The known secrets worked out again for each test.  engine.redact keeps them for a
    second unless the environment's size or a key variable's value changes, so a test that
    ran just before on this worker and left a new key variable in place of another one (as
    large an environment, no known key changed) would make this test see the old set."""
    import engine.redact

    monkeypatch.setattr(engine.redact, "_cache", None)


def _forms(key: str) -> dict[str, str]:
    once = json.dumps(key)[1:-1]
    return {"raw": key, "json": once, "json2": json.dumps(once)[1:-1], "url": quote(key, safe=""),
            "url_plus": quote_plus(key), **{f"b64:{u or 'empty'}": base64.b64encode(f"{u}:{key}".encode()).decode()
                                             for u in ("", "u", "us", "user")}}


def test_every_encoding_of_a_registered_key_is_redacted(monkeypatch):
    monkeypatch.setenv("CALBENCH_T24_API_KEY", KEY)
    for name, form in _forms(KEY).items():
        out = redact(f"the endpoint said: {form} was refused")
        assert form not in out and REDACTED in out, name
        if not name.startswith("b64"):
            assert NEEDLE not in out, name
        else:  # what is left of the base64 cannot give the key back: the user's part and at most
            # one group (up to 2 key bytes) at each end
            user = name.split(":")[1].replace("empty", "")
            left = out.replace("the endpoint said: ", "").replace(" was refused", "").replace(REDACTED, "")
            assert len(left) <= len(base64.b64encode(f"{user}:".encode())) + 8, (name, out)
    # a basic-auth header is redacted whole, whoever's credential it is
    other = base64.b64encode(b"alice:not-a-registered-one").decode()
    assert redact(f"Authorization: Basic {other}") == f"Authorization: Basic {REDACTED}"
    assert redact("basic information, basically") == "basic information, basically"


def _every_text(db: Path) -> str:
    """Every byte of the database readable: its dump plus the decompressed event blobs."""
    import zstandard

    con = sqlite3.connect(db)
    try:
        dump = "\n".join(con.iterdump())
        blobs = [zstandard.ZstdDecompressor().decompress(b).decode() for (b,) in
                 con.execute("SELECT data FROM event_blobs")]
    finally:
        con.close()
    return dump + "\n".join(blobs)


async def test_a_quoted_key_echoed_by_the_endpoint_is_stored_in_no_form(tmp_path, monkeypatch):
    """The issue's reproduction: the 401 quotes the Authorization header; the key holds
    a quote and a backslash, so the stored JSON holds it escaped."""
    from lab.session import Session, run_session
    from personas.llm.factory import LLMSettings, make_llm_persona
    from calbench_devtools.mock_endpoint import MockLLMServer
    from saves.store import Store

    monkeypatch.setenv("CALBENCH_T24_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    task = small_task()
    db = tmp_path / "r.db"
    async with MockLLMServer(policy="cooperative") as server:
        server.inject("unauthorized_echo", count=40)
        settings = LLMSettings(base_url=server.base_url, api_key_env="CALBENCH_T24_KEY", retries=0)
        seats = [make_llm_persona("llm:mock", settings) for _ in range(task.num_agents)]
        store = await Store.open(db)
        try:
            await run_session(Session(task, seats, GameConfig(deterministic=True, max_turns_per_round=2),
                                      "g-quoted", "llm:mock", "k"), store=store)
            trace = await store.load_trace("g-quoted")
        finally:
            await store.close()
            await settings.pool.aclose()
        assert server.stats()["faults"].get("unauthorized_echo", 0) >= 5
    text = _every_text(db) + json.dumps(trace) + json.dumps(trace, ensure_ascii=False)
    assert NEEDLE not in text
    assert REDACTED in text


async def test_an_endpoint_body_quoted_as_json_is_stored_without_the_key(tmp_path, monkeypatch):
    """An error detail that quotes the endpoint's JSON body holds the key JSON-escaped
    (``pa\\"ss\\\\w0rd``); stored as JSON it is escaped twice.  Before: stored as it was, in
    the event rows, the blob of the finished game and the export.  After: in no form."""
    from saves.store import Store

    monkeypatch.setenv("CALBENCH_T24_API_KEY", KEY)
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}})
    trace = {"game_id": "g-body", "config": {"note": body}, "stopped": True,
             "events": [{"seq": 0, "type": "seat_timeout", "timestamp": "t",
                         "data": {"agent_id": 0, "detail": f"HTTP 401: {body}"}}],
             "error": f"endpoint answered {body}"}
    db = tmp_path / "b.db"
    async with await Store.open(db) as store:
        assert await store.import_trace(json.loads(json.dumps(trace)))
        back = await store.load_trace("g-body")
    assert NEEDLE not in _every_text(db)
    assert NEEDLE not in json.dumps(back) and REDACTED in back["events"][0]["data"]["detail"]


async def test_agents_and_model_columns_are_redacted(tmp_path, monkeypatch):
    """A key typed into a model name (``--agents llm:<key>``) reached games.agents and
    seat_results.model as it was."""
    from engine.generate import generate_scenario
    from lab.session import Session, run_session
    from personas.registry import make_personas
    from saves.store import Store

    monkeypatch.setenv("CALBENCH_T24_API_KEY", KEY)
    task = generate_scenario(3)
    class Named:  # a scripted seat under a model name that holds the key
        def __init__(self, inner, model):
            self.inner, self.model, self.kind = inner, model, getattr(inner, "kind", "scripted")

        def __getattr__(self, name):
            return getattr(self.inner, name)

    seats = make_personas("imap", task.num_agents)
    seats[1] = Named(seats[1], f"llm:{KEY}")
    spec = ",".join(["imap", f"llm:{KEY}", "imap", "imap", "imap"])
    db = tmp_path / "a.db"
    async with await Store.open(db) as store:
        out = await run_session(Session(task, seats, GameConfig(deterministic=True), "g-agents", spec,
                                        f"run:{spec}"), store=store)
        assert out.status == "completed"
        trace = json.loads(json.dumps(out.trace))
        trace["game_id"] = "g-imported"
        trace["saved"] = {"agents": spec, "settings_key": f"import:{spec}", "status": "completed"}
        await store.import_trace(trace)
    con = sqlite3.connect(db)
    try:
        agents = [r[0] for r in con.execute("SELECT agents FROM games")]
        keys = [r[0] for r in con.execute("SELECT settings_key FROM games")]
        models = [r[0] for r in con.execute("SELECT model FROM seat_results")]
        personas = [r[0] for r in con.execute("SELECT persona FROM seat_results")]
    finally:
        con.close()
    assert len(agents) == 2 and all(REDACTED in a for a in agents)
    assert not any(NEEDLE in str(v) for v in agents + keys + models + personas)
    assert NEEDLE not in _every_text(db)


@pytest.mark.parametrize("argv", [
    ["calbench", "run", "--tasks", "seed:1", "--max-turns", KEY],
    ["calbench", "games", "--status", KEY],
    ["calbench", "games", KEY],  # "unrecognized arguments: <KEY>"
    ["calbench-play", "--seat", KEY],
])
def test_argparse_error_lines_are_redacted(argv, tmp_path):
    import os

    env = {**os.environ, "CALBENCH_T24_API_KEY": KEY, "CALBENCH_DB": str(tmp_path / "x.db")}
    exe = os.path.join(os.path.dirname(sys.executable), argv[0])
    out = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2
    assert "error:" in out.stderr and NEEDLE not in out.stderr and REDACTED in out.stderr, out.stderr


async def test_study_rows_are_redacted(tmp_path, monkeypatch):
    """A participant's free-text answer and a step's error text are columns too."""
    from saves.store import Store
    from saves.study import StudyStore

    monkeypatch.setenv("CALBENCH_T24_API_KEY", KEY)
    db = tmp_path / "st.db"
    async with await Store.open(db) as store:
        s = StudyStore(store, "pilot")
        await s.add_participant("P1", slot=0, simulated=False, assignment=[], steps=["consent", "questionnaire:post"],
                                design_hash="h")
        await s.add_answers("P1", 1, "post", [{"item": "comments", "response": f"my key is {KEY}"}])
        await s.complete_step("P1", 0, data={"status": "failed", "error": f"endpoint said {json.dumps(KEY)}"})
    assert NEEDLE not in _every_text(db)
