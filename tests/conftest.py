"""Shared fixtures: where the authors' compatibility files live (skip cleanly if absent)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
# Textual paints a screen's changes at most TEXTUAL_FPS times a second (60 by default).  A
# test reads what is painted and waits for it, so fewer frames change no outcome, only how
# much painting the apps under test do: measured on tests/tui's three longest files, one
# process, 95 -> 62 s of wall and 67 -> 39 CPU-s at 5 frames; 10 here (docs/testing.md).  The
# workers and every app process a test starts inherit it.
os.environ.setdefault("TEXTUAL_FPS", "10")
# Bytecode caches are written even where the shell sets PYTHONDONTWRITEBYTECODE: else each
# pytest-xdist worker rewrites and compiles every test module again, and every command the
# suite starts as a process of its own compiles the project from source again.  Measured on
# a fresh clone, 2 cores: the README's test command 11 min 0 s with the variable set, 10 min
# 15 s without it (docs/testing.md).  The caches land in __pycache__ folders, which git ignores.
# This module is one of pytest's first conftests, read before the workers start: they, and
# every process the tests start, inherit the environment without the variable.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
# The oracle cache (lab/oracle_cache.py) of a test run lives in a temporary folder, never
# in the user's cache directory.
# The process that makes the folder removes it when the session ends (pytest_unconfigure);
# pytest-xdist's workers inherit the variable, so they share it and leave it alone.
_OWN_CACHE: tuple[int, str] | None = None
if "CALBENCH_CACHE" not in os.environ:
    import tempfile

    os.environ["CALBENCH_CACHE"] = tempfile.mkdtemp(prefix="calbench-test-cache-")
    _OWN_CACHE = (os.getpid(), os.environ["CALBENCH_CACHE"])


def pytest_unconfigure(config):
    """Remove the session's oracle cache folder (only in the process that made it: a forked
    child that runs this hook, or a worker, never removes the folder of a running session)."""
    if _OWN_CACHE is not None and _OWN_CACHE[0] == os.getpid():
        import shutil

        shutil.rmtree(_OWN_CACHE[1], ignore_errors=True)

REPO = Path(__file__).resolve().parents[1]
COMPAT = REPO.parent / "shared" / "compat"


@pytest.fixture(scope="session")
def compat_dir() -> Path:
    if not COMPAT.is_dir():
        pytest.skip(f"authors' compatibility files not found at {COMPAT}")
    return COMPAT


@pytest.fixture(scope="session")
def authors_tasks_path(compat_dir: Path) -> Path:
    p = compat_dir / "authors_uniform_full.jsonl"
    if not p.exists():
        pytest.skip(f"{p} not found")
    return p


@pytest.fixture
def cli(capsys):
    """The ``calbench`` command line in-process (fast): returns (exit code, stdout, stderr)."""
    from calbench_cli.cli import main

    def run(*args):
        capsys.readouterr()
        rc = main(list(args))
        out = capsys.readouterr()
        return rc, out.out, out.err
    return run


@pytest.fixture
def threaded_mock():
    """``threaded_mock(**MockLLMServer options)`` -> ``(base_url, server)``: the loopback mock
    endpoint served from a thread of its own, so a command under test can run its own event
    loop (``asyncio.run`` inside ``calbench run``).  Every server is stopped afterwards."""
    import asyncio
    import threading

    from calbench_devtools.mock_endpoint import MockLLMServer

    started = []

    def start(**kw):
        loop = asyncio.new_event_loop()
        server = MockLLMServer(**kw)
        ready = threading.Event()

        def serve():
            asyncio.set_event_loop(loop)
            loop.run_until_complete(server.start())
            ready.set()
            loop.run_forever()

        th = threading.Thread(target=serve, daemon=True)
        th.start()
        assert ready.wait(10), "the mock endpoint did not start"
        started.append((loop, server, th))
        return server.base_url, server

    yield start
    for loop, server, th in started:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        th.join(10)


# -- the loopback mock endpoint, in the test's own event loop (tests/llm, tests/hardening) --
@pytest.fixture
async def mock():
    from calbench_devtools.mock_endpoint import MockLLMServer

    async with MockLLMServer(policy="cooperative") as server:
        yield server


@pytest.fixture
async def make_settings(monkeypatch):
    """``make_settings(server, **overrides)`` -> LLMSettings for the mock; pools closed afterwards."""
    from personas.llm.factory import LLMSettings

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    made = []

    def make(server, **kw):
        kw.setdefault("backoff_base", 0.01)
        s = LLMSettings(base_url=server.base_url, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        await s.pool.aclose()
