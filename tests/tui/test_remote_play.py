"""The game screen fed over the wire: calbench-play --join against a real table server.

A table on the loopback with two human seats: seat 0 is this app, played by key presses
only (the same driver as the local games), seat 2 is a scripted client over the wire.
"""

from __future__ import annotations

import asyncio

from calbench_tui.app import make_app, screen_text
from calbench_tui.screens.end import EndScreen
from calbench_tui.screens.lobby import JoinScreen, LobbyScreen
from calbench_tui.settings import Settings
from engine.game import GameConfig
from engine.taskref import hydrate_labels, resolve_tasks
from lab.remote_bot import RemoteBot
from lab.server import TableServer
from lab.table import Table
from saves.store import Store

from .helpers import PATIENCE, play_to_end, wait_for, wait_painted


async def _table(tmp_path, **kw):
    task = hydrate_labels(resolve_tasks("canonical:3")[0])
    store = await Store.open(tmp_path / "remote.db")
    table = Table(task, ["human", "imap", "human", "imap", "imap"], GameConfig(), game_id="remote-1", store=store,
                  **kw)
    server = TableServer([table], port=0)
    await server.start()
    return task, store, table, server


async def test_a_whole_game_played_by_keys_over_the_wire(tmp_path):
    task, store, table, server = await _table(tmp_path)
    codes = {c["seat"]: c["code"] for c in table.codes()}
    app = make_app(settings=Settings(join=server.url, code=codes[0]))
    game = asyncio.ensure_future(table.run())
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, LobbyScreen), what="the lobby")
            await wait_for(pilot, lambda: "Still waiting for: seats 2" in screen_text(app), what="the lobby status")
            bot = asyncio.ensure_future(RemoteBot(server.url, codes[2]).run())
            own = [l.text for (a, _), l in task.labels.errands.items() if a == 0]
            others = [l.text for (a, _), l in task.labels.errands.items() if a != 0]
            await wait_for(pilot, lambda: app.screen is app.game_screen
                           and sum(t[:15] in screen_text(app) for t in own) >= 5, what="seat 0's own calendar")
            first_screen = screen_text(app)
            await play_to_end(pilot, app, timeout=4 * PATIENCE)
            assert isinstance(app.screen, EndScreen)
            outcome = await asyncio.wait_for(game, 10)
            await bot
        saved = await store.load_trace("remote-1")
    finally:
        await server.stop()
        await store.close()
    assert outcome.status == "completed"
    assert saved["saved"]["status"] == "completed"
    inputs = [e for e in saved["events"] if e["type"] == "human_input" and e["data"]["agent_id"] == 0]
    assert inputs and all(e["data"].get("remote") for e in inputs)
    # what seat 0's screen showed was its own calendar: its own labels, nobody else's
    assert not [text for text in others if text[:15] in first_screen and text[:15] not in "".join(own)]


async def test_the_code_is_asked_for_and_a_wrong_one_is_explained(tmp_path):
    task, store, table, server = await _table(tmp_path)
    app = make_app(settings=Settings(join=server.url))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, JoinScreen), what="the code prompt")
            await pilot.press(*"wrong-code", "enter")
            await wait_for(pilot, lambda: isinstance(app.screen, JoinScreen) and app.screen.error,
                           what="the error on the code prompt")
            await wait_painted(pilot, "does not open a seat")
            # asked again, not told the game stopped (no game was ever joined)
            assert not [n for n in app._notifications if "stopped" in str(n.message)]
            await pilot.press(*table.codes()[0]["code"], "enter")
            await wait_for(pilot, lambda: isinstance(app.screen, LobbyScreen), what="the lobby")
            await wait_painted(pilot, "You are Agent 0")
    finally:
        await server.stop()
        await store.close()


async def test_an_address_with_no_table_is_one_line_and_exit_2_not_a_blank_screen():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = make_app(settings=Settings(join=f"ws://127.0.0.1:{port}/table", code="some-code"))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.return_code == 2, timeout=60, what="the app to give up at once")  # (it retries for 120 s when it is not)
    assert app.error.startswith(f"cannot reach a table at ws://127.0.0.1:{port}/table (connection refused)")


async def test_the_host_stopping_the_table_is_said_on_screen_and_kept_for_the_command_line(tmp_path):
    task, store, table, server = await _table(tmp_path)
    codes = {c["seat"]: c["code"] for c in table.codes()}
    app = make_app(settings=Settings(join=server.url, code=codes[0]))
    game = asyncio.ensure_future(table.run())
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, LobbyScreen), what="the lobby")
            game.cancel()  # what the host's ctrl+c does
            await wait_for(pilot, lambda: app.error is not None, what="the stop to reach the app")
            assert app.error == "the host stopped the table before the game started"
            await wait_for(pilot, lambda: any("host stopped the table" in str(n.message) for n in app._notifications),
                           what="the notice on screen")
    finally:
        await server.stop()
        await store.close()
    assert table.status == "cancelled"


async def test_a_seat_whose_participant_left_reads_left_through_its_timed_out_turns_until_back(tmp_path):
    """Issue 34: in play, a human seat whose participant quit kept "human waiting" in the other
    players' seats bar.  It reads "left" — also after the game's own turn events for that seat
    (its talk turns time out under --turn-seconds) — until the participant is back."""
    from calbench_tui.widgets.seats import SeatsBar

    task, store, table, server = await _table(tmp_path, hold_seconds=600, turn_seconds=1)
    codes = {c["seat"]: c["code"] for c in table.codes()}
    app = make_app(settings=Settings(join=server.url, code=codes[0]))
    game = asyncio.ensure_future(table.run())
    bot = asyncio.ensure_future(RemoteBot(server.url, codes[2]).run())
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_for(pilot, lambda: app.screen is app.game_screen and table.status == "playing",
                           what="the game in play")
            await wait_painted(pilot, "2:human")
            assert "2:human left" not in screen_text(app)
            bot.cancel()  # seat 2's participant closes their laptop
            await wait_painted(pilot, "2:human left")
            # the game goes on: seat 2's turns start and run out (turn events for that seat) ...
            bar = app.game_screen.query_one(SeatsBar)
            await wait_for(pilot, lambda: bar.failed[2] is not None, what="a turn of seat 2 timed out")
            turns = [e for e in table.remote[0].events if e["type"] in ("turn_start", "decide_start")
                     and e.get("agent_id") == 2]
            assert turns
            # ... and its cell still says "left", not "waiting" / "thinking…" / "failed"
            assert "2:human left" in bar.render().plain
            again = asyncio.ensure_future(RemoteBot(server.url, codes[2]).run())
            # (the bar as it paints itself: the game may be over by now, its end screen on top)
            await wait_for(pilot, lambda: "2:human" in bar.render().plain and "2:human left" not in bar.render().plain,
                           what="seat 2 shown as back")
            again.cancel()
    finally:
        game.cancel()
        bot.cancel()
        await server.stop()
        await store.close()
