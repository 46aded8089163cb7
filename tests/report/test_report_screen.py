"""The report screen (Pilot): the tables and the three charts drawn in the terminal; regrouping."""

from __future__ import annotations

import json

from textual.app import App

from calbench_tui import report_view as R
from calbench_tui.app import screen_text
from calbench_tui.screens.report import ReportScreen
from saves.store import Store

from .test_reporting import GAMES


class Host(App):
    def __init__(self, screen):
        super().__init__()
        self._screen = screen

    def on_mount(self) -> None:
        self.push_screen(self._screen)


async def wait_until(pilot, pred, timeout=20.0):
    t = 0.0
    while not pred():
        await pilot.pause(0.05)
        t += 0.05
        assert t < timeout, "timed out"


async def test_report_screen_shows_tables_and_charts_and_regroups():
    store = await Store.open(":memory:")
    try:
        for g in GAMES:
            await store.import_trace(json.loads(json.dumps(g)))
        screen = ReportScreen(store=store)
        app = Host(screen)
        async with app.run_test(size=(160, 60)) as pilot:
            await wait_until(pilot, lambda: screen.report is not None)
            await pilot.pause()
            text = screen_text(app)
            assert "Report over 3 completed game(s), 9 seats · grouped by persona" in text
            assert "Table 1" in text and "llm:a" in text and "75.00%" in text
            seen = [text]
            for _ in range(6):  # read on, a page at a time, as a person would
                await pilot.press("pagedown")
                await pilot.pause()
                seen.append(screen_text(app))
            plain = "\n".join(seen)
            for title in ("Privacy–cost plane — uniform cost", "Fairness by persona", "Messages against excess"):
                assert title in plain
            # The fairness bars: llm:a · uniform has mean fairness 1.25 (hand-computed in test_reporting).
            assert "llm:a · uniform" in plain and "1.250" in plain
            await pilot.press("g")
            await wait_until(pilot, lambda: screen.report is not None and screen.report["group_by"] == "model"
                             and "grouped by model" in screen_text(app))  # painted
            await pilot.press("g")
            await wait_until(pilot, lambda: screen.report["group_by"] == "cost_mode"
                             and "grouped by cost mode" in screen_text(app))  # painted
    finally:
        await store.close()


def test_text_charts_place_points_where_they_belong():
    # One point at (x max, 0) and one at (0, y max): bottom-right and top-left corners.
    t = R.text_scatter({"a": [(10.0, 0.0)], "b": [(0.0, 5.0)]}, width=20, height=5, title="T").plain
    grid = [ln for ln in t.splitlines() if "┤" in ln or "│" in ln]
    assert len(grid) == 5
    top, bottom = grid[0], grid[-1]
    assert top.split("┤", 1)[1].startswith("B")
    assert bottom.split("┤", 1)[1].rstrip().endswith("A")
    bars = R.text_bars([("x", 1.0, None), ("y", 0.5, 0.25)], width=10).plain
    lines = bars.splitlines()
    # Scaled to the longest bar including its interval (1.0): 10 cells, then 5 cells + 3 for ±0.25.
    assert lines[0].count("█") == 10 and "1.000" in lines[0]
    assert lines[1].count("█") == 5 and lines[1].count("─") == 3 and "±0.250" in lines[1]


async def test_report_screen_at_80_columns_keeps_each_persona_name_on_one_line():
    """Issue 13.8: ``report --tui`` at 80×24 split "dsm-private" into "dsm-p" / "rivate"."""
    import asyncio
    import concurrent.futures

    from engine.game import GameConfig, run_game
    from engine.generate import generate_scenario
    from personas.registry import make_personas

    def play(spec: str) -> dict:
        with concurrent.futures.ThreadPoolExecutor(1) as ex:
            res = ex.submit(asyncio.run, run_game(generate_scenario(4), make_personas(spec, 5),
                                                  GameConfig(deterministic=True))).result()
        return json.loads(json.dumps(res.trace))

    store = await Store.open(":memory:")
    try:
        for spec in ("dsm-private", "dsm-welfare", "imap,imap,passive,imap,imap"):
            await store.import_trace(play(spec))
        screen = ReportScreen(store=store)
        app = Host(screen)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: screen.report is not None)
            await pilot.pause()
            lines = screen_text(app).splitlines()
            for name in ("dsm-private", "dsm-welfare", "passive"):
                assert any(f"  {name} " in line for line in lines), (name, "\n".join(lines))
            header = next(line for line in lines if "Persona" in line)
            assert "Msgs/mtg" in header and "Fair." in header
    finally:
        await store.close()


async def test_report_tui_shows_the_projects_key_bar_not_textuals_footer():
    """Issue 35 (Also): ``report --tui`` ended in Textual's ``Footer`` while every other screen
    shows the project's key bar (keys as printed on the keyboard, clickable)."""
    from textual.widgets import Footer

    from calbench_cli.commands import report as report_cmd
    from calbench_tui.widgets.keybar import KeyBar

    from ..tui.helpers import wait_painted

    store = await Store.open(":memory:")
    try:
        for g in GAMES:
            await store.import_trace(json.loads(json.dumps(g)))
        rows = await store.game_results()
        traces = [await store.load_trace(g) for g in dict.fromkeys(r["game_id"] for r in rows)]
    finally:
        await store.close()
    app = report_cmd.report_app(rows, traces, "persona")  # what `calbench report --tui` runs
    async with app.run_test(size=(80, 24)) as pilot:
        text = await wait_painted(pilot, "Report over 3 completed game(s)", what="the report")
        assert text.splitlines()[-1].strip() == "g Group by  f5 Rebuild  l Legend  esc Close"
        assert not app.screen.query(Footer) and len(app.screen.query(KeyBar)) == 1
        await pilot.click(KeyBar, offset=(2, 0))  # the bar's keys are clickable: g regroups
        await wait_painted(pilot, "grouped by model", what="a click on g")
