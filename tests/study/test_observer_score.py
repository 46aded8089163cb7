"""Issue 30, the observer's score: the belief grid's VPS rewards confident wrong guesses, so a
proper score (Brier, against the truth) is reported and exported beside it; the study plot's
rate axes are fixed at 0-1; ``report --study --group-by`` is refused in one line."""

from __future__ import annotations

import asyncio
import csv

import pytest

from lab.study.model import load_study
from saves.store import Store


def test_a_confidently_wrong_grid_has_a_high_vps_but_a_bad_brier_score():
    from engine.privacy import feasibility_truth, observer_vps
    from engine.taskref import resolve_tasks

    task = resolve_tasks("seed:5")[0]
    truth = feasibility_truth(task, [], 0, 1)
    # every cell marked ±3 the wrong way round but one in three (7 of 21 right, as in the pilot)
    marks = [(0, 0, 1, k, (3 if ok else -3) if k % 3 == 0 else (-3 if ok else 3)) for k, ok in enumerate(truth)]
    wrong = observer_vps(task, [], marks)
    right = observer_vps(task, [], [(0, 0, 1, k, 3 if ok else -3) for k, ok in enumerate(truth)])
    blank = observer_vps(task, [], [(0, 0, 1, k, 0) for k in range(len(truth))])
    # the VPS cannot tell them apart: both moved every cell as far as it goes
    assert wrong["observer_vps"] == right["observer_vps"] > blank["observer_vps"] == 0
    right_share = sum(1 for k in range(len(truth)) if k % 3 == 0) / len(truth)
    assert wrong["brier_cells"] == right["brier_cells"] == len(truth)
    assert right["observer_brier"] == 0.0 and blank["observer_brier"] == 0.25
    assert wrong["observer_brier"] == pytest.approx(1 - right_share) and wrong["observer_brier"] > 0.25
    # the estimator heard nothing: p0 on every cell, so "no idea" on the same cells
    assert wrong["estimator_brier"] == right["estimator_brier"] == 0.25


def test_the_brier_score_is_exported_and_reported(cli, dry_db, tmp_path):
    p, db = dry_db
    rc, out, err = cli("study", "export", str(p), "--db", str(db), "--out", str(tmp_path / "out"),
                       "--include-simulated")
    assert rc == 0, err
    with open(tmp_path / "out" / "games.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    mine = [r for r in rows if r["is_participant_seat"] == "1" and r["observer_vps"]]
    assert mine and all(0 <= float(r["observer_brier"]) <= 1 and 0 <= float(r["estimator_brier_same_cells"]) <= 1
                        for r in mine)
    assert all(r["observer_brier"] == "" for r in rows if r["is_participant_seat"] == "0")
    codebook = (tmp_path / "out" / "codebook.md").read_text()
    assert "observer_brier" in codebook and "headline" in codebook
    rc, out, err = cli("report", "--study", str(p), "--db", str(db), "--include-simulated")
    assert rc == 0 and "Obs. Brier" in out and "Est. Brier" in out


def test_the_study_plot_draws_rates_on_a_0_to_1_axis(dry_db, tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from lab.study.report import PLOT_METRICS, study_table, write_study_plot

    p, db = dry_db

    async def table():
        async with await Store.open(db) as store:
            return await study_table(load_study(p), store, include_simulated=True, reps=100)

    t = asyncio.run(table())
    figures = []
    real = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **kw: (figures.append(self), real(self, *a, **kw)))
    write_study_plot(t, str(tmp_path / "plot.png"))
    assert (tmp_path / "plot.png").stat().st_size > 0
    axes = dict(zip([k for k, _ in PLOT_METRICS], figures[0].axes))
    assert axes["coordination"].get_ylim() == (0.0, 1.0)
    assert axes["observer_brier"].get_ylim() == (0.0, 1.0)


def test_report_study_refuses_group_by_in_one_line(cli, dry_db):
    p, db = dry_db
    for value in ("persona", "model"):
        rc, out, err = cli("report", "--study", str(p), "--db", str(db), "--group-by", value)
        assert rc == 2 and "--group-by does not apply to report --study" in err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
