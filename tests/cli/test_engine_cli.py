"""``calbench scenario`` and ``calbench oracle`` as a user runs them (real subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest


def calbench(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "calbench_cli.cli", *args], capture_output=True, text=True)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_help_lists_commands_without_heavy_imports():
    proc = calbench("--help")
    for cmd in ("scenario", "oracle"):
        assert cmd in proc.stdout
    heavy = subprocess.run([sys.executable, "-c", "import sys; from calbench_cli.cli import build_parser; build_parser(); "
                            "print(sorted(m for m in ('ortools','openai','textual','aiosqlite') if m in sys.modules))"],
                           capture_output=True, text=True, check=True)
    assert heavy.stdout.strip() == "[]"  # what keeps --help quick (no wall-clock bound: it fails on a loaded machine)


def test_scenario_json_is_deterministic_and_well_formed():
    a = calbench("scenario", "--seed", "11", "--cost", "varied", "--json").stdout
    b = calbench("scenario", "--seed", "11", "--cost", "varied", "--json").stdout
    assert a == b
    row = json.loads(a)
    assert row["seed"] == 11 and row["params"]["cost_values"] == [1, 10, 100]
    assert len(row["calendars"]) == 5 and len(row["calendars"][0]) == 16 and len(row["meetings"]) == 5
    assert row["calbench"]["cost_mode"] == "varied" and row["calbench"]["labels"]["errands"]


def test_scenario_summary_and_task_reference():
    out = calbench("scenario", "--task", "canonical:7").stdout
    assert "canonical-007" in out and "Meetings" in out


def test_scenario_of_an_authors_row_names_its_difficulty_score_and_gives_the_feasible_fraction(authors_tasks_path):
    """The authors' rows score difficulty with another scorer (optimal cost per participant
    slot): that number is shown as theirs, and the feasible fraction is SPEC §3's, the same the
    oracle command gives (found by hand: "feasible fraction=0.4" for a row whose fraction is 1)."""
    out = calbench("scenario", "--task", f"{authors_tasks_path}:b108_hard_5a_5p_d1p0_c1_4").stdout
    text = " ".join(out.split())
    assert "difficulty score=0.4 (optimal_cost_per_participant_slot)" in text
    assert "feasible fraction=1 " in text
    oracle = json.loads(calbench("oracle", f"{authors_tasks_path}:b108_hard_5a_5p_d1p0_c1_4", "--json").stdout)
    assert oracle["tasks"][0]["feasible_fraction"] == 1.0


def test_a_mistyped_option_is_refused_with_the_commands_own_usage():
    """``run ... --sahrd 1/2`` printed the top-level usage (``calbench [-h] COMMAND``) under the
    error; now the usage of ``run`` (found by hand)."""
    proc = calbench("run", "--tasks", "canonical:0", "--agents", "imap", "--sahrd", "1/2", check=False)
    assert proc.returncode == 2 and "unrecognized arguments: --sahrd 1/2" in proc.stderr
    assert proc.stderr.startswith("usage: calbench run ") and "calbench run: error:" in proc.stderr


@pytest.mark.parametrize("args, words", [
    (["scenario", "--density", "1.5"], "density"),
    (["scenario", "--seed", "-1"], "a seed is 0 or more"),  # as seed:-1 is (it made task seed--1)
    (["scenario", "--task", "canonical:999"], "canonical"),
    (["scenario", "--agents", "two"], "invalid int"),
    (["scenario", "--bogus"], "unrecognized"),
    (["oracle", "no/such/file.jsonl"], "no/such/file.jsonl"),
    (["scenario", "--slots", "1000000"], "at most 500"),
    (["scenario", "--task", ""], "--task needs a reference"),
])
def test_bad_input_is_one_clear_line(args, words):
    proc = calbench(*args, check=False)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert words in proc.stderr


def test_broken_task_line_names_file_and_line(tmp_path):
    f = tmp_path / "broken.jsonl"
    good = calbench("scenario", "--seed", "1", "--json").stdout
    f.write_text(good + "{not json\n")
    proc = calbench("oracle", str(f), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "broken.jsonl" in proc.stderr and "2" in proc.stderr


def test_oracle_agrees_with_the_authors_file(authors_tasks_path):
    out = json.loads(calbench("oracle", str(authors_tasks_path), "--json").stdout)
    assert len(out["tasks"]) == 108
    assert out["agree"] + out["disagree"] == 108
    for t in out["tasks"]:
        assert set(t) >= {"task_id", "optimal_cost", "file_optimal_cost", "agent_costs", "feasible_fraction",
                          "difficulty", "seconds"}
        low, high = t["feasible_fraction_interval"]
        assert t["feasible_fraction_exact"] and low == t["feasible_fraction"] == high
        if t["status"] == "disagree":
            assert "capacity" in t["reason"]  # the only allowed cause (SPEC §3)
    assert out["disagree"] == 0
