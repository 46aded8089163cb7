"""``calbench-play`` start-up checks for llm seats: one line, before any screen opens."""

from __future__ import annotations

import pytest

from calbench_cli.cli import play_main


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_llm_seat_without_a_key_is_the_same_line_as_run(tmp_path, capsys):
    rc = play_main(["--seat", "2", "--agents", "llm:gpt-4o", "--db", str(tmp_path / "p.db")])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert err.strip() == ("calbench: error: no API key: set $OPENAI_API_KEY (or choose another variable with "
                           "--api-key-env), or point --base-url at a local endpoint")


def test_no_key_check_without_llm_seats(tmp_path, capsys):
    rc = play_main(["--seat", "2", "--agents", "imap", "--db", str(tmp_path / "p.db")])
    err = capsys.readouterr().err
    assert rc == 2 and "no API key" not in err  # it gets as far as wanting a terminal
    assert "interactive terminal" in err


def test_malformed_base_url_is_one_line(tmp_path, capsys):
    rc = play_main(["--seat", "2", "--agents", "llm:m", "--base-url", "notaurl", "--db", str(tmp_path / "p.db")])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "--base-url: 'notaurl' is not an http(s) URL" in err
