"""The report's figures do not claim more than the data (issue 13.11): fairness intervals stop at
0, no trend line through a handful of points, N written beside every point or bar."""

from __future__ import annotations

from calbench_tui import report_view as V
from lab.report import plots as R


def test_fairness_error_bars_never_reach_below_zero():
    lower, upper = R.clipped_errors([0.1, 0.5, 0.0], [0.3, 0.2, None])
    assert lower == [0.1, 0.2, 0.0] and upper == [0.3, 0.2, 0.0]
    assert all(m - lo >= 0 for m, lo in zip([0.1, 0.5, 0.0], lower))


def test_no_trend_line_through_two_points():
    assert R.ols([(1.0, 1.0), (2.0, 3.0)]) is None
    assert R.ols([(float(x), 2.0 * x + 1) for x in range(R.MIN_FIT_POINTS - 1)]) is None
    slope, icept = R.ols([(float(x), 2.0 * x + 1) for x in range(R.MIN_FIT_POINTS)])
    assert abs(slope - 2.0) < 1e-9 and abs(icept - 1.0) < 1e-9
    # the terminal chart draws no line either
    two = V.text_scatter({"a": [(1.0, 1.0), (4.0, 3.0)]}, width=20, height=6, lines=True).plain
    assert "·" not in two.split("└")[0]


def test_plot_files_name_n_and_explain_the_marker_shapes(tmp_path):
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    report = {
        "group_by": "persona",
        "table": [{"group": "imap", "cost_mode": "uniform", "vps": 10.0, "excess": 0.0, "seats": 40,
                   "scripted": True},
                  {"group": "llm:x", "cost_mode": "uniform", "vps": 4.0, "excess": 1.5, "seats": 5,
                   "scripted": False}],
        "_records": [{"persona": "imap", "model": "imap", "cost_mode": "uniform", "fairness": 0.05,
                      "messages_per_meeting": 2.0, "excess": 0.0},
                     {"persona": "imap", "model": "imap", "cost_mode": "uniform", "fairness": 0.6,
                      "messages_per_meeting": 3.0, "excess": 1.0}],
    }
    seen: list = []
    orig = plt.Figure.savefig

    def keep(fig, *a, **kw):  # read the figure as drawn, then write it as usual
        seen.append(fig)
        return orig(fig, *a, **kw)

    plt.Figure.savefig = keep
    try:
        files = R.write_plots(report, str(tmp_path / "p.png"))
    finally:
        plt.Figure.savefig = orig
    assert len(files) == 3
    plane, fair, msgs = seen
    ax = plane.axes[0]
    notes = [t.get_text() for t in ax.texts]
    assert "imap (N=40)" in notes and "llm:x (N=5)" in notes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["scripted protocol", "model / persona"]
    assert ax.get_ylim()[0] < 0 < ax.get_ylim()[1]  # the point at excess 0 is drawn whole
    fax = fair.axes[0]
    assert any(t.get_text() == "N=2" for t in fax.texts)
    assert fax.get_ylim()[0] == 0
    mx = msgs.axes[0]
    assert not mx.get_lines() or all(len(line.get_xdata()) == 0 for line in mx.get_lines()
                                      if line.get_linestyle() == "--")
