"""The suite progress bar of ``calbench run``: games done, rate, ETA, on stderr.

``lab.runner.run_cli_suite(progress_bar=progress_bar)`` opens it once the worker processes
are forked and calls ``advance(summary)`` per finished game; quiet when stderr is no terminal.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator

__all__ = ["ProgressBar", "progress_bar"]


@contextmanager
def progress_bar(total: int, label: str) -> Iterator[Callable[[Any], None]]:
    """The ``lab.runner.ProgressBar`` the command line uses."""
    with ProgressBar(total, label) as bar:
        yield bar.advance


class ProgressBar:
    """A rich progress bar on stderr: games done, rate, ETA (quiet when stderr is no terminal)."""

    def __init__(self, total: int, label: str, enabled: bool = True) -> None:
        self.total = total
        self.label = label
        self.failed = 0
        self.done = 0
        self._p = None
        if not enabled or total == 0 or not sys.stderr.isatty():
            return
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)
        from rich.text import Text

        class Rate(ProgressColumn):
            def render(self, task):  # noqa: D401 - rich API
                el = task.elapsed or 0.0
                return Text(f"{task.completed / el:6.1f} games/s" if el > 0 and task.completed else "   – games/s",
                            style="progress.data.speed")

        console = Console(stderr=True)
        if not console.is_terminal:
            return
        self._p = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), Rate(),
                           TextColumn("ETA"), TimeRemainingColumn(), TimeElapsedColumn(), console=console,
                           transient=False, refresh_per_second=8)
        self._task = self._p.add_task(label, total=total)

    def __enter__(self) -> "ProgressBar":
        if self._p is not None:
            self._p.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._p is not None:
            self._p.stop()

    def advance(self, s: Any) -> None:
        self.done += 1
        if s.status == "failed":
            self.failed += 1
        if self._p is not None:
            desc = self.label + (f" [red]{self.failed} failed[/red]" if self.failed else "")
            self._p.update(self._task, advance=1, description=desc)


