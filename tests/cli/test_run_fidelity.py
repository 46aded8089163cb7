"""``calbench run --fidelity paper`` and ``fidelity = "paper"`` in a personas file (issue 21)."""

from __future__ import annotations

import json

# meetings scheduled on canonical tasks 0-2 (tests/personas/test_dsm_fidelity.py pins all 90)
OURS, PAPER = [3, 2, 0], [2, 2, 2]


def _run(cli, db, *extra):
    rc, out, err = cli("run", "--tasks", "canonical:0-2", "--agents", "dsm-private", "--deterministic", "--json",
                       "--db", str(db), "--concurrency", "1", *extra)
    return rc, (json.loads(out) if rc == 0 else None), err


def test_the_flag_and_the_personas_file_switch_the_mode(cli, tmp_path):
    rc, ours, err = _run(cli, tmp_path / "a.db")
    assert rc == 0, err
    assert [g["meetings_scheduled"] for g in ours["games"]] == OURS
    # same database: the paper games are another run (another settings key), not a --resume clash
    rc, paper, err = _run(cli, tmp_path / "a.db", "--fidelity", "paper")
    assert rc == 0, err
    assert [g["meetings_scheduled"] for g in paper["games"]] == PAPER
    assert {g["game_id"] for g in paper["games"]}.isdisjoint(g["game_id"] for g in ours["games"])
    f = tmp_path / "personas.toml"
    f.write_text('fidelity = "paper"\n')
    rc, again, err = _run(cli, tmp_path / "b.db", "--personas", str(f))
    assert rc == 0, err
    assert [g["meetings_scheduled"] for g in again["games"]] == PAPER
    assert [g["game_id"] for g in again["games"]] == [g["game_id"] for g in paper["games"]]


def test_mistakes_are_one_line(cli, tmp_path):
    f = tmp_path / "personas.toml"
    f.write_text('fidelity = "paper"\n')
    rc, _, err = _run(cli, tmp_path / "c.db", "--personas", str(f), "--fidelity", "ours")
    assert rc == 2 and err.strip().splitlines()[-1].startswith("calbench: error: --fidelity ours contradicts")
    f.write_text('fidelity = "exact"\n')
    rc, _, err = _run(cli, tmp_path / "c.db", "--personas", str(f))
    assert rc == 2 and "fidelity = 'exact'" in err and "Traceback" not in err


def test_help_explains_the_option(capsys):
    import pytest

    from calbench_cli.cli import main

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--fidelity {ours,paper}" in text and "ghost meeting" in text and "one round of offers" in text


def test_the_table_says_which_rules_were_played(cli, tmp_path):
    rc, out, err = cli("run", "--tasks", "canonical:0", "--agents", "dsm-private", "--fidelity", "paper",
                       "--deterministic", "--db", str(tmp_path / "t.db"), "--concurrency", "1")
    assert rc == 0, err
    assert "fidelity: paper" in out
    rc, out, err = cli("run", "--tasks", "canonical:0", "--agents", "dsm-private",
                       "--deterministic", "--db", str(tmp_path / "u.db"), "--concurrency", "1")
    assert rc == 0 and "fidelity" not in out
