"""``calbench report`` carries the paper's message audit (§4.3; issue 21): a table and
``message_audit`` in the JSON, for protocol seats (typed payloads) and LLM seats (free text,
played over real HTTP against the loopback mock)."""

from __future__ import annotations

import json

import pytest

from engine.audit import CATEGORIES


@pytest.fixture
def filled_db(cli, tmp_path, threaded_mock, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-stored")
    base_url, _server = threaded_mock(policy="cooperative")
    db = tmp_path / "audit.db"
    for agents in ("imap", "sdmap", "dsm-private"):
        rc, _, err = cli("run", "--tasks", "canonical:0-1", "--agents", agents, "--deterministic", "--db", str(db),
                         "--concurrency", "1")
        assert rc == 0, err
    rc, _, err = cli("run", "--tasks", "canonical:0-1", "--agents", "llm:mock-model,imap,imap,imap,imap",
                     "--base-url", base_url, "--deterministic", "--db", str(db))
    assert rc == 0, err
    return db


def test_report_json_and_table_carry_the_audit(cli, filled_db):
    rc, out, err = cli("report", "--db", str(filled_db), "--json")
    assert rc == 0, err
    audit = json.loads(out)["message_audit"]
    assert audit["categories"] == list(CATEGORIES)
    groups = {g["group"]: g for g in audit["groups"]}
    imap = groups["imap"]
    assert imap["typed"] > 0 and imap["availability"]["rate"] > 0.6 and imap["cost"]["rate"] > 0.3
    assert groups["sdmap"]["cost"]["rate"] == 0  # binary feasibility never names a cost
    assert groups["dsm-private"]["refusal"]["rate"] > 0  # its failed single offers
    llm = next(g for name, g in groups.items() if name.startswith("llm"))
    assert llm["free_text"] == llm["messages"] > 0 and llm["typed"] == 0
    assert llm["availability"]["rate"] > 0 and llm["proposal"]["rate"] > 0
    # every seat's own record, joinable with the seat results
    seats = audit["seats"]
    assert {s["persona"] for s in seats} >= {"imap", "sdmap", "dsm-private"}
    assert all(set(CATEGORIES) <= set(s) and s[c]["n"] <= s["messages"] for s in seats for c in CATEGORIES)
    rc, out, err = cli("report", "--db", str(filled_db))
    assert rc == 0, err
    text = " ".join(out.split())
    assert "Message audit (paper §4.3)" in text and "Availability" in text and "Refusal" in text


def test_a_paper_mode_protocol_counts_as_scripted():
    from lab.report.stats import is_scripted

    assert is_scripted("dsm-private@paper") and is_scripted("dsm-private-requeue") and not is_scripted("llm:x@y")
