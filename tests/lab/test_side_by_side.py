"""benchmarks/side_by_side.py: a folder that is not the authors' harness is refused in one
line (exit 2, no traceback), and their experiment file is written from a task file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "side_by_side.py"
AUTHORS_FILE = ROOT.parent / "shared" / "compat" / "authors_uniform_full.jsonl"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT)


@pytest.mark.parametrize("make", ["missing", "empty", "no_python"])
def test_a_folder_that_is_not_the_harness_gets_one_line(tmp_path: Path, make: str) -> None:
    path = tmp_path / "harness"
    if make != "missing":
        path.mkdir()
    if make == "no_python":  # the layout without an interpreter that can load it
        (path / "games" / "calendar" / "experiments").mkdir(parents=True)
        (path / "games" / "calendar" / "run.py").write_text("")
        (path / "games" / "calendar" / "experiments" / "uniform_full_dsm.yaml").write_text("defaults: {}\n")
    proc = _run(str(path), "--rows", "0", "--rounds", "1")
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("side_by_side: not the authors' harness:"), proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_python_that_cannot_load_the_harness_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "harness"
    (path / "games" / "calendar" / "experiments").mkdir(parents=True)
    (path / "games" / "calendar" / "run.py").write_text("")
    (path / "games" / "calendar" / "experiments" / "uniform_full_dsm.yaml").write_text("defaults: {}\n")
    proc = _run(str(path), "--python", sys.executable, "--rows", "0")  # ours: has no calendar_game
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot load the harness" in lines[0], proc.stderr


def test_their_experiment_has_one_entry_per_row(tmp_path: Path) -> None:
    if not AUTHORS_FILE.exists():
        pytest.skip("the authors' task file is not beside the project")
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.side_by_side import their_experiment
    finally:
        sys.path.remove(str(ROOT))
    rows = [json.loads(x) for x in AUTHORS_FILE.read_text(encoding="utf-8").splitlines() if x.strip()]
    exp = their_experiment(AUTHORS_FILE, "dsm-welfare", {"num_slots": 16}, tmp_path)
    doc = json.loads(exp.read_text(encoding="utf-8"))  # JSON: their YAML reader reads it as it is
    assert [b["config"]["task_id"] for b in doc["batches"]] == [r["task_id"] for r in rows]
    assert all(len(b["config"]["agents"]) == len(r["calendars"]) for b, r in zip(doc["batches"], rows))
    assert {a["type"] for b in doc["batches"] for a in b["config"]["agents"]} == {"paper_dsm"}
    assert doc["defaults"]["dsm_social_welfare_weight"] == 10.0 and doc["defaults"]["num_slots"] == 16
