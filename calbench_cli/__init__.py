"""The command line, above the terminal app: ``calbench`` (headless tools: run, suite,
oracle, import/export, serve, study, trace, report, games, ...) and ``calbench-play``.

Each sub-command is a module of ``commands/`` (argparse, a call into ``lab``/``saves``,
printing).  Only the commands that open a Textual app (``play``, ``replay``, ``report
--tui``, ``study run``, ``serve``'s browser front) import ``calbench_tui``'s drawing
modules; the app never imports this package (tests/architecture/test_one_clisplit.py).
"""
