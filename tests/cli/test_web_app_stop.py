"""A served app is stopped only once its process has ended: quitting is when it saves the
participant's session (the last unsent words, the turn cut short), and a host that exits first
takes its apps with it.  textual-serve's own ``stop`` returns as soon as its reader of the app
ends, which a page closed before the host stops ends at once (``test_serve_drafts`` saw the
composer's last words lost this way, about one host stop in four)."""

from __future__ import annotations

import asyncio
import sys

import pytest

pytest.importorskip("textual_serve")

from calbench_tui.web import _App  # noqa: E402

QUITS_SLOWLY = "import sys, time; sys.stdin.buffer.read(); time.sleep(0.6); sys.exit(3)"
NEVER_QUITS = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"


async def _served(code: str) -> _App:
    app = _App("unused", write_bytes=None, write_str=None, close=None, download_manager=None, debug=False)
    app._process = await asyncio.create_subprocess_exec(sys.executable, "-c", code, stdin=asyncio.subprocess.PIPE)
    app._stdin = app._process.stdin
    app._task = None  # the page already closed: its reader has ended, as after textual-serve's stop
    return app


async def test_stop_waits_for_the_app_process_to_end():
    app = await _served(QUITS_SLOWLY)
    app._stdin.close()  # the quit it was sent (the app reads it, then takes its time to save)
    await app.stop_bounded(10)
    assert app._process.returncode == 3  # it ended by itself, after saving: not killed


async def test_an_app_that_does_not_end_is_killed_at_the_bound():
    app = await _served(NEVER_QUITS)
    await app.stop_bounded(0.5)
    assert await asyncio.wait_for(app._process.wait(), 10) == -9
