"""Issue 24, item 15 (continued): 'suite show', 'oracle', 'study status', the 'run' summary and
'serve --study' print labels, model names and participant ids from files and databases
through the same helper as 'games' (engine.inputs.printable): no escape sequence reaches
the terminal, and '[/]' in a label is shown as typed, never read as Rich markup."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import run_async

REPO = Path(__file__).resolve().parents[2]
EVIL = "\x1b]0;pwned\x07\x1b[31m[/]x"


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch):
    """The commands fit their tables to the terminal's width and cut long cells with "…": these
    tests read whole (escaped) ids and labels, so they run at 200 columns, whatever the worker's."""
    monkeypatch.setenv("COLUMNS", "200")
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")


def _clean(*streams: str) -> None:
    for s in streams:
        assert "Traceback" not in s, s[-2000:]
        assert not CONTROL.search(s), repr(s[:600])


def _evil_task_file(cli, tmp_path: Path) -> Path:
    """A one-task file whose difficulty label carries an escape sequence (task ids with one are
    refused when the file is read; labels are free text)."""
    rc, out, err = cli("scenario", "--seed", "1", "--json")
    assert rc == 0, err
    task = json.loads(out)
    task["difficulty"] = "h" + EVIL
    path = tmp_path / "evil.jsonl"
    path.write_text(json.dumps(task) + "\n")
    return path


def test_suite_show_oracle_and_the_run_summary_print_no_escape_sequence(cli, threaded_mock, tmp_path):
    """Before: 'suite show' died on the label's '[/]' (a Rich MarkupError traceback, after
    printing the escape sequences), and the 'run' table did the same with a model name."""
    tasks = _evil_task_file(cli, tmp_path)
    rc, out, err = cli("suite", "show", str(tasks))
    assert rc in (0, 1), err  # 1: the one cell's buckets are unequal (reported, not an error)
    _clean(out, err)
    assert "h]0;pwned[31m[/]x" in out  # shown, minus its control characters
    rc, out, err = cli("oracle", str(tasks))
    assert rc == 0, err
    _clean(out, err)
    url, _server = threaded_mock(policy="cooperative")
    rc, out, err = cli("run", "--tasks", str(tasks), "--agents", f"imap,llm:m{EVIL},imap,imap,imap",
                       "--base-url", url, "--db", str(tmp_path / "r.db"))
    assert rc == 0, err
    _clean(out, err)
    assert "m]0;pwned[31m[/]x" in out


def _evil_study(cli, tmp_path: Path) -> Path:
    study = tmp_path / "study.toml"
    rc, _out, err = cli("study", "init", str(study))
    assert rc == 0, err
    text = study.read_text()
    assert 'code_prefix = "CB"' in text
    study.write_text(text.replace('code_prefix = "CB"', 'participant_pattern = ".+"\ncode_prefix = "CB"', 1))
    return study


def test_study_status_prints_no_escape_sequence_from_the_database(cli, tmp_path):
    """Before: a participant id with an escape sequence (a study whose pattern allows it, or a
    database edited by hand) retitled the terminal of whoever ran 'study status'."""
    from saves.store import Store
    from saves.study import StudyStore

    study = _evil_study(cli, tmp_path)
    db = tmp_path / "s.db"

    async def add():
        store = await Store.open(db)
        try:
            await StudyStore(store, "pilot-1").add_participant("P" + EVIL, slot=0, simulated=False, assignment=[],
                                                                steps=["consent"], design_hash="x")
        finally:
            await store.close()

    run_async(add())
    rc, out, err = cli("study", "status", str(study), "--db", str(db))
    assert rc == 0, err
    _clean(out, err)
    assert "P]0;pwned[31m[/]x" in out


def test_serve_study_prints_no_escape_sequence_in_participant_lines(cli, tmp_path):
    """Before: 'serve --study' printed the study file's path raw (participant ids are refused
    unless they are plain ids, whatever the study's pattern)."""
    pytest.importorskip("textual_serve")
    study = _evil_study(cli, tmp_path)
    evil_path = tmp_path / f"s{EVIL.replace('/', '_')}.toml"
    study.rename(evil_path)
    cmd = [sys.executable, "-c", "import sys; from calbench_cli.cli import main; sys.exit(main())", "serve",
           "--study", str(evil_path), "--participants", "P01", "--port", "0", "--db", str(tmp_path / "s.db")]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        lines = [proc.stdout.readline() for _ in range(3)]  # the banner, the one participant, the advice
        assert lines[0].startswith("Serving study"), (lines, proc.stderr.read() if proc.poll() is not None else "")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _out, err = proc.communicate(timeout=20)
        finally:
            proc.kill()
    _clean("".join(lines), err)
    assert "]0;pwned[31m[_]x.toml on http" in lines[0] and lines[1].startswith("  P01: http"), lines
