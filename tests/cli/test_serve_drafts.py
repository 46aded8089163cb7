"""Issue 30 item 3 in the browser: a participant who closes the tab mid-talk keeps what they
queued and what they were typing (drafts.csv), as with ctrl+q in a terminal — ``serve --study``
for real, the page driven over its websocket by the light client."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from calbench_devtools.page_client import PageClient

REPO = Path(__file__).resolve().parents[2]
QUEUED = "I can do slot 3"
TYPED = "and maybe slot"


def _partial_timed(db: Path) -> bool:
    try:
        with sqlite3.connect(db) as con:
            return bool(con.execute("SELECT count(*) FROM study_timings WHERE partial = 1").fetchone()[0])
    except sqlite3.Error:
        return False


def _short_study(tmp_path: Path) -> Path:
    """The example study cut to consent, instructions and one scripted game (no quiz, no
    questionnaires, no practice, no belief grid): the quickest way to a talk turn."""
    from lab.study.example import EXAMPLE

    text = EXAMPLE
    start = text.index("[[conditions]]\nname = \"llm\"")
    text = text[:start] + text[text.index("[tasks]"):]
    for head in ("[[quiz]]", "[[questionnaires]]"):
        while head in text:
            i = text.index(head)
            j = min(k for k in (text.find("\n[", i + 1), len(text)) if k > 0)
            text = text[:i] + text[j + 1:]
    text = (text.replace('practice = "seed:99"', "")
            .replace('pool = ["seed:100", "seed:101", "seed:102", "seed:103"]', 'pool = ["seed:100"]')
            .replace("enabled = true", "enabled = false")
            .replace("seats = [0, 2]", "seats = [0]"))
    p = tmp_path / "study.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("end", ["tab closed", "host stopped"])
def test_a_page_ended_mid_talk_keeps_the_draft(tmp_path, end):
    """``tab closed``: the page's socket closes (no ctrl+q); ``host stopped``: the server is
    stopped (ctrl+c at its terminal) while the page is still open."""
    pytest.importorskip("textual_serve")
    from lab.study.model import load_study

    study = _short_study(tmp_path)
    load_study(study)  # a valid study file
    db = tmp_path / "s.db"
    cmd = [sys.executable, "-c", "import sys; from calbench_cli.cli import main; sys.exit(main())", "serve",
           "--study", str(study), "--participants", "P01", "--port", "0", "--json", "--db", str(db)]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "TEXTUAL_ANIMATIONS": "none"})
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        info = json.loads(line)
        code = info["participants"][0]["code"]
        ws = info["web"].replace("http://", "ws://").rstrip("/") + f"/ws/{code}"

        async def participant() -> None:
            page = await PageClient(ws, width=120, height=40).connect()
            try:
                assert await page.wait_for("to agree", timeout=180), page.text[-2000:]
                await page.key("y")
                n = len(page.text)
                assert await page.wait_for("Instructions", "Each round one meeting", since=n, timeout=120)
                await page.key("\r")
                assert await page.wait_for("YOUR TURN", timeout=180), page.text[-2000:]
                await page.key("i")
                await asyncio.sleep(0.5)
                await page.key(QUEUED)
                await page.key("\r")
                await asyncio.sleep(0.5)
                await page.key(TYPED)
                assert await page.wait_for(TYPED, timeout=60)
                if end == "host stopped":
                    proc.send_signal(signal.SIGINT)
                    await asyncio.to_thread(proc.wait, 60)
            finally:
                await page.close()  # the tab is closed: no ctrl+q

        asyncio.run(participant())
        # the app has ended its game once the turn cut short is timed (written as it stops,
        # after the ExitApp that a closed socket or a stopped host becomes)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not _partial_timed(db):
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        finally:
            proc.kill()
    from calbench_cli.cli import main as cli_main

    assert cli_main(["study", "export", str(study), "--db", str(db), "--out", str(tmp_path / "data")]) == 0
    with open(tmp_path / "data" / "drafts.csv", newline="") as fh:
        rows = [(r["participant"], r["kind"], r["text"], r["recipients"]) for r in csv.DictReader(fh)]
    # the queued message once per partner it was to go to (a DM each), then the composer's text
    assert rows and rows[-1] == ("P01", "composer", TYPED, "")
    queued = rows[:-1]
    assert queued and {r[:3] for r in queued} == {("P01", "queued", QUEUED)}
    assert len({r[3] for r in queued}) == len(queued) and all(r[3] and r[3] != "0" for r in queued)
