"""Reports over saved games: statistics (:mod:`.stats`), tables (:mod:`.tables`), figures (:mod:`.plots`).

Pure functions, no Textual; the heavy imports (openskill, matplotlib, the oracle) happen
inside the functions that need them.  ``calbench report`` and the report screen call
:func:`build_report` and print its result with ``calbench_tui/report_view.py``;
docs/reports.md explains every number.
"""

from .plots import fairness_bars, message_points, ols, plane_points, plot_paths, write_plots
from .stats import (GROUP_BY, MARGINS, METRICS, SCRIPTED, VPS_FLOOR, agent_meeting_rows, canonical_persona,
                    first_speaker, game_order_key, homogeneous_games, is_scripted, leaderboard, mode_rank,
                    seat_records, task_for_trace, trace_facts)
from .tables import build_report, public, regret, report_csv, table1, table2, to_csv

__all__ = ["GROUP_BY", "MARGINS", "METRICS", "SCRIPTED", "VPS_FLOOR", "agent_meeting_rows", "build_report",
           "canonical_persona", "fairness_bars", "first_speaker", "game_order_key", "homogeneous_games",
           "is_scripted", "leaderboard", "message_points", "mode_rank", "ols", "plane_points", "plot_paths",
           "public", "regret", "report_csv", "seat_records", "table1", "table2", "task_for_trace", "to_csv",
           "trace_facts", "write_plots"]
