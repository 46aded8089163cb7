"""The lab: everything that runs and reads games for the interface, with no Textual import.

* :mod:`lab.session` — the one game session: the only code that saves, runs and ends a
  game; the terminal app, the suite runner and the table all call it.
* :mod:`lab.runner` — playing suites of games (``calbench run``): ``--resume``, shards,
  worker processes.
* :mod:`lab.suites` — generating custom task suites (``calbench suite generate``).
* :mod:`lab.summary` — Table 2, computed once (the suite summary and the report's).
* :mod:`lab.report` — reports over saved games: statistics, tables, plots.
* :mod:`lab.table`, :mod:`lab.server` — one game whose human seats play from elsewhere
  (``calbench serve``), and its websocket server; :mod:`lab.remote_bot` is a scripted
  client of it (tests, benchmarks).

See ``docs/architecture.md``.
"""
