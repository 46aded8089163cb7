"""Benchmark: the terminal app's time to first frame and keypress-to-repaint latency.

Run:  .venv/bin/python benchmarks/tui.py [--reps 40] [--messages 1000] [--pty]

Measured in one run (this machine is shared and noisy, so the ratios matter more than the
absolute numbers):

* **time to first frame** (in process, headless driver, 80×24): from ``make_app`` to the
  first frame the compositor hands to the driver, and to the first frame of the game
  screen with the seat's calendar on it (the scenario is generated, the bots seated,
  the first turns played);
* with ``--pty``: the same for the real program — ``calbench-play --seat 2`` started in
  a pseudo-terminal, from ``exec`` to the first bytes on the terminal and to the first
  frame showing the calendar (includes Python start-up and imports);
* **keypress-to-repaint latency** with ``--messages`` messages (default 1,000) in the
  open conversation pane (and as many in a second thread): from the key event entering
  the app to the next frame written, for ``down`` (calendar cursor), ``]`` (switch to
  the other 1,000-message thread and back) and a character typed in the composer.
  The same keys are timed with an empty pane, and the ratio full/empty is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from textual import events  # noqa: E402
from textual.app import App  # noqa: E402

from calbench_tui.app import make_app  # noqa: E402
from calbench_tui.settings import Settings  # noqa: E402

SIZE = (80, 24)


class FrameClock:
    """Records when the compositor hands a frame to the driver (``App._display``)."""

    def __init__(self) -> None:
        self.frames: list[float] = []
        self.waiters: list[asyncio.Future] = []
        self._orig = App._display
        clock = self

        def _display(app, screen, renderable):
            if renderable is not None:
                now = time.perf_counter()
                clock.frames.append(now)
                for w in clock.waiters:
                    if not w.done():
                        w.set_result(now)
                clock.waiters.clear()
            return clock._orig(app, screen, renderable)

        App._display = _display

    def restore(self) -> None:
        App._display = self._orig

    def next_frame(self) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        return fut


def _ms(xs: list[float]) -> str:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]
    return f"median {statistics.median(xs) * 1000:6.1f} ms   p95 {p95 * 1000:6.1f} ms   (n={len(xs)})"


async def first_frame() -> tuple[float, float]:
    clock = FrameClock()
    try:
        t0 = time.perf_counter()
        app = make_app(settings=Settings(seat=2, seed=7, cursor_blink=False))
        game_frame = None
        async with app.run_test(size=SIZE) as pilot:
            while game_frame is None:
                await asyncio.sleep(0.001)
                gs = app.game_screen
                if gs is not None and app.screen is gs and gs.calendar.calendar:
                    fut = clock.next_frame()
                    game_frame = await asyncio.wait_for(fut, 5)
            first = clock.frames[0]
            await pilot.press("ctrl+q")
        return first - t0, game_frame - t0
    finally:
        clock.restore()


def _fake_messages(n: int, seat: int, peer: int) -> list[dict]:
    out = []
    for i in range(n):
        mine = i % 2 == 0
        out.append({"type": "dm_sent", "seq": i, "round": i // 50, "turn": i % 15, "phase": "CHEAP_TALK",
                    "agent_id": seat if mine else peer, "from_agent": seat if mine else peer,
                    "to_agent": peer if mine else seat, "channel": "dm", "meeting_id": 1,
                    "content": f"Message {i}: how about slot {i % 16}? I can also do slots 3, 5 and 9 "
                               f"if that works better for meeting M1.",
                    "payload": None, "recipients": [peer if mine else seat]})
    return out


async def keypress_latency(messages: int, reps: int) -> dict[str, list[float]]:
    clock = FrameClock()
    results: dict[str, list[float]] = {}
    try:
        app = make_app(settings=Settings(seat=2, seed=7, cursor_blink=False))
        async with app.run_test(size=SIZE) as pilot:
            while app.game_screen is None or app.game_screen.pending is None:
                await pilot.pause(0.01)
            gs = app.game_screen
            chat = gs.chat
            for ev in _fake_messages(messages, 2, 3) + _fake_messages(messages, 2, 4):
                chat.add_message(ev)
            chat.show("dm:3")
            gs.calendar.focus()
            await pilot.pause(0.2)
            driver = app._driver

            async def timed(key: str, char: str | None) -> float:
                await pilot.pause(0.02)
                fut = clock.next_frame()
                t0 = time.perf_counter()
                driver.send_message(events.Key(key, char))
                t1 = await asyncio.wait_for(fut, 5)
                return t1 - t0

            results["down (calendar cursor)"] = [await timed("down", None) for _ in range(reps)]
            switch = []
            for i in range(reps):
                switch.append(await timed("right_square_bracket", "]"))
                chat.show("dm:3")
            results["] (switch 1,000-message thread)"] = switch
            gs.query_one("#composer").focus()
            await pilot.pause(0.05)
            results["type a character (composer)"] = [await timed("x", "x") for _ in range(reps)]
            assert chat.count == 2 * messages
            await pilot.press("escape", "ctrl+q")
    finally:
        clock.restore()
    return results


def pty_first_frame(timeout: float = 60.0) -> tuple[float, float] | None:
    """``calbench-play --seat 2`` in a pseudo-terminal: seconds to first output and to the calendar."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    exe = Path(sys.executable).with_name("calbench-play")
    argv = [str(exe)] if exe.exists() else [sys.executable, "-c",
                                             "import sys; from calbench_cli.cli import play_main; sys.exit(play_main())"]
    argv += ["--seat", "2", "--seed", "7"]
    tmp = tempfile.mkdtemp(prefix="calbench-bench-")
    cfg = Path(tmp) / "config"
    cfg.mkdir()
    (cfg / "seen-help").write_text("1\n")
    env = dict(os.environ, TERM="xterm-256color", CALBENCH_DB=str(Path(tmp) / "bench.db"),
               CALBENCH_CONFIG_DIR=str(cfg), COLUMNS="80", LINES="24")
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # child
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
        os.execve(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    first = calendar = None
    buf = b""
    try:
        while time.perf_counter() - t0 < timeout and calendar is None:
            r, _, _ = select.select([fd], [], [], 0.05)
            if not r:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            if first is None:
                first = time.perf_counter() - t0
            buf += chunk
            if b"Blocked" in buf or b"Errand" in buf:
                calendar = time.perf_counter() - t0
        os.write(fd, b"\x11")  # ctrl+q: quit (the game is saved as stopped)
        deadline = time.perf_counter() + 10
        while time.perf_counter() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                try:
                    os.read(fd, 65536)
                except OSError:
                    pass
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    finally:
        os.close(fd)
    if first is None or calendar is None:
        return None
    return first, calendar


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--pty", action="store_true", help="also time the real program in a pseudo-terminal")
    args = ap.parse_args()

    first, game = asyncio.run(first_frame())
    print(f"time to first frame (in process, headless, {SIZE[0]}x{SIZE[1]}):")
    print(f"  first frame              {first * 1000:7.1f} ms")
    print(f"  game screen with calendar {game * 1000:6.1f} ms")
    if args.pty:
        res = pty_first_frame()
        if res is None:
            print("  pty: the program did not draw its calendar (is calbench-play installed?)")
        else:
            print(f"pty: 'calbench-play --seat 2' from exec: first bytes {res[0] * 1000:.0f} ms, "
                  f"calendar on screen {res[1] * 1000:.0f} ms")

    full = asyncio.run(keypress_latency(args.messages, args.reps))
    empty = asyncio.run(keypress_latency(0, args.reps))
    print(f"keypress-to-repaint latency, {args.messages} messages in the open pane (and {args.messages} in the "
          f"other thread):")
    for key, xs in full.items():
        ratio = statistics.median(xs) / max(statistics.median(empty[key]), 1e-9)
        print(f"  {key:<34} {_ms(xs)}   vs empty pane x{ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
