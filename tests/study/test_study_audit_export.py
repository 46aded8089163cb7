"""``study export`` writes the paper's message audit (issue 21): ``message_audit.csv``, one row
per game × seat, LLM seats played over real HTTP against the loopback mock."""

from __future__ import annotations

import asyncio
import csv

from studykit import example_text


async def test_export_has_the_message_audit(cli, tmp_path, mock_llm):
    p = tmp_path / "study.toml"
    p.write_text(example_text(mock_llm.base_url))
    db = tmp_path / "s.db"
    rc, _out, err = await asyncio.to_thread(cli, "study", "check", str(p), "--dry-run", "--db", str(db))
    assert rc == 0, err
    out = tmp_path / "data"
    rc, _out, err = await asyncio.to_thread(cli, "study", "export", str(p), "--db", str(db), "--out", str(out),
                                            "--include-simulated")
    assert rc == 0, err
    with open(out / "message_audit.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert "## message_audit.csv" in (out / "codebook.md").read_text()
    kinds = {r["kind"] for r in rows}
    assert {"llm", "protocol", "human"} <= kinds
    for r in rows:
        n = int(r["messages"])
        assert n == int(r["typed"]) + int(r["free_text"]) and int(r["talk_rounds"]) >= 1
        for c in ("proposal", "availability", "cost", "question", "refusal"):
            assert 0 <= int(r[c]) <= n
            assert abs(float(r[f"{c}_rate"]) - int(r[c]) / n) < 1e-6
    llm = [r for r in rows if r["kind"] == "llm"]
    assert llm and all(r["free_text"] == r["messages"] for r in llm)
    assert sum(int(r["availability"]) for r in llm) > 0
    proto = [r for r in rows if r["kind"] == "protocol"]
    assert proto and sum(int(r["typed"]) for r in proto) > 0
    # the rows join the other files on game_id and seat
    with open(out / "games.csv", newline="") as fh:
        games = {(g["game_id"], g["seat"]): g for g in csv.DictReader(fh)}
    assert all((r["game_id"], r["seat"]) in games and games[(r["game_id"], r["seat"])]["kind"] == r["kind"]
               for r in rows)
