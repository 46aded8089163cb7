"""One owner of a game's set-up (issue 23, step 3): ``lab/gamespec.py``.

Every driver (the app, the suite runner and its executors, the table of ``calbench serve``,
the study runner) describes its game as a ``GameSpec``; these tests read the source of the
project's packages and hold each "one" that ``docs/architecture.md`` claims:

* a ``Session`` is made only by ``lab/gamespec.py``; a ``GameConfig`` only there and as the
  engine's own default (``engine/game.py``);
* one game-id function (``engine/gameid.py``), giving the ids saved games already have;
* one settings-key format (``lab.gamespec.settings_key``: no driver spells a key of its own);
* LLM pools closed in one place (``lab.gamespec.close_pools``), a resume's endpoint check in
  one place (``lab.gamespec.load_resume``), a saved game's human seat read by one function
  (``engine.seating.human_seats``);
* the channel words in one table in the engine (``engine/channels.py``);
* ``config["agents"]`` the same while a game runs and after it ends.
"""

from __future__ import annotations

import ast
import functools
import uuid
from pathlib import Path

import pytest

from .astkit import called_name, source_tree

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "lab", "personas", "saves", "calbench_tui")


@functools.cache
def _modules() -> tuple[tuple[str, ast.AST], ...]:
    return tuple((path.relative_to(ROOT).as_posix(), source_tree(path))
                 for pkg in PACKAGES for path in sorted((ROOT / pkg).rglob("*.py")))


def _calls(name: str) -> set[str]:
    """The modules that call ``name(...)`` or ``something.name(...)``."""
    return {rel for rel, tree in _modules()
            if any(isinstance(node, ast.Call) and called_name(node) == name for node in ast.walk(tree))}


def test_a_session_is_made_only_by_the_game_spec():
    assert _calls("Session") == {"lab/gamespec.py"}


def test_a_game_config_is_made_only_by_the_game_spec_and_the_engines_default():
    assert _calls("GameConfig") == {"lab/gamespec.py", "engine/game.py"}


def test_game_ids_come_from_one_function():
    assert _calls("uuid4") | _calls("uuid5") == {"engine/gameid.py"}


def test_the_ids_of_saved_games_are_the_ids_the_same_inputs_give_now():
    """The one function keeps every driver's old id text, so a saved game's id is found again
    (``calbench run --resume`` of a deterministic suite, a study's dry run, ``--deterministic`` play)."""
    from engine.gameid import game_id

    def old(text):
        return str(uuid.uuid5(uuid.NAMESPACE_URL, text))

    assert game_id("calbench-run", "0123abcd", "canonical-3", 0) == old("calbench-run:0123abcd:canonical-3:0")
    assert game_id("calbench-study", "pilot", "P01", 2) == old("calbench-study:pilot:P01:2")
    play = repr(("canonical-3", 3, ["imap", None], 2, ("dm",), 1))
    assert game_id("calbench-play", play) == old("calbench-play:" + play)
    assert game_id("calbench", "x") == old("calbench:x")
    a, b = game_id("calbench-serve", deterministic=False), game_id("calbench-serve", deterministic=False)
    assert a != b and uuid.UUID(a).version == 4


def test_a_suites_settings_key_is_the_key_its_saved_games_have():
    """``calbench run --resume`` matches games on the key: the one format keeps a suite's key."""
    import hashlib
    import json

    from lab.gamespec import settings_key
    from lab.runner import RunSettings
    from lab.runner import settings_key as run_key

    s = RunSettings(channels=("dm", "all_groupchat"), max_turns=9, deterministic=True, fidelity="paper")
    fields = s.key_fields("imap")
    old = hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
                         .encode()).hexdigest()[:16]
    assert run_key("imap", s) == settings_key(fields) == old


def test_no_driver_spells_a_settings_key_of_its_own():
    """Keys such as ``f"play:{spec}:..."``, ``f"study:{name}:..."`` or ``"serve"`` are gone:
    every ``settings_key=`` a driver passes is computed (``lab.gamespec.settings_key``)."""
    spelled = set()
    for rel, tree in _modules():
        if not rel.startswith(("lab/", "calbench_tui/")):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "settings_key" and (
                    isinstance(node.value, ast.JoinedStr)
                    or (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str))):
                spelled.add(f"{rel}:{node.value.lineno}")
    assert not spelled


def _aclose_of_a_pool(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "aclose"):
        return False
    target = node.func.value
    return (isinstance(target, ast.Name) and target.id == "pool") or \
        (isinstance(target, ast.Attribute) and target.attr == "pool")


def test_llm_pools_are_closed_in_one_place():
    closing = {rel for rel, tree in _modules() if not rel.startswith("personas/llm/")
               and any(_aclose_of_a_pool(n) for n in ast.walk(tree))}
    assert closing == {"lab/gamespec.py"}


def test_a_resumes_endpoint_check_is_made_in_one_place():
    callers = {rel for rel in _calls("check_endpoints") if not rel.startswith("personas/llm/")}
    assert callers == {"lab/gamespec.py"}


def test_a_saved_games_human_seat_is_read_by_one_function():
    """Nobody but ``engine/seating.py`` reads ``config["human_seat"]`` (the no-peeking guard,
    ``saves/guard.py``, asks it whether anyone human played)."""
    readers = set()
    for rel, tree in _modules():
        for node in ast.walk(tree):
            key = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                    and node.args and isinstance(node.args[0], ast.Constant):
                key = node.args[0].value
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
                    and isinstance(node.slice, ast.Constant):
                key = node.slice.value
            if key == "human_seat":
                readers.add(rel)
    assert readers == {"engine/seating.py"}


def test_human_seats_are_read_from_every_kind_of_saved_config():
    from engine.seating import human_seat, human_seats

    assert human_seats({"agents": [{"type": "imap"}, {"type": "human", "kind": "human"}]}) == [1]
    assert human_seats({"human_seat": 2, "agents": [{"type": "imap"}] * 5}) == [2]
    assert human_seats({"remote_seats": [0, 2], "agents": []}) == [0, 2]
    assert human_seats({}, "imap,human,imap") == [1]
    assert human_seats({"agents": [{"type": "imap"}]}, "imap") == []
    assert human_seat({"human_seat": 3, "agents": [{"type": "human"}]}) == 3


CHANNEL_WORDS = {"dm", "dms", "participant", "participants", "participant_groupchat", "group", "all",
                 "all_groupchat", "broadcast", "dm_sent", "participant_groupchat_sent", "all_groupchat_sent"}


def test_channel_words_live_once_in_the_engine():
    """Outside ``engine/`` no module keeps its own table from channel words to channel words
    or names (``{"participant": "participant_groupchat", ...}``, ``{"dm": "DM", ...}``)."""
    tables = set()
    for rel, tree in _modules():
        if rel.startswith("engine/"):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Dict) or len(node.keys) < 2:
                continue
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            if len(keys) == len(node.keys) and set(keys) <= CHANNEL_WORDS and "participant_groupchat" in \
                    {k.replace("_sent", "") for k in keys} | {getattr(v, "value", None) for v in node.values} \
                    and all(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in node.values):
                tables.add(f"{rel}:{node.lineno}")
    assert not tables


def test_every_reader_of_channel_words_reads_the_engines_table():
    from calbench_tui import settings
    from calbench_tui.widgets import chat
    from engine import channels
    from lab.study import model

    assert settings.CHANNEL_ALIASES is channels.CHANNEL_ALIASES
    assert chat.CHANNEL_NAME is channels.CHANNEL_LABEL
    assert model.CHANNELS == ("dm", "participant", "all")
    assert settings.parse_channels("participant+dm") == channels.parse_channels(["participant", "dm"]) \
        == ("dm", "participant_groupchat")
    with pytest.raises(settings.SettingsError, match="unknown channel 'chat'"):
        settings.parse_channels("dm,chat")


async def test_a_running_game_records_the_seats_it_records_at_the_end(tmp_path):
    """``config["agents"][i]["type"]`` was "scripted" while a game ran and "imap" once it ended."""
    import asyncio

    from engine.taskref import resolve_tasks
    from lab.gamespec import GameSpec, game_config
    from personas.spec import AgentsSpec
    from personas.registry import make_personas
    from saves.store import Store

    task = resolve_tasks("canonical:3")[0]
    spec = GameSpec(task, AgentsSpec.parse("imap"), game_config(deterministic=True), "g-running", "k")
    async with await Store.open(tmp_path / "s.db") as store:
        started = asyncio.Event()

        class Once:
            async def emit(self, event):
                started.set()
                await asyncio.sleep(3600)  # the game stays running: read its saved row meanwhile

        play = asyncio.ensure_future(spec.play(make_personas("imap", task.num_agents), store=store,
                                               listeners=[Once()]))
        await started.wait()
        running = await store.load_trace("g-running")
        play.cancel()
        with pytest.raises(asyncio.CancelledError):
            await play
    done = await GameSpec(task, AgentsSpec.parse("imap"), game_config(deterministic=True), "g-done", "k").play(
        make_personas("imap", task.num_agents), stream=False)
    assert running["saved"]["status"] == "running"
    assert running["config"]["agents"] == done.trace["config"]["agents"]
    assert {a["type"] for a in done.trace["config"]["agents"]} == {"imap"}


async def test_a_resume_is_refused_in_one_place_with_one_line(tmp_path):
    from engine.taskref import resolve_tasks
    from lab.gamespec import GameSpec, SetupError, game_config, load_resume
    from personas.spec import AgentsSpec
    from personas.registry import make_personas
    from saves.store import Store

    task = resolve_tasks("canonical:3")[0]
    async with await Store.open(tmp_path / "s.db") as store:
        await GameSpec(task, AgentsSpec.parse("imap"), game_config(), "g-done", "k").play(make_personas("imap", task.num_agents),
                                                                        store=store)
        with pytest.raises(SetupError, match="g-done is already completed; nothing to resume"):
            await load_resume(store, "g-done")
        await store.create_game("g-served", task_row=task.to_row(), agents="human,imap,human,imap,imap",
                                config={"remote_seats": [0, 2], "app": "calbench-serve"}, settings_key="serve",
                                started_at="2026-01-01T00:00:00+00:00")
        await store.mark_status("g-served", "stopped")
        with pytest.raises(SetupError, match="served to remote players.*calbench serve --resume g-served"):
            await load_resume(store, "g-served", served=False)
        r = await load_resume(store, "g-served", served=True)
        assert r.served and r.human_seats == [0, 2] and r.agents[1] == "imap" and r.task.task_id == task.task_id
        with pytest.raises(SetupError):
            await load_resume(store, "no-such-game")
