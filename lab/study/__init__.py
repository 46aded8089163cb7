"""Pilot studies (``calbench study``): the study file, counterbalanced assignment, a
participant's resumable steps, simulated participants, exports, the monitor and the
report.  No Textual here; the terminal driver is ``calbench_tui/study_app.py``.
See docs/study-guide.md."""
