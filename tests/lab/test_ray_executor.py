"""The Ray executor: games as Ray tasks, the driver the only writer (lab/executors.py).

A local Ray instance with 2 CPUs is started once for this module (the tests that need it skip
when Ray is not installed: ``pip install 'calbench[ray]'``).
"""

from __future__ import annotations

from importlib.util import find_spec

import pytest

from calbench_cli.cli import main
from lab.executors import FAULT_ENV, RayOptions, gate_name, ray_executor

from .helpers import game_rows, run, traces

# Ray is imported by the fixture, not at collection (where every worker would import it)
pytestmark = pytest.mark.extras
needs_ray = pytest.mark.skipif(find_spec("ray") is None, reason="Ray is not installed (pip install 'calbench[ray]')")


@pytest.fixture(scope="module")
def ray_local(tmp_path_factory):
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@needs_ray
def test_ray_plays_the_same_deterministic_games_as_local(ray_local, tmp_path, capsys):
    args = ["--tasks", "canonical:0-9", "--agents", "imap,imap,dsm-welfare,imap,sdmap", "--deterministic"]
    local = run(capsys, *args, "--db", str(tmp_path / "local.db"))
    remote = run(capsys, *args, "--db", str(tmp_path / "ray.db"), "--executor", "ray")
    assert remote == local  # games (ids, metrics) and summary, in the same order
    a, b = traces(str(tmp_path / "local.db")), traces(str(tmp_path / "ray.db"))
    assert a == b and len(a) == 10  # every saved trace identical, byte for byte once exported
    # --resume with ray: nothing left to play, the whole table again
    again = run(capsys, *args, "--db", str(tmp_path / "ray.db"), "--executor", "ray", "--resume")
    assert again == run(capsys, *args, "--db", str(tmp_path / "local.db"), "--resume")
    assert len(game_rows(str(tmp_path / "ray.db"))) == 10


@needs_ray
def test_a_worker_killed_mid_suite_is_retried_without_a_duplicate_game(ray_local, tmp_path, capsys):
    from lab import runner
    from engine.taskref import resolve_tasks

    fault = tmp_path / "fault"
    fault.mkdir()
    tasks = resolve_tasks("canonical:0-11")
    settings = runner.RunSettings(deterministic=True)
    db = str(tmp_path / "kill.db")
    # the remote function reads the fault folder from its runtime environment
    options = RayOptions(chunk=2, runtime_env={"env_vars": {FAULT_ENV: str(fault)}})
    games = runner.run_cli_suite(tasks, "dsm-private", db=db, settings=settings, executor=ray_executor(options))
    assert (fault / "died").exists()  # one worker really died in the middle of the suite
    rows = game_rows(db)
    assert len(rows) == 12 and len({r[0] for r in rows}) == 12 and len({r[1] for r in rows}) == 12
    assert {r[2] for r in rows} == {"completed"}
    local = runner.run_cli_suite(tasks, "dsm-private", db=str(tmp_path / "local.db"), settings=settings)
    assert [g.to_json() for g in games] == [g.to_json() for g in local]


def test_without_ray_the_option_says_what_to_install(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    rc = main(["run", "--tasks", "canonical:0", "--agents", "imap", "--db", str(tmp_path / "x.db"),
               "--executor", "ray"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "pip install 'calbench[ray]'" in err[0]
    rc = main(["run", "--tasks", "canonical:0", "--agents", "imap", "--db", str(tmp_path / "x.db"),
               "--address", "auto"])
    assert rc == 2 and "--address needs --executor ray" in capsys.readouterr().err


@pytest.fixture
def mock_url(threaded_mock):
    """The loopback mock served from its own thread, so the CLI can run its own event loop."""
    return threaded_mock(policy="cooperative", latency=0.02)


@needs_ray
def test_llm_request_limit_holds_across_the_cluster(ray_local, tmp_path, capsys, monkeypatch, mock_url):
    url, server = mock_url
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    doc = run(capsys, "--tasks", "canonical:0-3", "--agents", "llm:m,imap,llm:m,imap,imap", "--base-url", url,
              "--max-turns", "3", "--concurrency", "2", "--llm-concurrency", "1", "--executor", "ray",
              "--db", str(tmp_path / "llm.db"))
    assert [g["status"] for g in doc["games"]] == ["completed"] * 4
    assert len(server.records) > 0
    # two Ray tasks (two games each) ran at once on two CPUs, yet one request at a time reached the endpoint
    assert server.max_in_flight == 1
    ray = ray_local
    gate = ray.get_actor(gate_name(url), namespace="calbench")
    stats = ray.get(gate.stats.remote())
    assert stats["limit"] == 1 and stats["max_in_flight"] == 1 and stats["granted"] >= len(server.records)
    ray.kill(gate)
