"""A lab's whole session on one host (issue 34): nobody locked out after a host crash, no
session lost to a locked database, per-address limits that fit labs, warm starts, and the
pages told the truth when the host stops.

Each test runs a real ``calbench serve`` and light participants speaking the page's own
websocket protocol (``calbench_devtools.page_client``).  Every wait is bounded and generous.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from calbench_devtools.page_client import PageClient, descendants as _descendants, process_cpu as _cpu, process_stat as _stat

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "import sys; from calbench_cli.cli import main; sys.exit(main())"]
PATIENCE = 120.0  # seconds a participant may take to reach a screen on a loaded machine

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")


def _study(tmp_path: Path) -> Path:
    from calbench_cli.cli import main as cli_main

    study = tmp_path / "study.toml"
    assert cli_main(["study", "init", str(study)]) == 0
    return study


def _serve_study(tmp_path: Path, study: Path, db: Path, participants: str, *extra: str, port: int = 0,
                 session: bool = False):
    err = open(tmp_path / f"serve-{time.time_ns()}.err", "w")
    proc = subprocess.Popen([*CLI, "serve", "--study", str(study), "--participants", participants, "--port", str(port),
                             "--json", "--db", str(db), *extra], cwd=REPO, stdout=subprocess.PIPE, stderr=err,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1", "TEXTUAL_ANIMATIONS": "none"},
                            start_new_session=session)  # session: a terminal of its own (ctrl+c hits its group)
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise AssertionError(f"serve printed nothing: {Path(err.name).read_text()}")
    info = json.loads(line)
    base = info["web"].replace("http://", "ws://").rstrip("/")
    return proc, {p["participant"]: f"{base}/ws/{p['code']}" for p in info["participants"]}, Path(err.name)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def _running(pid: int) -> bool:
    try:
        return _stat(pid)[0] not in ("Z", "X")
    except OSError:
        return False


async def _at_consent(urls: list[str]) -> list[PageClient]:
    pages = [await PageClient(u).connect() for u in urls]
    reached = await asyncio.gather(*(p.wait_for("I agree", timeout=PATIENCE) for p in pages))
    assert all(reached), [p.text[-300:] for p, ok in zip(pages, reached) if not ok]
    return pages


def test_kill_9_of_the_host_leaves_no_app_process_and_a_restart_readmits_everyone(tmp_path):
    """Item 1: before, every participant's app process lived on after ``kill -9`` of the server
    (2 a participant, still there minutes later) and kept the session claimed, so after a
    restart each link ended at once.  Now they die with the host and the links work again."""
    study = _study(tmp_path)
    db = tmp_path / "study.db"
    proc, links, _ = _serve_study(tmp_path, study, db, "P01,P02,P03")
    try:
        async def connect_then_kill() -> list[int]:
            pages = await _at_consent(list(links.values()))
            apps = _descendants(proc.pid)
            assert apps, "no app process runs for the connected participants"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            t0 = time.monotonic()
            while [p for p in apps if _running(p)]:
                assert time.monotonic() - t0 < 60, ("participant app processes outlived the host",
                                                    [p for p in apps if _running(p)])
                await asyncio.sleep(0.2)
            for p in pages:
                await p.close()
            return apps

        asyncio.run(connect_then_kill())
    finally:
        if proc.poll() is None:
            proc.kill()
    again, links2, _ = _serve_study(tmp_path, study, db, "P01,P02,P03")
    try:
        assert {k: v.rsplit("/ws/", 1)[1] for k, v in links2.items()} == \
            {k: v.rsplit("/ws/", 1)[1] for k, v in links.items()}  # the same links (only the port differs)

        async def readmitted() -> None:
            pages = await _at_consent(list(links2.values()))
            for p in pages:  # each session is live, not refused: agreeing moves it on
                mark = len(p.text)
                await p.key("y")
                assert await p.wait_for("Instructions", "instructions", "Continue", "continue", timeout=PATIENCE,
                                        since=mark), p.text[-400:]
                assert not p.closed
            for p in pages:
                await p.close()

        asyncio.run(readmitted())
    finally:
        _stop(again)


HOLD_WRITE = """
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN IMMEDIATE")
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
con.execute("COMMIT")
"""


def test_concurrent_starts_wait_for_a_busy_database_instead_of_ending_sessions(tmp_path):
    """Item 2: many participants start at once while another writer holds the study
    database longer than the old 10 s busy timeout (what a heavily loaded host amounts to):
    every session waits its turn and reaches the consent screen; none ends with
    "database is locked"."""
    study = _study(tmp_path)
    db = tmp_path / "study.db"
    ids = ",".join(f"P{i:02d}" for i in range(1, 11))
    proc, links, err = _serve_study(tmp_path, study, db, ids, "--max-sessions-per-address", "100")
    holder = None
    try:
        async def main() -> None:
            nonlocal holder
            from saves.store import Store

            store = await Store.open(db)  # the study's database, as its first participant leaves it (WAL)
            await store.close()
            holder = subprocess.Popen([sys.executable, "-c", HOLD_WRITE, str(db), "14"], stdout=subprocess.PIPE,
                                      text=True)
            assert (await asyncio.to_thread(holder.stdout.readline)).strip() == "holding"
            pages = await _at_consent(list(links.values()))
            for p in pages:
                assert not p.closed
                await p.close()

        asyncio.run(main())
    finally:
        if holder is not None:
            holder.kill()
        _stop(proc)
    assert "locked" not in err.read_text()
    con = sqlite3.connect(db)
    try:
        enrolled = con.execute("SELECT COUNT(*) FROM study_participants").fetchone()[0]
    finally:
        con.close()
    assert enrolled == 10


def test_a_lab_behind_one_address_gets_every_study_link_started(tmp_path):
    """Item 3: a study is keyed per participant link — nine participants behind one NAT
    address (more than the table's default cap of 8) all start."""
    study = _study(tmp_path)
    ids = ",".join(f"P{i:02d}" for i in range(1, 10))
    proc, links, _ = _serve_study(tmp_path, study, tmp_path / "study.db", ids)
    try:
        async def main() -> None:
            pages = await _at_consent(list(links.values()))
            for p in pages:
                await p.close()

        asyncio.run(main())
    finally:
        _stop(proc)


def _serve_table(tmp_path: Path, *extra: str):
    err = open(tmp_path / f"table-{time.time_ns()}.err", "w")
    proc = subprocess.Popen([*CLI, "serve", "--agents", "human,imap,human,imap,imap", "--task", "canonical:3",
                             "--port", "0", "--json", "--db", str(tmp_path / "serve.db"), *extra], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=err, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "TEXTUAL_ANIMATIONS": "none"})
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise AssertionError(f"serve printed nothing: {Path(err.name).read_text()}")
    return proc, json.loads(line), Path(err.name)


def test_a_refused_page_says_why_and_a_forged_forwarded_address_does_not_get_round_the_cap(tmp_path):
    """Item 3: a page over the per-address cap is closed with code 4002 and a reason in words
    (the page shows it and does not reload; before: HTTP 429 and a reload loop); a client on
    the host cannot pass itself off as another address with X-Forwarded-For unless it is a
    configured ``--trusted-proxy``."""
    proc, info, _ = _serve_table(tmp_path, "--max-sessions-per-address", "1")
    web = info["web"].rstrip("/")
    base = web.replace("http://", "ws://")
    codes = [s["code"] for s in info["seats"]]
    try:
        async def main() -> None:
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{web}/?code={codes[1]}") as r:
                    page = await r.text()
                assert "REFUSED = 4002" in page and "-refused" in page  # the page knows the refusal
            first = await PageClient(f"{base}/ws/{codes[0]}").connect()
            assert await first.wait_for("Agent", "seat", timeout=PATIENCE), first.text[-300:]
            second = PageClient(f"{base}/ws/{codes[1]}")
            await second.connect()
            assert await second.wait_closed(PATIENCE) == 4002
            assert "limit is 1" in second.close_reason and "researcher" in second.close_reason
            await second.close()
            forged = PageClient(f"{base}/ws/{codes[1]}")
            forged_http = aiohttp.ClientSession()
            try:
                ws = await forged_http.ws_connect(forged.url, headers={"X-Forwarded-For": "10.9.9.9"})
                msg = await ws.receive(timeout=PATIENCE)
                while msg.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT):
                    msg = await ws.receive(timeout=PATIENCE)
                assert ws.close_code == 4002
            finally:
                await forged_http.close()
            await first.close()

        asyncio.run(main())
    finally:
        _stop(proc)

    # from a trusted proxy, the forwarded address is the client's
    proc, info, _ = _serve_table(tmp_path, "--max-sessions-per-address", "1", "--trusted-proxy", "127.0.0.1")
    base = info["web"].rstrip("/").replace("http://", "ws://")
    codes = [s["code"] for s in info["seats"]]
    try:
        async def proxied() -> None:
            async with aiohttp.ClientSession() as http:
                one = await http.ws_connect(f"{base}/ws/{codes[0]}?width=80&height=24",
                                            headers={"X-Forwarded-For": "10.0.0.1"})
                two = await http.ws_connect(f"{base}/ws/{codes[1]}?width=80&height=24",
                                            headers={"X-Forwarded-For": "10.0.0.2"})
                msg = await two.receive(timeout=PATIENCE)
                assert msg.type == aiohttp.WSMsgType.BINARY, msg  # started: the screen arrives
                await one.close()
                await two.close()

        asyncio.run(proxied())
    finally:
        _stop(proc)


def test_a_participant_process_is_forked_warm_and_costs_a_fraction_of_a_cold_start(tmp_path):
    """Item 5: a participant's app process is a fork of the pre-imported zygote, and the CPU
    it spends to the consent screen is under half of what the zygote spent importing what a
    cold start imports (both measured on this machine, under its load)."""
    study = _study(tmp_path)
    proc, links, _ = _serve_study(tmp_path, study, tmp_path / "study.db", "P01")
    try:
        async def main() -> None:
            pages = await _at_consent([links["P01"]])
            kids = _descendants(proc.pid)
            zygote = [p for p in kids if int(_stat(p)[1]) == proc.pid]
            apps = [p for p in kids if p not in zygote]
            assert len(zygote) == 1 and len(apps) == 1, (zygote, apps)
            assert int(_stat(apps[0])[1]) == zygote[0]  # forked by the zygote, not started afresh
            assert _cpu(apps[0]) < 0.5 * _cpu(zygote[0]), (_cpu(apps[0]), _cpu(zygote[0]))
            for p in pages:
                await p.close()

        asyncio.run(main())
    finally:
        _stop(proc)


def test_ctrl_c_on_the_host_tells_pages_to_reconnect_not_that_the_session_ended(tmp_path):
    """Item 4/5: after a ctrl+c on the host, a page's websocket closes with 1012 ("restarting":
    the page shows the reconnect banner and comes back with the server), not 1000 (textual's
    "Session ended"); the participant's app is not hit by the terminal's SIGINT."""
    study = _study(tmp_path)
    proc, links, err = _serve_study(tmp_path, study, tmp_path / "study.db", "P01", session=True)
    try:
        async def main() -> int | None:
            (page,) = await _at_consent([links["P01"]])
            os.killpg(proc.pid, signal.SIGINT)  # ctrl+c at the host's terminal: its whole foreground group
            code = await page.wait_closed(PATIENCE)
            await page.close()
            return code

        assert asyncio.run(main()) == 1012
        proc.wait(timeout=PATIENCE)
    finally:
        _stop(proc)
    log = err.read_text()
    assert "participant P01 connected" in log and "1 open page(s) told the server is restarting" in log


def test_the_page_s_files_come_compressed_and_nothing_outside_them_is_served(tmp_path):
    """Item 6: the page's script (514 KB) and fonts come gzip-compressed to a browser that
    takes gzip — the script in under 200 KB, so the first frame needs well under half of
    the 0.9 MB it needed — and a path out of the static folder is not served."""
    proc, info, _ = _serve_table(tmp_path)
    web = info["web"].rstrip("/")
    try:
        async def main() -> None:
            async with aiohttp.ClientSession(auto_decompress=False) as http:
                total = 0
                for path in ("js/textual.js", "css/xterm.css", "fonts/RobotoMono-VariableFont_wght.ttf"):
                    async with http.get(f"{web}/static/{path}", headers={"Accept-Encoding": "gzip"}) as r:
                        body = await r.read()
                        assert r.status == 200 and r.headers.get("Content-Encoding") == "gzip", (path, r.headers)
                        total += len(body)
                        if path.endswith(".js"):
                            assert len(body) < 200_000
                assert total < 450_000
                async with http.get(f"{web}/static/js/textual.js", headers={"Accept-Encoding": "identity"}) as r:
                    assert "Content-Encoding" not in r.headers and len(await r.read()) > 400_000
                async with http.get(f"{web}/static/%2e%2e/server.py") as r:
                    assert r.status == 404

        asyncio.run(main())
    finally:
        _stop(proc)
