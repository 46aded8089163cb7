"""``calbench suite generate|show`` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CONFIG = textwrap.dedent("""\
    name = "cli-suite"
    seed = 31
    candidates = 15
    per_bucket = 2

    [[grid]]
    agents = 4
    participants = 2
    slots = 12
    meetings = 4
    density = [0.6, 0.9]
    blocked = 2
    """)


def _config(tmp_path, text=CONFIG, name="study.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_generate_writes_the_file_and_summary_then_show_checks_it(cli, tmp_path):
    cfg = _config(tmp_path)
    out = tmp_path / "suite.jsonl"
    summary = tmp_path / "suite.json"
    rc, stdout, err = cli("suite", "generate", str(cfg), "-o", str(out), "--summary", str(summary), "--workers", "1")
    assert rc == 0, err
    assert "wrote 12 tasks" in stdout and "4a_2p_d0p6_c1" in stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 12 and rows[0]["task_id"] == "b001_easy_4a_2p_d0p6_c1_1"
    doc = json.loads(summary.read_text())
    assert doc["tasks"] == 12 and [c["cell"] for c in doc["cells"]] == ["4a_2p_d0p6_c1", "4a_2p_d0p9_c1"]
    assert doc["output"] == str(out)

    rc, stdout, err = cli("suite", "show", str(out), "--workers", "1")
    assert rc == 0, err
    assert "12 tasks in 2 cells" in stdout
    assert "✓ oracle agrees with the file: 12 agree" in stdout
    assert "✓ task ids are unique" in stdout and "✓ every cell has equal" in stdout
    assert "feasible fraction d" in stdout and "oracle cost" in stdout

    # --json on the same config: the same bytes again, the summary on stdout
    out2 = tmp_path / "again.jsonl"
    rc, stdout, _ = cli("suite", "generate", str(cfg), "-o", str(out2), "--json", "--workers", "2")
    assert rc == 0
    assert out2.read_bytes() == out.read_bytes()
    assert json.loads(stdout)["workers"] == 1  # 30 candidates: a pool would cost more than it saves


def test_show_fails_on_a_tampered_file(cli, tmp_path):
    cfg = _config(tmp_path)
    out = tmp_path / "suite.jsonl"
    assert cli("suite", "generate", str(cfg), "-o", str(out), "--workers", "1")[0] == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    rows[2]["optimal"]["cost"] += 3
    rows[5]["task_id"] = rows[4]["task_id"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rc, stdout, _ = cli("suite", "show", str(bad), "--workers", "1")
    assert rc == 1
    assert "✗ oracle agrees with the file: 11 agree, 1 disagree" in stdout
    assert f"{rows[2]['task_id']}: our optimum is" in stdout
    assert f"✗ task ids used twice: {rows[4]['task_id']}" in stdout
    rc, stdout, _ = cli("suite", "show", str(bad), "--json", "--workers", "1")
    doc = json.loads(stdout)
    assert rc == 1 and doc["checks"]["oracle_agrees"] is False and doc["duplicate_ids"] == [rows[4]["task_id"]]


def test_a_bad_config_is_one_line_naming_the_field(cli, tmp_path):
    out = tmp_path / "x.jsonl"
    cases = [
        (CONFIG.replace("density = [0.6, 0.9]", "density = [0.6, 9]"), "grid[0].density[1] (line 11)"),
        (CONFIG.replace("per_bucket = 2", "per_bucket = 2\nworkers = 4"), "workers (line 5): unknown key"),
        (CONFIG.replace("candidates = 15", "candidates = 5"), "candidates (line 3)"),
    ]
    for text, words in cases:
        cfg = _config(tmp_path, text)
        rc, stdout, err = cli("suite", "generate", str(cfg), "-o", str(out))
        assert rc == 2 and stdout == ""
        assert err.count("\n") == 1 and err.startswith("calbench: error: ") and words in err, err
        assert not out.exists()
    yaml_cfg = _config(tmp_path, "setting_name: s\nconfigs:\n  - total_agents: 3\n    subset_size: 2\n"
                                 "    num_slots: 8\n    num_meetings: 3\n    densities: [0.5]\n    pref_level: 3\n"
                                 "    errand_cost_level: 2\n",
                       name="taskgen.yaml")
    rc, _, err = cli("suite", "generate", str(yaml_cfg), "-o", str(out))
    assert rc == 2 and "configs[0].errand_cost_level (line 9)" in err and err.count("\n") == 1
    for args, words in (
        (("suite", "generate", str(tmp_path / "missing.toml"), "-o", str(out)), "cannot read"),
        (("suite", "generate", str(_config(tmp_path, CONFIG, "c.ini")), "-o", str(out)), ".toml"),
        (("suite", "generate", str(_config(tmp_path)), "-o", str(tmp_path / "x.txt")), ".jsonl"),
        (("suite", "generate", str(_config(tmp_path)), "-o", str(tmp_path / "no" / "x.jsonl")), "does not exist"),
        (("suite", "generate", str(_config(tmp_path)), "-o", str(out), "--workers", "0"), "--workers"),
        (("suite", "show", str(tmp_path / "none.jsonl")), "no such file"),
        (("suite", "show", str(tmp_path)), "is a folder"),
        (("suite", "show", ""), "suite show needs a task file"),
    ):
        rc, _, err = cli(*args)
        assert rc == 2 and words in err and err.count("\n") == 1, (args, err)


def test_show_on_the_authors_file(authors_tasks_path):
    proc = subprocess.run([sys.executable, "-m", "calbench_cli.cli", "suite", "show", str(authors_tasks_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "108 tasks in 9 cells" in proc.stdout and "optimal_cost_per_participant_slot" in proc.stdout
    assert "✓ oracle agrees with the file: 108 agree" in proc.stdout
    assert "5a_5p_d1p0_c1" in proc.stdout


def test_suite_is_listed_in_help():
    proc = subprocess.run([sys.executable, "-m", "calbench_cli.cli", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "suite" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "calbench_cli.cli", "suite", "generate", "--help"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "[[grid]]" in proc.stdout and "taskgen" in proc.stdout
