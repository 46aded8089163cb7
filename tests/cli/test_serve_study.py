"""Study links served by ``calbench serve --study`` (issue 24, item 26): the same link after a
restart, one live session per participant."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "import sys; from calbench_cli.cli import main; sys.exit(main())"]


def _serve_study(study: Path, db: Path, participants: str = "P01,P02"):
    proc = subprocess.Popen([*CLI, "serve", "--study", str(study), "--participants", participants, "--port", "0",
                             "--json", "--db", str(db)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = proc.stdout.readline()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=20)
    finally:
        proc.kill()
    assert line, proc.stderr.read()
    return {p["participant"]: p["code"] for p in json.loads(line)["participants"]}


def test_study_links_are_the_same_after_a_restart_and_derived_per_participant(tmp_path):
    from calbench_cli.cli import main as cli_main

    study = tmp_path / "study.toml"
    assert cli_main(["study", "init", str(study)]) == 0
    db = tmp_path / "study.db"
    first = _serve_study(study, db)
    again = _serve_study(study, db, "P02,P01,P03")  # a restart, in another order, with one more
    assert first["P01"] == again["P01"] and first["P02"] == again["P02"]
    assert len({first["P01"], first["P02"], again["P03"]}) == 3
    assert all(len(c) >= 16 and not c.startswith("-") for c in again.values())
    key = Path(str(db) + ".links-key")
    assert stat.S_IMODE(key.stat().st_mode) == 0o600  # the secret the links derive from
    other = tmp_path / "other.db"  # another database, another key: other links
    assert _serve_study(study, other)["P01"] != first["P01"]


HOLD = """
import asyncio, sys
from lab.lease import Lease, participant_subject
from saves.store import Store

async def main():
    store = await Store.open(sys.argv[1])
    lease = Lease(store, participant_subject(sys.argv[2], "P01"), role="study run")
    await lease.acquire()
    print("held", flush=True)
    await asyncio.sleep(120)

asyncio.run(main())
"""


async def test_one_live_session_per_participant(tmp_path):
    """A participant's session held by another live process (another tab's app, another
    terminal) is refused in one line naming it; nothing of the participant is started."""
    from calbench_tui.study_app import make_study_app
    from lab.study.model import load_study
    from saves.store import Store
    from saves.study import StudyStore

    from calbench_cli.cli import main as cli_main

    path = tmp_path / "study.toml"
    assert cli_main(["study", "init", str(path)]) == 0
    study = load_study(str(path))
    db = tmp_path / "study.db"
    store = await Store.open(db)
    await store.close()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(db), study.name], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert (await asyncio.to_thread(holder.stdout.readline)).strip() == "held", holder.stderr.read()
        app = make_study_app(study, participant="P01", store_path=str(db), base=path.parent)
        async with app.run_test(size=(100, 30)) as pilot:
            t0 = time.monotonic()
            while app.return_code is None:
                assert time.monotonic() - t0 < 30, "the second session was not refused"
                await pilot.pause(0.05)
        assert app.return_code == 2
        assert "participant P01's session is in use by study run" in app.error and f"pid {holder.pid}" in app.error
        store = await Store.open(db)
        try:
            assert await StudyStore(store, study.name).participant("P01") is None  # nothing started
        finally:
            await store.close()
    finally:
        holder.kill()
        holder.wait(timeout=10)


async def test_a_reload_during_the_last_belief_grid_asks_it_again_on_resume(tmp_path):
    """The page is reloaded (the session stopped) while the last round's belief grid is open:
    the round is saved, and the resumed session asks that grid again instead of skipping it."""
    from calbench_cli.cli import main as cli_main
    from lab.study.model import load_study
    from lab.study.runner import StudyRunner
    from lab.study.simulate import SimulatedDriver, simulated_ids
    from saves.store import Store
    from saves.study import StudyStore

    path = tmp_path / "study.toml"
    assert cli_main(["study", "init", str(path)]) == 0
    study = load_study(str(path))
    pid = simulated_ids(1)[0]
    reached = asyncio.Event()
    asked: list[tuple[str, int]] = []

    class ClosedDuringTheGrid(SimulatedDriver):
        async def beliefs(self, ctx, req):
            if not ctx.game.practice and req.round == len(ctx.task.meetings) - 1:
                self.game_id = ctx.game_id
                reached.set()
                await asyncio.Event().wait()  # the grid is on screen when the page goes away
            return await super().beliefs(ctx, req)

    class Resumed(SimulatedDriver):
        async def beliefs(self, ctx, req):
            asked.append((ctx.game_id, req.round))
            return await super().beliefs(ctx, req)

    store = await Store.open(tmp_path / "study.db")
    try:
        first = ClosedDuringTheGrid(study, pid)
        run = asyncio.ensure_future(StudyRunner(study, store, pid, first, base=path.parent).run())
        await asyncio.wait_for(reached.wait(), 120)
        run.cancel()
        await asyncio.wait([run], timeout=30)
        game_id = first.game_id
        async with store._db.execute("SELECT status FROM games WHERE game_id = ?", (game_id,)) as cur:
            assert (await cur.fetchone())[0] == "stopped"
        beliefs = StudyStore(store, study.name)
        rows_before = {(b["game_id"], b["round"]) for b in await beliefs.beliefs(pid)}

        await asyncio.wait_for(StudyRunner(study, store, pid, Resumed(study, pid), base=path.parent).run(), 300)
        rows_after = {(b["game_id"], b["round"]) for b in await beliefs.beliefs(pid)}
    finally:
        await store.close()
    owed = [(g, r) for g, r in asked if g == game_id]
    assert owed, "the grid that was open when the page went away was never asked again"
    last = owed[0][1]
    assert (game_id, last) not in rows_before and (game_id, last) in rows_after
