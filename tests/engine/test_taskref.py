"""Task references and loading task files, ours and the authors' (SPEC §2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.generate import generate_scenario
from engine.labelbank import assign_labels
from engine.model import Task, TaskError
from engine.suite import canonical_task
from engine.taskref import ACCEPTED_FORMS, TaskRefError, load_task_file, resolve_tasks

REPO = Path(__file__).resolve().parents[2]


def dumps(task: Task) -> str:
    return json.dumps(task.to_row(), sort_keys=True)


@pytest.fixture()
def jsonl(tmp_path: Path) -> Path:
    rows = [generate_scenario(s).to_row() for s in (1, 2, 3)]
    rows[0]["task_id"] = "2"  # both a task id and a row index: the id wins
    rows[1]["task_id"] = "alpha"
    p = tmp_path / "tasks.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    return p


def test_canonical_refs():
    assert [t.task_id for t in resolve_tasks("canonical")] == [f"canonical-{i:03d}" for i in range(90)]
    (t,) = resolve_tasks("canonical:7")
    assert t.task_id == "canonical-007" and dumps(t) == dumps(canonical_task(7))
    assert [t.task_id for t in resolve_tasks("canonical:0-44")] == [f"canonical-{i:03d}" for i in range(45)]
    assert [t.task_id for t in resolve_tasks(" canonical:0-2,45 ")] == [
        "canonical-000", "canonical-001", "canonical-002", "canonical-045"]


def test_seed_ref():
    (t,) = resolve_tasks("seed:7")
    assert dumps(t) == dumps(generate_scenario(7))
    # issue 35: a negative or full-width seed is refused in one line (it was played as seed -3)
    for bad in ("seed:-3", "seed:\uff17", "seed:+7", "seed:1_0"):
        with pytest.raises(TaskRefError):
            resolve_tasks(bad)


def test_jsonl_refs(jsonl: Path):
    all_ = resolve_tasks(str(jsonl))
    assert [t.task_id for t in all_] == ["2", "alpha", "seed-3"]
    assert [t.task_id for t in resolve_tasks(f"{jsonl}:alpha")] == ["alpha"]
    assert [t.task_id for t in resolve_tasks(f"{jsonl}:0")] == ["2"]
    assert [t.task_id for t in resolve_tasks(f"{jsonl}:1")] == ["alpha"]
    # "2" is a task id (row 0) and a row index (row 2): the task id wins
    assert [t.task_id for t in resolve_tasks(f"{jsonl}:2")] == ["2"]
    assert [t.task_id for t in resolve_tasks(f"{jsonl}:seed-3")] == ["seed-3"]
    # a loaded row keeps everything it had
    assert all_[1].to_row() == json.loads(jsonl.read_text().splitlines()[1])


def test_json_refs(tmp_path: Path):
    task = generate_scenario(5)
    single = tmp_path / "one.json"
    single.write_text(json.dumps(task.to_row()))
    assert [dumps(t) for t in resolve_tasks(str(single))] == [dumps(task)]
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"game_id": "x", "config": {}, "events": [], "task": task.to_row()}))
    assert [dumps(t) for t in resolve_tasks(str(trace))] == [dumps(task)]
    many = tmp_path / "many.json"
    many.write_text(json.dumps([task.to_row(), generate_scenario(6).to_row()]))
    assert len(resolve_tasks(str(many))) == 2


@pytest.mark.parametrize(
    "ref",
    ["", "   ", "canonical:", "canonical:x", "canonical:90", "canonical:5-3", "canonical:1-", "seed:", "seed:abc",
     "seed:1.5", "nofile.jsonl", "nofile.jsonl:3", "nofile.json", "whatever", "canon", "{jsonl}:zzz",
     "{jsonl}:500", "{jsonl}:", "{txt}", "{json}:1"],
)
def test_bad_refs_raise_one_line(ref: str, jsonl: Path, tmp_path: Path):
    txt = tmp_path / "notes.txt"
    txt.write_text("hi")
    js = tmp_path / "row.json"
    js.write_text(json.dumps(generate_scenario(1).to_row()))
    ref = ref.format(jsonl=jsonl, txt=txt, json=js)
    with pytest.raises(TaskRefError) as exc:
        resolve_tasks(ref)
    msg = str(exc.value)
    assert "\n" not in msg
    assert ACCEPTED_FORMS in msg
    assert isinstance(exc.value, ValueError)


def test_broken_json_line_names_file_and_line(tmp_path: Path):
    p = tmp_path / "broken.jsonl"
    p.write_text(json.dumps(generate_scenario(1).to_row()) + "\n{not json\n")
    with pytest.raises(TaskError, match=r"broken\.jsonl line 2: not valid JSON"):
        resolve_tasks(str(p))
    bad_row = tmp_path / "badrow.jsonl"
    bad_row.write_text('{"calendars": [[null]]}\n')
    with pytest.raises(TaskError, match=r"badrow\.jsonl line 1: task row is missing 'meetings'"):
        resolve_tasks(str(bad_row))
    broken_json = tmp_path / "broken.json"
    broken_json.write_text("{")
    with pytest.raises(TaskError, match=r"broken\.json: not valid JSON"):
        resolve_tasks(str(broken_json))


def test_authors_trace_without_task_explains(compat_dir: Path):
    trace = next(compat_dir.glob("authors_trace_*.json"))
    with pytest.raises(TaskError, match=r"trace without a 'task' key .*task_id"):
        resolve_tasks(str(trace))


def test_labels_are_hydrated_from_the_seed(tmp_path: Path):
    task = generate_scenario(9, cost_mode="varied")
    row = task.to_row()
    del row["calbench"]["labels"]
    p = tmp_path / "nolabels.jsonl"
    p.write_text(json.dumps(row) + "\n")
    (loaded,) = resolve_tasks(str(p))
    assert loaded.labels == task.labels == assign_labels(loaded, 9)
    assert "labels" not in loaded.row["calbench"]  # the row itself is untouched
    assert loaded.calendars == task.calendars
    # without a seed, from the task id
    del row["seed"]
    p.write_text(json.dumps(row) + "\n")
    (loaded,) = resolve_tasks(str(p))
    assert loaded.labels == assign_labels(loaded, row["task_id"])


def test_stored_labels_are_kept(tmp_path: Path):
    task = generate_scenario(9)
    row = task.to_row()
    row["calbench"]["labels"]["meetings"]["1"] = {"label": "Custom label", "tier": "public"}
    p = tmp_path / "custom.jsonl"
    p.write_text(json.dumps(row) + "\n")
    (loaded,) = resolve_tasks(str(p))
    assert loaded.labels.meetings[1].text == "Custom label"


def test_loading_files_never_imports_the_oracle(jsonl: Path):
    code = (
        "import sys\n"
        "from engine.taskref import resolve_tasks\n"
        f"assert len(resolve_tasks({str(jsonl)!r})) == 3\n"
        "print([m for m in ('engine.oracle', 'ortools') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_authors_file_loads_unchanged(authors_tasks_path: Path):
    lines = [l for l in authors_tasks_path.read_text().splitlines() if l.strip()]
    originals = [json.loads(l) for l in lines]
    tasks = resolve_tasks(str(authors_tasks_path))
    assert len(tasks) == len(originals) == 108
    for orig, task in zip(originals, tasks):
        assert task.task_id == orig["task_id"]
        row = task.to_row()
        labels = row.pop("calbench")["labels"]
        assert "calbench" not in orig
        assert row == orig  # every original key and value survives
        # every errand and meeting got a label, hydrated from the row's seed
        errands = {f"{a}:{it['errand_id']}" for a, cal in enumerate(orig["calendars"]) for it in cal if it}
        assert set(labels["errands"]) == errands
        assert set(labels["meetings"]) == {str(m["id"]) for m in orig["meetings"]}
        assert task.labels == assign_labels(task, orig["seed"])
    first = originals[0]["task_id"]
    assert [t.task_id for t in resolve_tasks(f"{authors_tasks_path}:{first}")] == [first]
    assert [t.task_id for t in resolve_tasks(f"{authors_tasks_path}:107")] == [originals[107]["task_id"]]
    # deterministic across loads
    again = load_task_file(authors_tasks_path)
    assert [dumps(t) for t in again] == [dumps(t) for t in tasks]
