"""The lab: everything that runs and reads games for the interface, with no Textual import.

One game session (:mod:`lab.session`) is the only code that saves, runs and ends a game;
the terminal app, the suite runner, studies, the table server and the executors all call
it.  See ``docs/architecture.md``.
"""
