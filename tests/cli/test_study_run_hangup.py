"""Issue 30 item 3 at a terminal: ``calbench study run`` in a pseudo-terminal, a participant
at a talk turn queues a message and types another, then the terminal goes away (SIGHUP) or
the process is killed outright (SIGKILL, after the live copy had its half second): the
draft is in ``drafts.csv`` all the same."""

from __future__ import annotations

import csv
import fcntl
import os
import select
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from calbench_devtools.page_client import screen_text

from .test_serve_drafts import QUEUED, TYPED, _short_study

REPO = Path(__file__).resolve().parents[2]


class _Tty:
    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     start_new_session=True)
        os.close(slave)
        self.text = ""

    def wait_for(self, words: str, timeout: float = 180.0) -> bool:
        end = time.monotonic() + timeout
        buf = b""
        while time.monotonic() < end:
            if words in self.text:
                return True
            r, _, _ = select.select([self.master], [], [], 0.2)
            if r:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    return words in self.text
                buf += data
                self.text += screen_text(buf)
                buf = b""
        return words in self.text

    def key(self, data: str) -> None:
        os.write(self.master, data.encode())


def _drafts(db: Path) -> list[tuple]:
    try:
        with sqlite3.connect(db) as con:
            return con.execute("SELECT kind, text FROM study_drafts ORDER BY rowid").fetchall()
    except sqlite3.Error:
        return []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a pseudo-terminal and signals")
@pytest.mark.parametrize("end", ["SIGHUP", "SIGKILL"])
def test_a_terminal_gone_mid_talk_keeps_the_draft(tmp_path, end):
    study = _short_study(tmp_path)
    db = tmp_path / "s.db"
    cmd = [sys.executable, "-c", "import sys; from calbench_cli.cli import main; sys.exit(main())", "study", "run",
           str(study), "--participant", "P01", "--db", str(db)]
    tty = _Tty(cmd, {**os.environ, "TERM": "xterm-256color", "TEXTUAL_ANIMATIONS": "none", "COLUMNS": "120",
                     "LINES": "40"})
    try:
        assert tty.wait_for("to agree"), tty.text[-2000:]
        tty.key("y")
        assert tty.wait_for("Each round one meeting"), tty.text[-2000:]
        tty.key("\r")
        assert tty.wait_for("YOUR TURN"), tty.text[-2000:]
        tty.key("i")
        time.sleep(0.5)
        tty.key(QUEUED)
        tty.key("\r")
        time.sleep(0.5)
        tty.key(TYPED)
        assert tty.wait_for(TYPED, timeout=60)
        if end == "SIGKILL":  # nothing runs at a kill -9: only what the live copy already holds
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and ("composer", TYPED) not in _drafts(db):
                time.sleep(0.2)
        tty.proc.send_signal(getattr(signal, end))
        tty.proc.wait(timeout=60)
    finally:
        if tty.proc.poll() is None:
            tty.proc.kill()
            tty.proc.wait(timeout=20)
        os.close(tty.master)
    from calbench_cli.cli import main as cli_main

    assert cli_main(["study", "export", str(study), "--db", str(db), "--out", str(tmp_path / "data")]) == 0
    with open(tmp_path / "data" / "drafts.csv", newline="") as fh:
        rows = [(r["participant"], r["kind"], r["text"]) for r in csv.DictReader(fh)]
    assert rows and rows[-1] == ("P01", "composer", TYPED)
    assert rows[:-1] and set(rows[:-1]) == {("P01", "queued", QUEUED)}
    if end == "SIGHUP":  # a hang-up ends the app as a closed tab does, not by the signal's default
        assert tty.proc.returncode != -signal.SIGHUP
        with open(tmp_path / "data" / "timings.csv", newline="") as fh:
            cut = [(r["phase"], r["partial"]) for r in csv.DictReader(fh)]
        assert cut == [("talk", "1")]  # the turn in progress, timed until the hang-up
