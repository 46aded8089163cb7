"""Issue 35 (2): a taskgen YAML cannot write outside its folder, and nothing is overwritten
without ``--force``.

Before: ``output: ../victim/tasks.jsonl`` or an absolute path in a config someone handed you
replaced that file (no ``-o`` needed), and an existing ``-o`` file was replaced silently.
"""

from __future__ import annotations

SMALL = """setting_name: t35
seed_base: 7
candidates_per_config: 6
selected_per_bucket: 1
configs:
  - total_agents: 3
    subset_size: 2
    num_slots: 8
    num_meetings: 2
    densities: [0.5]
"""


def test_a_config_may_not_write_outside_its_folder(cli, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    target = victim / "tasks.jsonl"
    target.write_text("precious\n")
    conf = tmp_path / "conf"
    conf.mkdir()
    for i, (key, value) in enumerate((("output", "../victim/tasks.jsonl"), ("output", str(target)),
                                      ("summary_output", "../victim/summary.json"),
                                      ("output", "made/../../victim/tasks.jsonl"))):
        cfg = conf / f"c{i}.yaml"
        extra = f"{key}: {value}\n" + ("output: ok.jsonl\n" if key == "summary_output" else "")
        cfg.write_text(extra + SMALL)
        rc, stdout, err = cli("suite", "generate", str(cfg), "--workers", "1")
        assert rc == 2 and stdout == "", (value, err)
        assert err.count("\n") == 1 and "outside the config's folder" in err, err
    assert target.read_text() == "precious\n"
    assert sorted(p.name for p in victim.iterdir()) == ["tasks.jsonl"]
    assert not (conf / "ok.jsonl").exists()


def test_nothing_is_overwritten_without_force(cli, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("output: made/t.jsonl\nsummary_output: made/s.json\n" + SMALL)
    assert cli("suite", "generate", str(cfg), "--workers", "1")[0] == 0
    out = tmp_path / "made" / "t.jsonl"
    first = out.read_bytes()
    out.write_text("edited by hand\n")
    rc, _, err = cli("suite", "generate", str(cfg), "--workers", "1")
    assert rc == 2 and err.count("\n") == 1 and "exists; add --force" in err, err
    assert out.read_text() == "edited by hand\n"
    other = tmp_path / "mine.jsonl"
    other.write_text("mine\n")
    rc, _, err = cli("suite", "generate", str(cfg), "-o", str(other), "--workers", "1")
    assert rc == 2 and "exists; add --force" in err and other.read_text() == "mine\n"
    assert cli("suite", "generate", str(cfg), "--workers", "1", "--force")[0] == 0
    assert out.read_bytes() == first


def test_suite_show_names_a_fifo_for_what_it_is(cli, tmp_path):
    """Issue 35: ``suite show`` called a FIFO "no such file"."""
    import os

    fifo = tmp_path / "tasks.jsonl"
    os.mkfifo(fifo)
    rc, _, err = cli("suite", "show", str(fifo))
    assert rc == 2 and err.count("\n") == 1 and "FIFO" in err and "no such file" not in err, err
    rc, _, err = cli("suite", "show", str(tmp_path / "absent.jsonl"))
    assert rc == 2 and "no such file" in err
