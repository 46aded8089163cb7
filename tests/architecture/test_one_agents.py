"""One agents spec per game: a ``GameSpec`` carries the parsed ``AgentsSpec``, and each
driver parses the agents once, where it starts (docs/architecture.md, "One owner each").

* ``GameSpec.agents`` is a ``personas.spec.AgentsSpec``; the text the game is filed under
  is its label, byte for byte what was saved before (so stored games, ``--resume`` keys and
  deterministic game ids are unchanged);
* ``AgentsSpec.parse(`` is called only at the named entry points (an AST scan of the
  project, tests excluded); in ``lab/`` only ``lab.runner.agents_of`` parses;
* a suite given a spec string parses it once, however many games it plays;
* the parsed spec travels to the executors' workers as it is (it pickles).
"""

from __future__ import annotations

import ast
import asyncio
import pickle
from pathlib import Path

import pytest

from .astkit import called_name, repo_files, source_tree

ROOT = Path(__file__).resolve().parents[2]

#: (file, function) -> where ``AgentsSpec.parse(`` may be called: each driver's entry point,
#: the registry (a string handed to ``make_personas``) and the runner's one funnel.
ENTRY_POINTS = {
    ("lab/runner.py", "agents_of"),  # the lab's one funnel: the suite runner, executors, run/play/serve plans
    ("calbench_cli/commands/run.py", "build_llm_settings"),  # passes a parsed spec through
    ("calbench_tui/app.py", "_seat_names"),  # the app: --agents, once a game
    ("calbench_tui/screens/setup.py", "_default_persona"),  # the set-up form's first choice
    ("personas/registry.py", "parse_spec"),  # make_personas given a string
}


def _parse_sites() -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for path in repo_files():
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("tests", ".venv", "build") or "site-packages" in rel.parts:
            continue

        def walk(node: ast.AST, fn: str) -> None:
            for ch in ast.iter_child_nodes(node):
                name = ch.name if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
                if (isinstance(ch, ast.Call) and called_name(ch) == "parse" and isinstance(ch.func, ast.Attribute)
                        and isinstance(ch.func.value, ast.Name) and ch.func.value.id == "AgentsSpec"):
                    out.add((rel.as_posix(), fn))
                walk(ch, name)

        walk(source_tree(path), "<module>")
    return out


def test_agents_spec_is_parsed_only_at_the_named_entry_points():
    sites = _parse_sites()
    assert sites == ENTRY_POINTS, "AgentsSpec.parse( below a driver's entry point, or a named site gone stale"
    assert {s for s in sites if s[0].startswith("lab/")} == {("lab/runner.py", "agents_of")}


def test_the_game_spec_carries_the_parsed_agents_and_files_its_label():
    from engine.taskref import resolve_tasks
    from lab.gamespec import GameSpec, game_config
    from personas.spec import AgentsSpec

    task = resolve_tasks("canonical:3")[0]
    parsed = AgentsSpec.parse("IMAP, sdmap,dsm,imap,passive")
    spec = GameSpec(task, parsed, game_config(), "g", "k")
    assert isinstance(spec.agents, AgentsSpec) and spec.agents is parsed
    assert spec.label == "imap,sdmap,dsm-welfare,imap,passive"
    assert spec.session().agents == spec.label
    with pytest.raises(TypeError, match="parsed AgentsSpec"):
        GameSpec(task, "imap", game_config(), "g", "k")  # a string is parsed by the driver, not here


@pytest.mark.parametrize("text, label, key, det_key", [
    # the label and keys saved before GameSpec carried the parsed spec (main f724ea1 / dc1917f)
    ("imap", "imap", "f4320ebc334a86c6", "6257ed341527e38a"),
    ("IMAP, sdmap,dsm,imap,passive", "imap,sdmap,dsm-welfare,imap,passive", "12f96f81ee5cf274", "735a8fd75e9d4a90"),
    ("llm:gpt-4o+redteam,imap,imap,imap,imap", "llm:gpt-4o+redteam,imap,imap,imap,imap", "f5028439c09ec71d",
     "a5f4ba9a19787208"),
])
def test_a_runs_label_and_settings_key_are_unchanged(text, label, key, det_key):
    from lab import runner
    from personas.spec import AgentsSpec

    parsed = runner.agents_of(text)
    assert isinstance(parsed, AgentsSpec) and runner.agents_of(parsed) is parsed
    assert parsed.label == runner.spec_label(text) == label
    assert runner.settings_key(parsed, runner.RunSettings()) == runner.settings_key(label, runner.RunSettings()) == key
    det = runner.RunSettings(deterministic=True, channels=("dm", "public"))
    assert runner.settings_key(parsed, det) == det_key


def test_an_llm_runs_key_is_unchanged():
    from lab import runner
    from personas.llm.settings import LLMSettings

    s = runner.RunSettings(llm=LLMSettings(model="m", base_url="http://127.0.0.1:9/v1"))
    assert runner.settings_key(runner.agents_of("llm:m"), s) == "80314698f4c0f6e5"
    assert runner.settings_key(runner.agents_of("imap"), s) == "f4320ebc334a86c6"  # no LLM seat: no llm fields


def test_a_suite_parses_its_spec_string_once_and_files_games_as_before(tmp_path, monkeypatch):
    from engine.taskref import resolve_tasks
    from lab import runner
    from personas.spec import AgentsSpec
    from saves.store import Store

    parsed_texts: list[str] = []
    real = AgentsSpec.parse.__func__

    def counting(cls, text):
        if isinstance(text, str):
            parsed_texts.append(text)
        return real(cls, text)

    monkeypatch.setattr(AgentsSpec, "parse", classmethod(counting))

    async def go():
        async with await Store.open(str(tmp_path / "r.db")) as store:
            await runner.run_suite(resolve_tasks("canonical:0-2"), "IMAP, sdmap,dsm,imap,passive", store=store,
                                   settings=runner.RunSettings(deterministic=True))
            return [await store.load_trace(g["game_id"]) for g in await store.list_games()]

    traces = asyncio.run(go())
    assert parsed_texts == ["IMAP, sdmap,dsm,imap,passive"]  # once for three games
    # the deterministic ids, label and key saved before (they derive from the key)
    assert sorted(t["game_id"] for t in traces)[:2] == ["49bbc46b-c513-5c91-a60b-f2a5eb3dcc7b",
                                                        "b3c4dc42-adbe-54ef-a2c6-9ea3756b371e"]
    for t in traces:
        assert t["saved"]["agents"] == t["config"]["agents_spec"] == "imap,sdmap,dsm-welfare,imap,passive"
        assert t["saved"]["settings_key"] == t["config"]["settings_key"] == "c03e5b3a24d17c5a"


def test_the_parsed_spec_travels_to_workers_as_it_is():
    """Ray pickles the chunk (``lab.executors._Chunk``) with the parsed spec; forked workers inherit it."""
    from engine.taskref import resolve_tasks
    from lab.executors import _Chunk
    from personas.spec import AgentsSpec

    for spec in (AgentsSpec.parse("llm:gpt-4o+redteam,imap,human,dsm,passive"),
                 AgentsSpec.of_names(["human", "IMAP", "gpt-4o"])):
        back = pickle.loads(pickle.dumps(_Chunk(tuple(resolve_tasks("canonical:0")), ("g",), spec, None, 1, False)))
        assert back.agents == spec and back.agents.label == spec.label and back.agents.seats == spec.seats


def test_seats_named_by_a_driver_keep_their_label_byte_for_byte():
    """The app, a table and a study condition file the names of the seats they made, as before."""
    from engine.taskref import resolve_tasks
    from lab.gamespec import game_config
    from lab.table import Table
    from personas.spec import AgentsSpec

    names = ["human", "IMAP", "dsm", "gpt-4o", "llm:Qwen+redteam"]
    spec = AgentsSpec.of_names(names)
    assert spec.label == "human,IMAP,dsm,gpt-4o,llm:Qwen+redteam"
    assert [s.kind for s in spec.seats] == ["human", "scripted", "scripted", "unknown", "llm"]
    assert spec.names[:3] == ["human", "imap", "dsm-welfare"] and spec.seats[4].variant == "redteam"
    assert spec == AgentsSpec.parse(",".join(names))  # the same seats; only the filed text is kept

    task = resolve_tasks("canonical:3")[0]
    table = Table(task, ["human", "imap", "human", "imap", "imap"], game_config(), game_id="t")
    game = table.spec()
    assert isinstance(game.agents, AgentsSpec) and game.label == "human,imap,human,imap,imap"
    table.agents[2] = "imap"  # a lobby seat filled: the game is filed with the seat as it is now
    assert table.spec().label == "human,imap,imap,imap,imap"
