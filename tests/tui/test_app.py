"""The app around the game: remapped keys, the first-run help, the mouse, NO_COLOR, and the
command line's one-line errors."""

from __future__ import annotations

import pytest

from calbench_tui.app import binding_ids, make_app, screen_text
from calbench_cli.cli import play_main
from calbench_cli.commands import play as play_cmd
from calbench_tui.screens.help import HelpScreen
from calbench_tui.settings import Settings
from calbench_tui.widgets.calendar import CalendarView

from .helpers import wait_for, wait_painted

SIZE = (80, 24)


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CALBENCH_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


async def _first_turn(pilot, app):
    await wait_for(pilot, lambda: app.game_screen is not None and app.game_screen.pending is not None,
                   what="the first turn")


async def test_remapped_keys_work_and_the_help_and_key_bar_show_them():
    app = make_app(settings=Settings(seat=2, seed=7, deterministic=True, keymap={"end_turn": "ctrl+t"}))
    async with app.run_test(size=SIZE) as pilot:
        await _first_turn(pilot, app)
        gs = app.game_screen
        await wait_for(pilot, lambda: "ctrl+t End turn" in screen_text(app), what="the remapped key on the bar")
        req = gs.pending
        await pilot.press("e")  # no longer bound
        assert gs.pending is req and not req.done
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: req.done, what="the turn to end")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        help_text = " ".join(w.render().plain for w in app.screen.query("Static") if hasattr(w.render(), "plain"))
        assert "ctrl+t" in help_text and "End turn" in help_text
        # readable key names, no internal ids
        assert "[end_turn]" not in help_text and "question_mark" not in help_text
        assert "left_square_bracket" not in help_text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_the_instructions_open_before_every_game_until_the_player_turns_them_off():
    """A study: every participant (every game of a session) gets the instructions first; a
    config file of the machine plays no part.  h turns them off for this session only."""
    app = make_app(settings=Settings(seat=2, seed=7, deterministic=True, show_help=True))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen) and app.screen.intro
        await wait_painted(pilot, "Each round has four phases")
        await pilot.press("escape")
        await _first_turn(pilot, app)
        await app._stop_game()  # (as if the game had ended)
        app.play_again()  # the setup screen, prefilled; ctrl+s starts the next game
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="the instructions again")
        await pilot.press("h", "escape")
        assert app.intro_each_game is False
        await app._stop_game()
        app.play_again()
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.game_screen is not None and app.screen is app.game_screen,
                       what="the next game, without the instructions")


async def test_the_mouse_moves_the_calendar_cursor_and_runs_keys():
    app = make_app(settings=Settings(seat=2, seed=7, deterministic=True))
    async with app.run_test(size=SIZE) as pilot:
        await _first_turn(pilot, app)
        cal = app.game_screen.query_one(CalendarView)
        await pilot.click(CalendarView, offset=(6, 1 + 9))  # header line, then slot 9
        assert cal.cursor == 9
        req = app.game_screen.pending
        bar = app.game_screen.query_one("KeyBar")
        await wait_for(pilot, lambda: "End turn" in str(bar.render()), what="the key bar")
        await pilot.click(bar, offset=(2, 0))  # "e End turn" is the first key on the bar
        await wait_for(pilot, lambda: req.done, what="the click to end the turn")


async def test_no_color_is_honoured_and_cues_do_not_rely_on_colour(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(settings=Settings(seat=2, seed=7, deterministic=True))
    assert app.no_color
    async with app.run_test(size=SIZE) as pilot:
        await _first_turn(pilot, app)
        await pilot.press("r", "e")
        await wait_for(pilot, lambda: app.game_screen.pending is not None and app.game_screen.model.reported,
                       what="the costs")
        await pilot.press("p")  # propose the cheapest common slot: it is now the one talked about
        text = await wait_painted(pilot, "▸»", "YOUR TURN")
        assert "▸»" in text  # the cursor and the slot under discussion are marked by characters
        assert "YOUR TURN" in text


def test_binding_ids_are_unique_and_cover_the_game():
    ids = binding_ids()
    assert len(ids) == len(set(ids))
    for needed in ("quit", "help", "end_turn", "propose", "accept", "decline", "share_costs", "ask_costs",
                   "compose", "submit", "meet_here", "move", "export", "replay", "play_again",
                   "setup.games", "end.games", "games.open", "games.report"):
        assert needed in ids


@pytest.mark.parametrize("argv, message", [
    (["--seat", "-1"], "--seat must be 0 or more"),
    (["--seat", "9"], "--seat 9 does not exist"),
    (["--seat", "2", "--channel", "sms"], "unknown channel 'sms'"),
    (["--seat", "2", "--task", "seed:x"], "bad task reference"),
    (["--seat", "2", "--task", "canonical:0-3"], "names 4 tasks"),
    (["--seat", "2", "--max-turns", "0"], "--max-turns must be at least 1"),
    (["--join", "", "--code", "abc"], "--join '' is not a table address"),  # once: a local game, or '--code goes with'
    (["--join", "ws://127.0.0.1:9/table", "--seat", "2", "--task", "canonical:3"],
     "--seat, --task set up a game on this machine; with --join the table decides"),
])
def test_command_line_mistakes_are_one_line(argv, message, capsys):
    assert play_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("calbench: error:") and message in err and "\n" not in err


def test_a_bad_keys_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "keys.toml"
    bad.write_text('[keys]\nfly = "f"\n')
    assert play_main(["--seat", "2", "--keys", str(bad)]) == 2
    assert "unknown binding id 'fly'" in capsys.readouterr().err


def test_a_missing_keys_file_given_explicitly_is_one_line(tmp_path, capsys, monkeypatch):
    missing = tmp_path / "nope" / "keys.toml"
    assert play_main(["--seat", "2", "--keys", str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("calbench: error:") and "does not exist" in err and str(missing) in err
    assert "\n" not in err
    # The default file (no --keys) may be missing: that is simply the default keys.
    from calbench_tui.settings import load_keymap

    monkeypatch.setenv("CALBENCH_CONFIG_DIR", str(tmp_path / "empty-config"))
    assert load_keymap(None, ["end_turn"]) == {}


def test_parser_defaults_pin_the_first_game():
    args = play_cmd.build_parser().parse_args(["--seat", "2"])
    assert (args.seat, args.agents, args.task, args.cost, args.channel) == (2, None, None, "uniform", "dm")
    app = make_app(settings=Settings(seat=2))
    assert app.agents_spec(5) == "imap,imap,human,imap,imap"
    task = app.resolve_task()
    assert task.num_agents == 5 and task.cost_mode == "uniform" and task.seed is not None


async def test_saved_games_are_reachable_from_the_setup_screen(tmp_path):
    from calbench_tui.screens.setup import SetupScreen
    from saves.store import Store

    store = await Store.open(tmp_path / "games.db")
    try:
        app = make_app(settings=Settings(seat=None), store=store)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, SetupScreen), what="the setup screen")
            await pilot.press("ctrl+g")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "SavedGamesScreen" and app.screen.loaded,
                           what="the saved games list")
            await wait_painted(pilot, "No saved games yet")
            await pilot.press("escape")
            assert isinstance(app.screen, SetupScreen)
    finally:
        await store.close()


async def test_a_failing_game_is_saved_failed_with_its_error_and_traceback(tmp_path):
    """The app plays through lab.session: a persona that raises is recorded like in a suite."""
    from engine.taskref import resolve_tasks
    from personas.registry import make_personas
    from saves.store import Store

    class Broken:
        kind = "scripted"
        model = None

        async def register(self, seat):
            raise RuntimeError("seat 0 broke")

    task = resolve_tasks("canonical:3")[0]

    def seats(task, human):
        out = make_personas("imap", task.num_agents)
        out[0] = Broken()
        return out

    store = await Store.open(tmp_path / "games.db")
    try:
        app = make_app(settings=Settings(seat=2, deterministic=True), store=store, task=task, seats=seats)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.status == "failed", what="the game to fail")
            assert "RuntimeError: seat 0 broke" in (app.error or "")
            gid = app.game_id
        games = {g["game_id"]: g for g in await store.list_games()}
        trace = await store.load_trace(gid)
    finally:
        await store.close()
    assert games[gid]["status"] == "failed"
    assert "RuntimeError: seat 0 broke" in trace.get("error", "")
    assert "Traceback" in trace.get("error_traceback", "") and "seat 0 broke" in trace["error_traceback"]


async def test_a_new_game_says_that_a_stopped_game_of_yours_can_be_continued(tmp_path):
    """calbench-play started again after a quit began a new game without a word about the
    stopped one (found by hand); it now says how to continue it.  A stopped game without a
    person's seat (a suite's) is not mentioned."""
    from saves.store import Store

    store = await Store.open(tmp_path / "games.db")
    try:
        for gid, agents in (("aaaa1111-0000", "imap,imap,imap,imap,imap"), ("bbbb2222-0000", "imap,imap,human,imap,imap")):
            await store.create_game(gid, task_row={"task_id": "t"}, config={}, agents=agents, settings_key="k",
                                    started_at="2026-01-01T00:00:00+00:00")
            await store.mark_status(gid, "stopped")
        app = make_app(settings=Settings(seat=2, seed=7, deterministic=True), store=store)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: any("can be continued" in n.message for n in app._notifications),
                           what="the note about the stopped game")
            note = next(n.message for n in app._notifications if "can be continued" in n.message)
            assert "calbench-play --resume bbbb2222" in note and "aaaa1111" not in note
    finally:
        await store.close()
