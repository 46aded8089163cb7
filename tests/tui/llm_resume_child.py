"""A calbench-play game with differently configured LLM seats, for the resume tests.

Imported by tests/tui/test_llm_resume.py (``seat_settings``, ``make_seats``), and run as
a child process by the kill -9 test: ``python llm_resume_child.py BASE_URL DB`` plays the
human seat until round 2 has begun, prints ``READY <game id>`` and waits to be killed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path


def seat_settings(base_url: str) -> dict:
    """Per seat: every public LLM setting different from the defaults and from each other."""
    from personas.llm.settings import LLMSettings

    base = LLMSettings(base_url=base_url, retries=1, backoff_base=0.01)
    return {
        0: base.derive(model="model-a", variant="redteam", structured="json_object", context_window=9000,
                       temperature=0.3, max_tokens=700, history="digest"),
        1: base.derive(model="model-b", structured="off", max_tokens=600, temperature=0.0, timeout=30.0),
        3: base.derive(model="model-c", variant="nosy-highpressure", structured="json_schema",
                       context_window=12000, history="full", reflection=True),
    }


def make_seats(base_url: str):
    """The app's ``seats=`` callable: LLM seats 0, 1, 3, IMAP on 4, the human on 2."""
    from personas.llm.factory import make_llm_persona
    from personas.registry import make_personas

    settings = seat_settings(base_url)

    def seats(task, human):
        out = list(make_personas("imap", task.num_agents))
        for i, st in settings.items():
            out[i] = make_llm_persona(f"llm:{st.model}", st)
        out[2] = human
        return out

    return seats


async def _child(base_url: str, db: str) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from calbench_tui.app import make_app
    from calbench_tui.settings import Settings
    from saves.store import Store

    from helpers import PATIENCE, play_to_end, wait_for  # noqa: E402

    store = await Store.open(db)
    app = make_app(settings=Settings(seat=2, seed=7, deterministic=True, max_turns_per_round=4), store=store,
                   seats=make_seats(base_url))
    async with app.run_test(size=(80, 24)) as pilot:
        await play_to_end(pilot, app, stop_after_rounds=1, timeout=4 * PATIENCE)
        await wait_for(pilot, lambda: app.game_screen.pending is not None, what="a turn in round 2", timeout=PATIENCE)
        print("READY", app.game_id, flush=True)
        await asyncio.sleep(3600)  # killed here with SIGKILL


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    asyncio.run(_child(sys.argv[1], sys.argv[2]))
