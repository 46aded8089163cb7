"""Issue 15 (3): an API key quoted back by an endpoint never reaches the store, a trace,
a failure trace or the terminal.  Real HTTP to the loopback mock; a real SQLite file."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))

from llmkit import small_task  # noqa: E402

from engine.game import GameConfig  # noqa: E402
from engine.redact import REDACTED, redact, redact_obj  # noqa: E402

SECRET = "sk-test-SECRET123abcdef"


def test_redact_removes_the_key_value_and_token_shapes(monkeypatch):
    monkeypatch.setenv("CALBENCH_TEST_API_KEY", "plainvalue-0123456789")
    text = ("Incorrect API key provided: Bearer abc.def-123456; also sk-proj-ZZZZ99999999 and "
            "plainvalue-0123456789 and a normal sentence about slot 7")
    out = redact(text)
    assert "abc.def-123456" not in out and "sk-proj-ZZZZ99999999" not in out and "plainvalue" not in out
    assert out.count(REDACTED) == 3 and "a normal sentence about slot 7" in out
    # JSON stays JSON
    blob = json.dumps({"detail": text, "n": [1, 2]})
    assert json.loads(redact(blob))["n"] == [1, 2]
    assert redact_obj({"a": [text], "b": 3}) == {"a": [out], "b": 3}
    # ordinary words that merely contain "sk-" or "bearer" stay
    assert redact("ask-me about the bearer of news") == "ask-me about the bearer of news"


async def test_a_key_quoted_by_a_401_is_stored_nowhere(tmp_path, monkeypatch, capsys):
    """The issue's reproduction: an endpoint whose 401 says 'Incorrect API key provided:
    Bearer sk-test-SECRET123' — before the fix the secret was stored 17x in the database
    and 21x in the exported trace.  After: 0 and 0."""
    from lab.session import Session, run_session
    from personas.llm.factory import LLMSettings, make_llm_persona
    from calbench_devtools.mock_endpoint import MockLLMServer
    from saves.store import Store

    monkeypatch.setenv("CALBENCH_T15_KEY", SECRET)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    task = small_task()
    db = tmp_path / "r.db"
    async with MockLLMServer(policy="cooperative") as server:
        server.inject("unauthorized_echo", count=40)
        settings = LLMSettings(base_url=server.base_url, api_key_env="CALBENCH_T15_KEY", retries=0)
        seats = [make_llm_persona("llm:mock", settings) for _ in range(task.num_agents)]
        store = await Store.open(db)
        try:
            out = await run_session(Session(task, seats, GameConfig(deterministic=True, max_turns_per_round=2),
                                            "g-secret", "llm:mock", "k"), store=store)
            trace = await store.load_trace("g-secret")
        finally:
            await store.close()
            await settings.pool.aclose()
        assert server.stats()["faults"].get("unauthorized_echo", 0) >= 5  # the endpoint did quote the key
    assert out.status == "completed"
    details = [e["data"].get("detail") or "" for e in trace["events"] if e["type"] == "seat_timeout"]
    assert details and all("Incorrect API key provided" in d and REDACTED in d for d in details)
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())  # db, -wal, -shm
    assert raw.count(SECRET.encode()) == 0 and raw.count(b"SECRET123") == 0
    con = sqlite3.connect(db)
    dump = "\n".join(con.iterdump())
    con.close()
    assert "SECRET123" not in dump
    assert "SECRET123" not in json.dumps(trace)


def test_a_session_failure_trace_is_redacted(monkeypatch):
    from lab.session import Session, failure_trace

    monkeypatch.setenv("CALBENCH_T15_KEY2", SECRET)
    from engine.redact import register_secret_env

    register_secret_env("CALBENCH_T15_KEY2")
    task = small_task()
    try:
        raise RuntimeError(f"endpoint said: key {SECRET} is wrong (Authorization: Bearer {SECRET})")
    except RuntimeError as exc:
        tr = failure_trace(Session(task, [], GameConfig(), "g", "x", "k"), [], exc)
    assert "SECRET123" not in tr["error"] and "SECRET123" not in tr["error_traceback"]
    assert REDACTED in tr["error"]


async def test_the_store_redacts_whatever_reaches_it(tmp_path):
    """The last line of defence: a trace whose text holds a token is written without it."""
    from saves.store import Store

    trace = {"game_id": "g1", "config": {"note": f"Bearer {SECRET}"}, "stopped": True,
             "events": [{"seq": 0, "type": "parse_error", "timestamp": "t",
                         "data": {"agent_id": 0, "detail": f"HTTP 401: Incorrect API key provided: {SECRET}"}}],
             "error": f"boom {SECRET}"}
    async with await Store.open(tmp_path / "s.db") as store:
        assert await store.import_trace(trace)
        back = await store.load_trace("g1")
    assert "SECRET123" not in json.dumps(back)
    assert back["events"][0]["data"]["detail"].endswith(REDACTED)


def test_cli_error_lines_are_redacted(cli, tmp_path):
    bad = tmp_path / f"{SECRET}.json"
    rc, out, err = cli("trace", str(bad))
    assert rc == 2 and "SECRET123" not in err and REDACTED in err


async def test_no_choices_is_a_clear_bad_response(mock, make_settings):
    """Issue 15 (7): '"choices": []' was recorded as 'IndexError: list index out of range'."""
    from personas.llm.client import complete

    settings = make_settings(mock, retries=0)
    mock.inject("no_choices")
    res = await complete(settings.pool.client(settings), [{"role": "user", "content": "hi"}], settings,
                         model="mock")
    assert res.failure == "bad_response"
    assert "no choices" in res.failure_detail and "IndexError" not in res.failure_detail


def test_a_key_replaced_in_place_is_redacted_at_once(monkeypatch):
    """The secrets are cached for up to a second (the store asks for every row); a key
    replaced in the environment without changing its size — a notebook's
    ``os.environ["OPENAI_API_KEY"] = new`` right after a run, or a variable swapped for
    another — is redacted at once, not a second later."""
    from engine import redact as r

    old, new = "Qx7old" + "a" * 30, "Qx7new" + "b" * 30  # no key shape: found only as the variable's value
    monkeypatch.setenv("OPENAI_API_KEY", old)
    assert old not in r.redact(f"key {old}")
    monkeypatch.setenv("OPENAI_API_KEY", new)  # same size, within the second
    assert new not in r.redact(f"key {new}") and r.REDACTED in r.redact(f"key {new}")
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("OTHER_SERVICE_API_KEY", "zz-" + "c" * 30)  # one variable swapped for another
    assert "zz-" + "c" * 30 not in r.redact("zz-" + "c" * 30)


def test_packed_events_are_redacted_as_their_text_is(monkeypatch):
    """``redact_utf8`` (the store's packed events) gives what ``redact`` of the decoded text
    gives: with a key in the environment, with token shapes, with an HTML-escaped key; a
    document with nothing to redact comes back as the very same bytes."""
    from engine import redact as r

    key = "Zq9" + "k" * 30
    docs = [json.dumps({"content": f"my key is {key}"}), json.dumps({"detail": "Authorization: Bearer abcdef123456789"}),
            json.dumps({"t": "sk-proj-" + "Z" * 20}), json.dumps({"t": "&#90;q9" + "k" * 30}),
            json.dumps({"t": "Basic " + "dXNlcjpwYXNzd29yZDEyMzQ="}), json.dumps({"t": "slot 7 works, Ünïcode ok"})]
    for with_key in (False, True):
        if with_key:
            monkeypatch.setenv("CALBENCH_TEST_API_KEY", key)
        for doc in docs:
            assert r.redact_utf8(doc.encode()) == r.redact(doc).encode(), doc
    clean = json.dumps({"t": "slot 7 works"}).encode()
    monkeypatch.delenv("CALBENCH_TEST_API_KEY")
    assert r.redact_utf8(clean) is clean


def test_long_packed_events_are_searched_for_every_token_shape():
    """A long document (the store's packed events) is first searched with the bytes no token
    shape's marker holds sieved out: every shape, in either case, is still found there and
    redacted as ``redact`` does; a marker whose bytes are only adjacent once sieved (``t_ask-7``)
    is not one, and the document comes back as the very same bytes."""
    from engine import redact as r

    pad = json.dumps({"round": 3, "timestamp": "2026-12-03T16:59:33.544443+00:00", "slots": list(range(16))}) * 200
    shapes = ["sk-proj-" + "Z" * 20, "Authorization: Bearer abcdef123456789", "BEARER abcdef123456789",
              "bearer abcdef123456789", "Basic dXNlcjpwYXNzd29yZDEyMzQ=", "BASIC dXNlcjpwYXNzd29yZDEyMzQ="]
    for shape in shapes:
        for at in (0, len(pad) // 2, len(pad)):
            doc = (pad[:at] + json.dumps({"detail": shape}) + pad[at:]).encode()
            assert len(doc) > 16384
            out = r.redact_utf8(doc)
            assert out == r.redact(doc.decode()).encode() and out != doc, shape
    for near in ("t_ask-7", "be4arer", "ea-rer", "bas ic ", "a.s.i.c ", "ASI C "):
        doc = (pad + json.dumps({"detail": near}) + pad).encode()
        assert r.redact_utf8(doc) is doc, near
