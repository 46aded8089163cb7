"""Resuming a game with LLM seats restores every seat's settings (issue 12).

Three LLM seats with different models, variants, structured modes, context windows,
history modes, sampling and timeouts play against the loopback mock with the human on
seat 2.  The game is stopped (ctrl+q, or the process is killed with SIGKILL) and resumed
*without* any LLM option: every seat must come back with exactly the settings it was
saved with, talk to the same endpoint, and finish the game; the nosy seats stay nosy.
An endpoint that no longer answers is refused before the screen opens, in one line.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from calbench_tui.app import make_app
from calbench_cli.commands.play import resume_command
from calbench_tui.screens.end import EndScreen
from calbench_tui.settings import Settings
from calbench_devtools.mock_endpoint import MockLLMServer
from saves.store import Store

from .helpers import PATIENCE, play_to_end, wait_for
from .llm_resume_child import make_seats, seat_settings

SIZE = (80, 24)
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "play.db")
    yield s
    await s.close()


def public(settings) -> dict:
    return {k: v for k, v in settings.public().items() if k != "concurrency"}


async def resume_and_finish(store, game_id: str, base_url: str) -> tuple[list, dict]:
    """Resume with no LLM option at all; returns (the seats the app made, the final trace)."""
    again = make_app(settings=Settings(resume=game_id[:8], deterministic=True), store=store)  # llm=None
    made: list = []
    real = again.make_seats
    again.make_seats = lambda task: made.extend(real(task)) or made  # type: ignore[method-assign]
    async with again.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: again.game_screen is not None, what="the resumed game", timeout=PATIENCE)
        await play_to_end(pilot, again, timeout=4 * PATIENCE)
        assert isinstance(again.screen, EndScreen)
    assert again.game_id == game_id
    return made, await store.load_trace(game_id)


def check_restored(made: list, final: dict, base_url: str) -> None:
    want = seat_settings(base_url)
    for seat, st in want.items():
        p = made[seat]
        assert p.kind == "llm" and p.model_name == st.model and p.variant == st.variant
        assert public(p.settings) == public(st), f"seat {seat}: settings differ after resume"
        assert p.settings.resolved_base_url() == base_url
    assert made[4].kind != "llm" and made[2].kind == "human"
    cfg = final["config"]
    assert final["saved"]["status"] == "completed"
    assert [e and e["model"] for e in cfg["llm"]] == ["model-a", "model-b", None, "model-c", None]
    for seat, st in want.items():
        saved = {k: v for k, v in cfg["llm"][seat].items() if k != "concurrency"}
        assert saved == {**public(st), "model": st.model, "variant": st.variant}
        assert "key" not in "".join(cfg["llm"][seat]).replace("api_key_env", "")
    assert cfg["nosy_agent_ids"] == [0, 3]  # redteam and nosy-highpressure, before and after the resume
    start = next(e for e in final["events"] if e["type"] == "game_start")
    assert start["data"]["nosy_agent_ids"] == [0, 3]


async def test_resume_after_ctrl_q_restores_every_llm_seat(store):
    async with MockLLMServer(policy="cooperative") as server:
        app = make_app(settings=Settings(seat=2, seed=7, deterministic=True, max_turns_per_round=4), store=store,
                       seats=make_seats(server.base_url))
        async with app.run_test(size=SIZE) as pilot:
            await play_to_end(pilot, app, stop_after_rounds=1, timeout=4 * PATIENCE)
            await wait_for(pilot, lambda: app.game_screen.pending is not None, what="a turn in round 2")
            game_id = app.game_id
            await pilot.press("ctrl+q")
            await wait_for(pilot, lambda: app.status == "stopped", what="the game stopped")
        assert app.status == "stopped"
        before = len(server.records)
        made, final = await resume_and_finish(store, game_id, server.base_url)
        check_restored(made, final, server.base_url)
        after = server.records[before:]
        assert {r.model for r in after} >= {"model-a", "model-b", "model-c"}  # the same endpoint, same models
        # structured modes came back too: json_object (seat 0), none (seat 1), json_schema (seat 3)
        assert {"json_object+schema", "none", "json_schema+schema"} <= set(server.stats()["response_formats"])


async def test_resume_after_kill_9_restores_every_llm_seat(tmp_path):
    db = str(tmp_path / "killed.db")
    async with MockLLMServer(policy="cooperative") as server:
        child = await asyncio.create_subprocess_exec(
            sys.executable, str(HERE / "llm_resume_child.py"), server.base_url, db,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=str(ROOT),
            env={**os.environ, "TEXTUAL_ANIMATIONS": "none", "PYTHONPATH": str(ROOT)})
        try:
            line = await asyncio.wait_for(child.stdout.readline(), 180)
            assert line.startswith(b"READY "), (line, (await child.stderr.read())[-2000:])
            game_id = line.split()[1].decode()
        finally:
            child.send_signal(signal.SIGKILL)
            await child.wait()
        assert child.returncode == -signal.SIGKILL
        store = await Store.open(db)
        try:
            assert (await store.load_trace(game_id))["saved"]["status"] == "running"  # killed mid-game
            made, final = await resume_and_finish(store, game_id, server.base_url)
            check_restored(made, final, server.base_url)
        finally:
            await store.close()


async def test_an_unreachable_endpoint_at_resume_is_refused_in_one_line(tmp_path):
    db = str(tmp_path / "gone.db")
    store = await Store.open(db)
    try:
        async with MockLLMServer(policy="cooperative") as server:
            url = server.base_url
            app = make_app(settings=Settings(seat=2, seed=7, deterministic=True, max_turns_per_round=2),
                           store=store, seats=make_seats(url))
            async with app.run_test(size=SIZE) as pilot:
                await play_to_end(pilot, app, stop_after_rounds=1, timeout=4 * PATIENCE)
                game_id = app.game_id
                await pilot.press("ctrl+q")
                await pilot.pause()
    finally:
        await store.close()
    # The mock is gone: its port refuses connections.
    proc = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", "from calbench_cli.cli import play_main; raise SystemExit(play_main())",
                         "--resume", game_id[:8], "--db", db],
        capture_output=True, text=True, timeout=60, cwd=str(ROOT), stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"calbench: error: cannot resume game {game_id[:8]}: the LLM endpoint {url} "
                               "does not answer")
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_the_ctrl_q_message_is_the_full_resume_command():
    assert resume_command("0123456789abcdef") == "calbench-play --resume 01234567"
    assert resume_command("0123456789abcdef", "/tmp/my saves/x.db") == \
        "calbench-play --resume 01234567 --db '/tmp/my saves/x.db'"
