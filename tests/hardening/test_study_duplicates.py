"""Issue 24 (5): ``study check`` refuses duplicate ids in any list.

Before: two questionnaire items sharing an id overwrote each other's answers (8 answer
rows instead of 16 for a dry run), and a quiz asking one question twice was accepted.
Now the study file is refused in one line naming the repeated id and where it is.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "study"))

from studykit import SCRIPTED_ONLY, example_text  # noqa: E402

DUP_ITEM = {'{ id = "overshared", text': '{ id = "satisfied", text'}
DUP_QUIZ = {'question = "Who sees your calendar?"': 'question = "When is a meeting scheduled?"'}
DUP_COND = {'name = "llm"': 'name = "scripted"'}


@pytest.mark.parametrize("replace,needle,line", [
    (DUP_ITEM, "'satisfied'", "[[questionnaires]]"),
    (DUP_QUIZ, "When is a meeting scheduled?", "[[quiz]]"),
    (DUP_COND, "condition names must differ", None),
])
def test_study_check_refuses_duplicates(cli, tmp_path, replace, needle, line):
    text = example_text(**SCRIPTED_ONLY, **replace)
    p = tmp_path / "study.toml"
    p.write_text(text)
    db = tmp_path / "s.db"
    rc, out, err = cli("study", "check", str(p), "--dry-run", "--db", str(db))
    assert rc == 2, (out, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in err, err
    assert not db.exists()  # nothing was played or written
    if line:  # the line number points at the questionnaire with the repeated item
        n = int(lines[0].split(" line ")[1].split(":")[0])
        assert text.splitlines()[n - 1].strip() == line
