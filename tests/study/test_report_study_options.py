"""Issue 20, items 6 and 7: ``report --study`` never drops games silently when a condition
was renamed in the study file (it refuses, or maps with ``renamed_from`` and says so), and
``--plot FILE`` writes the figure (other options it cannot honour are refused)."""

from __future__ import annotations

import csv

import pytest

from saves.store import Store

from studykit import SCRIPTED_ONLY, example_text


def renamed(p, *, mapped: bool):
    text = p.read_text()
    old = 'name = "scripted"'
    assert old in text
    new = 'name = "imap-partners"' + ('\nrenamed_from = ["scripted"]' if mapped else "")
    p.write_text(text.replace(old, new, 1))


def test_a_renamed_condition_is_refused_by_the_report_not_dropped(cli, dry_db, tmp_path):
    p, db = dry_db
    rc, before, err = cli("report", "--study", str(p), "--db", str(db), "--include-simulated")
    assert rc == 0, err
    renamed(p, mapped=False)
    rc, out, err = cli("report", "--study", str(p), "--db", str(db), "--include-simulated")
    assert rc == 2 and "Traceback" not in err
    assert "condition 'scripted', which the study file no longer names" in err
    assert 'renamed_from = ["scripted"]' in err and len(err.strip().splitlines()) == 1


def test_renamed_from_maps_the_games_and_says_so(cli, dry_db, tmp_path):
    p, db = dry_db
    rc, before, _ = cli("report", "--study", str(p), "--db", str(db), "--include-simulated", "--json")
    renamed(p, mapped=True)
    rc, after, err = cli("report", "--study", str(p), "--db", str(db), "--include-simulated", "--json")
    assert rc == 0, err
    import json

    b, a = json.loads(before), json.loads(after)
    assert a["games"] == b["games"] == 8  # 4 participants × 2 real games: none dropped
    assert {r["condition"] for r in a["rows"]} == {"imap-partners", "llm"}
    assert sum(r["n"] for r in a["rows"]) == sum(r["n"] for r in b["rows"])
    assert a["renamed"] == {"scripted": {"to": "imap-partners", "games": 4}}
    rc, text, _ = cli("report", "--study", str(p), "--db", str(db), "--include-simulated")
    assert "Condition 'scripted' is now 'imap-partners' (renamed_from)" in text
    # the export agrees with the report
    rc, _, err = cli("study", "export", str(p), "--db", str(db), "--out", str(tmp_path / "data"),
                     "--include-simulated")
    assert rc == 0, err
    with open(tmp_path / "data" / "games.csv", newline="") as fh:
        assert {r["condition"] for r in csv.DictReader(fh)} == {"imap-partners", "llm"}


def test_report_study_plot_writes_the_figure(cli, dry_db, tmp_path):
    p, db = dry_db
    png = tmp_path / "study.png"
    rc, out, err = cli("report", "--study", str(p), "--db", str(db), "--include-simulated", "--plot", str(png))
    assert rc == 0, err
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert f"Wrote {png}" in out
    rc, out, err = cli("report", "--study", str(p), "--db", str(db), "--plot", str(tmp_path / "nope" / "x.png"))
    assert rc == 2 and "does not exist" in err


def test_report_study_refuses_options_it_would_ignore(cli, dry_db):
    p, db = dry_db
    for opt in (["--csv"], ["--leaderboard"], ["--group-by", "model"]):
        rc, out, err = cli("report", "--study", str(p), "--db", str(db), *opt)
        assert rc == 2 and f"{opt[0]} does not apply to report --study" in err


async def test_a_returning_participant_of_a_renamed_condition_gets_a_clear_line(tmp_path):
    from lab.study.model import load_study
    from lab.study.runner import StudyRunner
    from lab.study.simulate import SimulatedDriver

    p = tmp_path / "study.toml"
    p.write_text(example_text(**SCRIPTED_ONLY))
    async with await Store.open(tmp_path / "s.db") as store:
        await StudyRunner(load_study(p), store, "P1", SimulatedDriver(load_study(p), "P1")).enroll()
        renamed(p, mapped=False)
        study = load_study(p)
        with pytest.raises(ValueError, match="assigned condition 'scripted', which the study file no longer names"):
            await StudyRunner(study, store, "P1", SimulatedDriver(study, "P1")).enroll()
        p.write_text(example_text(**SCRIPTED_ONLY))
        renamed(p, mapped=True)
        study = load_study(p)
        results = await StudyRunner(study, store, "P1", SimulatedDriver(study, "P1")).run()
        assert all(r.status == "completed" for r in results)
        assert study.condition("scripted").name == "imap-partners"
