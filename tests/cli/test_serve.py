"""``calbench serve`` as a user runs it: a real process, real websockets, a real browser."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.remote_bot import RemoteBot

REPO = Path(__file__).resolve().parents[2]


def _serve(tmp_path, *extra):
    db = tmp_path / "serve.db"
    cmd = [sys.executable, "-c", "import sys; from calbench_cli.cli import main; sys.exit(main())", "serve",
           "--agents", "human,imap,human,imap,imap", "--task", "canonical:3", "--port", "0", "--json",
           "--db", str(db), "--linger", "0", *extra]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise AssertionError(f"serve printed nothing: {proc.stderr.read()}")
    return proc, json.loads(line), db


def _status(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT game_id, status FROM games").fetchall()


def test_serve_prints_the_join_line_and_a_served_game_is_saved(tmp_path):
    proc, info, db = _serve(tmp_path, "--no-web")
    try:
        assert set(info) == {"url", "web", "game_id", "seats"} and info["url"].startswith("ws://127.0.0.1:")
        assert [s["seat"] for s in info["seats"]] == [0, 2]
        assert len({s["code"] for s in info["seats"]}) == 2 and all(len(s["code"]) >= 16 for s in info["seats"])

        async def play():
            return await asyncio.gather(*(RemoteBot(info["url"], s["code"]).run() for s in info["seats"]))

        results = asyncio.run(asyncio.wait_for(play(), 60))
        assert all(r["type"] == "game_over" and r["status"] == "completed" for r in results)
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()
    assert _status(db) == [(info["game_id"], "completed")]


def test_ctrl_c_stops_the_server_with_the_game_saved_as_stopped(tmp_path):
    proc, info, db = _serve(tmp_path, "--no-web")
    try:
        async def start_playing():
            bots = [RemoteBot(info["url"], s["code"], think=0.05) for s in info["seats"]]
            tasks = [asyncio.ensure_future(b.run()) for b in bots]
            while sum(b.answers for b in bots) < 3:
                await asyncio.sleep(0.02)
            proc.send_signal(signal.SIGINT)
            await asyncio.wait(tasks, timeout=10)
            return bots

        bots = asyncio.run(start_playing())
        # every participant is told, and the server is gone at once (not after the clients' timeouts)
        assert all(b.result and b.result["type"] == "stopped" and "saved" in b.result["message"] for b in bots)
        assert proc.wait(timeout=5) == 130
        assert f"Game {info['game_id']} is saved as stopped" in proc.stderr.read()
    finally:
        proc.kill()
    assert _status(db) == [(info["game_id"], "stopped")]


def test_ctrl_c_in_the_lobby_says_nothing_was_saved_and_closes_an_idle_connection_at_once(tmp_path):
    proc, info, db = _serve(tmp_path, "--no-web")
    try:
        async def wait_in_lobby():
            import aiohttp

            async with aiohttp.ClientSession() as http, http.ws_connect(info["url"]) as ws:
                await ws.send_str(json.dumps({"type": "join", "code": info["seats"][0]["code"]}))
                assert (await ws.receive_json(timeout=10))["type"] == "welcome"
                proc.send_signal(signal.SIGINT)
                frames = []
                while True:  # this client never closes on its own: the server must close it
                    msg = await ws.receive(timeout=10)
                    if msg.type != aiohttp.WSMsgType.TEXT:
                        return frames
                    frames.append(json.loads(msg.data))

        frames = asyncio.run(wait_in_lobby())
        assert {"type": "stopped", "message": "the host stopped the table before the game started"} in frames
        assert proc.wait(timeout=5) == 130
        err = proc.stderr.read()
        assert "nothing was played or saved" in err and "saved as" not in err
    finally:
        proc.kill()
    assert _status(db) == []


def test_bad_serve_options_are_one_line(cli):
    rc, out, err = cli("serve", "--agents", "imap", "--task", "canonical:3")
    assert rc == 2 and "no 'human' seat" in err and "Traceback" not in err
    rc, out, err = cli("serve", "--agents", "human,imap", "--task", "canonical:3")
    assert rc == 2 and "names 2 seats" in err
    rc, out, err = cli("serve", "--agents", "human", "--task", "canonical:3", "--lobby-fill", "wizard")
    assert rc == 2 and "--lobby-fill" in err
    rc, out, err = cli("serve", "--agents", "human", "--task", "canonical:3", "--host", "")
    assert rc == 2 and "--host needs an address" in err  # aiohttp would listen on every interface


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)")
def test_a_participant_plays_from_a_real_browser(tmp_path):
    playwright = pytest.importorskip("playwright.async_api")
    proc, info, db = _serve(tmp_path, "--hold", "60")
    browser_seat = info["seats"][1]
    shot = tmp_path / "browser.png"
    try:
        async def main():
            bot = RemoteBot(info["url"], info["seats"][0]["code"])
            bot_task = asyncio.ensure_future(bot.run())
            async with playwright.async_playwright() as p:
                browser = await p.chromium.launch(
                    executable_path=CHROMIUM,
                    args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync"])
                page = await browser.new_page(viewport={"width": 1200, "height": 800})
                await page.goto(f"{info['web']}?code={browser_seat['code']}")
                await page.wait_for_selector("canvas", timeout=30_000)
                # the browser's seat speaks first in round 1: wait for its turn, then end turns by key
                t0 = time.monotonic()
                while not any(f["type"] == "event" and f["event"]["type"] == "turn_start"
                              and f["event"].get("agent_id") == 2 for f in bot.frames):
                    assert time.monotonic() - t0 < 40, "the browser's seat never got a turn"
                    await asyncio.sleep(0.2)
                await page.wait_for_timeout(1500)
                await page.screenshot(path=str(shot))
                await page.mouse.click(600, 400)  # focus the terminal, as a person would
                await page.keyboard.press("q")  # close the instructions, which open first for everyone (escape + e would read as alt+e)
                t0 = time.monotonic()
                def ended() -> bool:
                    return any(f["type"] == "event" and f["event"]["type"] == "turn_end"
                               and f["event"].get("agent_id") == 2 for f in bot.frames)

                while not ended():
                    # a person presses again when nothing seems to happen (a loaded machine is slow to draw)
                    assert time.monotonic() - t0 < 40, "the key pressed in the browser never reached the game"
                    await page.keyboard.press("e")
                    pressed = time.monotonic()
                    while not ended() and time.monotonic() - pressed < 2:
                        await asyncio.sleep(0.1)
                await browser.close()
            bot_task.cancel()

        asyncio.run(main())
        assert shot.stat().st_size > 10_000  # a rendered screen, not a blank page
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        finally:
            proc.kill()
    assert _status(db)[0][1] == "stopped"


def _serve_study(tmp_path, *extra):
    study = tmp_path / "study.toml"
    from calbench_cli.cli import main as cli_main

    assert cli_main(["study", "init", str(study)]) == 0
    db = tmp_path / "study.db"
    cmd = [sys.executable, "-c", "import sys; from calbench_cli.cli import main; sys.exit(main())", "serve",
           "--study", str(study), "--participants", "P01,P02", "--port", "0", "--json", "--db", str(db), *extra]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise AssertionError(f"serve --study printed nothing: {proc.stderr.read()}")
    return proc, json.loads(line), study, db


def test_serve_study_gives_each_participant_a_private_link(tmp_path):
    import urllib.error
    import urllib.request

    proc, info, study, db = _serve_study(tmp_path)
    try:
        assert [p["participant"] for p in info["participants"]] == ["P01", "P02"]
        codes = [p["code"] for p in info["participants"]]
        assert len(set(codes)) == 2 and all(len(c) >= 16 for c in codes)
        page = urllib.request.urlopen(info["participants"][0]["link"], timeout=10).read().decode()
        assert f"/ws/{codes[0]}" in page  # the page's app socket carries the participant's code
        for bad in (info["web"], info["web"] + "?code=not-a-participant"):
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(bad, timeout=10)
            assert err.value.code == 404
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 130
        proc.kill()


def test_serve_study_options_are_checked(cli, tmp_path):
    rc, out, err = cli("serve", "--study", str(tmp_path / "missing.toml"), "--participants", "2")
    assert rc == 2 and "Traceback" not in err
    cli("study", "init", str(tmp_path / "ok.toml"))
    rc, out, err = cli("serve", "--study", str(tmp_path / "ok.toml"))
    assert rc == 2 and "--participants" in err
    rc, out, err = cli("serve", "--study", str(tmp_path / "ok.toml"), "--participants", "P1,P1")
    assert rc == 2 and "twice" in err
    rc, out, err = cli("serve", "--participants", "3")
    assert rc == 2 and "--study" in err
    rc, out, err = cli("serve", "--task", "canonical:3")
    assert rc == 2 and "--agents" in err


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)")
def test_a_study_participant_starts_their_session_in_a_real_browser(tmp_path):
    playwright = pytest.importorskip("playwright.async_api")
    proc, info, study, db = _serve_study(tmp_path)
    try:
        async def main():
            async with playwright.async_playwright() as p:
                browser = await p.chromium.launch(
                    executable_path=CHROMIUM,
                    args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync"])
                page = await browser.new_page(viewport={"width": 1200, "height": 800})
                await page.goto(info["participants"][1]["link"])
                await page.wait_for_selector("canvas", timeout=30_000)
                t0 = time.monotonic()
                while True:  # the session is recorded as started, at its first step, under its id
                    out = subprocess.run([sys.executable, "-c",
                                          "import sys; from calbench_cli.cli import main; sys.exit(main())",
                                          "study", "status", str(study), "--db", str(db), "--json"],
                                         cwd=REPO, capture_output=True, text=True)
                    if out.returncode == 0 and '"P02"' in out.stdout:
                        break
                    assert time.monotonic() - t0 < 40, f"P02's session never started: {out.stdout}{out.stderr}"
                    await asyncio.sleep(0.5)
                await browser.close()
            return json.loads(out.stdout)

        status = asyncio.run(main())
        assert "P01" not in json.dumps(status)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        finally:
            proc.kill()
