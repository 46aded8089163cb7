"""Issue 21: ``fidelity = "paper"`` in a study condition makes its DSM partners play as the
authors' code does (a dry run through the real runner; the saved games say so)."""

from __future__ import annotations

import json

import pytest
from studykit import SCRIPTED_ONLY, example_text

from lab.study.model import StudyFileError, parse_study


PAPER = {**SCRIPTED_ONLY,
         'partners = "imap"\n': 'partners = "dsm-private"\nfidelity = "paper"\n'}


def test_a_condition_takes_fidelity_and_its_games_use_it(cli, tmp_path):
    p = tmp_path / "study.toml"
    p.write_text(example_text(None, **PAPER))
    db = tmp_path / "s.db"
    rc, _out, err = cli("study", "check", str(p), "--dry-run", "--db", str(db), "--json")
    assert rc == 0, err
    out_dir = tmp_path / "traces"
    rc, _out, err = cli("export", "--all", "-o", str(out_dir), "--db", str(db))
    assert rc == 0, err
    models = {}
    for f in out_dir.glob("*.json"):
        t = json.loads(f.read_text())
        cond = t["config"].get("condition")
        models.setdefault(cond, set()).update(
            e["data"]["model"] for e in t["events"] if e["type"] == "agent_registered" and e["data"].get("model"))
    assert "dsm-private@paper" in models["scripted"] and "dsm-private" not in models["scripted"]
    assert not any("@paper" in m for m in models["llm"])  # the other condition keeps the default


def test_a_bad_fidelity_is_one_line():
    with pytest.raises(StudyFileError) as err:
        parse_study(example_text(None, **{**SCRIPTED_ONLY,
                                              'partners = "imap"\n': 'partners = "imap"\nfidelity = "exact"\n'}))
    assert "fidelity" in str(err.value) and "\n" not in str(err.value)
