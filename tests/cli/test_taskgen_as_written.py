"""The authors' taskgen YAML runs unchanged (issue 21): each of their three published key
sets, written here in our own words and numbers, goes through ``calbench suite generate``
with no ``-o``: ``description`` is kept in the summary, ``output`` / ``summary_output`` are
read relative to the config file, their scorer name is an alias of ours, and list-valued
keys are grid axes."""

from __future__ import annotations

import json
import textwrap

import pytest

from engine.suitegen import SCORER_ALIASES, parse_config

# Key set of their uniform half: folded description, output + summary_output, their scorer.
UNIFORM = textwrap.dedent("""\
    setting_name: try_uniform_grid
    description: >
      A uniform-cost trial grid of our own: four agents, three per meeting,
      four meetings, two densities.
    output: made/try_uniform.jsonl
    summary_output: made/try_uniform_summary.json
    seed_base: 51000
    candidates_per_config: 9
    selected_per_bucket: 2
    difficulty_scorer: cp_sat_solvable_assignment_fraction
    configs:
      - total_agents: 4
        subset_size: 3
        num_slots: 12
        num_meetings: 4
        densities: [0.5, 0.75]
        pref_level: 1
        meeting_cost_level: 1
        errand_cost_level: 1
    """)

# Key set of their varied half: pref_level 3 with errand_cost_values and no errand_cost_level.
VARIED = textwrap.dedent("""\
    setting_name: try_varied_grid
    description: >
      The same trial grid with three errand costs per agent,
      one, fifty and five hundred.
    output: made/try_varied.jsonl
    summary_output: made/try_varied_summary.json
    seed_base: 52000
    candidates_per_config: 9
    selected_per_bucket: 2
    difficulty_scorer: cp_sat_solvable_assignment_fraction
    configs:
      - total_agents: 4
        subset_size: 3
        num_slots: 12
        num_meetings: 4
        densities: [0.5, 0.75]
        pref_level: 3
        meeting_cost_level: 1
        errand_cost_values: [1, 50, 500]
    """)

# Key set of their custom example: list-valued total_agents, subset_sizes, pref_levels,
# errand_cost_level without a list of values, the other scorer, a one-line description.
CUSTOM = textwrap.dedent("""\
    setting_name: try_custom_grid
    description: A compact grid that varies every list-valued key.
    output: made/try_custom.jsonl
    summary_output: made/try_custom_summary.json
    seed_base: 53000
    candidates_per_config: 6
    selected_per_bucket: 1
    difficulty_scorer: optimal_cost_per_participant_slot
    configs:
      - total_agents: [3, 4]
        subset_sizes: [2, 3]
        num_slots: 10
        num_meetings: 3
        densities: [0.3, 0.6]
        pref_levels: [1, 3]
        meeting_cost_level: 1
        errand_cost_level: 3
    """)


@pytest.mark.parametrize("text, name, cells, scorer", [
    (UNIFORM, "try_uniform", 2, "feasible_fraction"),
    (VARIED, "try_varied", 2, "feasible_fraction"),
    (CUSTOM, "try_custom", 16, "optimal_cost_per_participant_slot"),
], ids=["uniform-keys", "varied-keys", "custom-keys"])
def test_each_published_key_set_generates_unchanged(cli, tmp_path, text, name, cells, scorer):
    conf_dir = tmp_path / "configs"
    conf_dir.mkdir()
    cfg = conf_dir / f"{name}.yaml"
    cfg.write_text(text)
    rc, stdout, err = cli("suite", "generate", str(cfg), "--workers", "1")
    assert rc == 0, err
    out = conf_dir / "made" / f"{name}.jsonl"  # relative to the config file, not the cwd
    summary = conf_dir / "made" / f"{name}_summary.json"
    assert out.is_file() and summary.is_file()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    doc = json.loads(summary.read_text())
    per_bucket = 1 if name == "try_custom" else 2
    assert len(rows) == cells * 3 * per_bucket == doc["tasks"]
    assert len(doc["cells"]) == cells
    assert doc["config"]["scorer"] == scorer
    assert doc["description"] == " ".join(parse_config(text, "yaml").description.split())
    assert doc["description"].startswith(("A uniform-cost", "The same trial", "A compact grid"))
    assert doc["output"] == str(out)
    assert "wrote" in stdout and "summary:" in stdout


def test_list_valued_keys_are_grid_axes():
    cfg = parse_config(CUSTOM, "yaml")
    combos = {(c.num_agents, c.participants, c.density, c.cost_values) for c in cfg.cells}
    assert combos == {(a, p, d, v) for a in (3, 4) for p in (2, 3) for d in (0.3, 0.6)
                      for v in ((1,), (1, 2, 3))}
    # their generator draws costs from 1 .. errand_cost_level; three levels of 1..3
    assert {c.cost_mode for c in cfg.cells} == {"uniform", "varied"}


def test_their_scorer_name_is_an_alias_of_ours():
    assert SCORER_ALIASES["cp_sat_solvable_assignment_fraction"] == "feasible_fraction"
    ours = parse_config(UNIFORM.replace("cp_sat_solvable_assignment_fraction", "feasible_fraction"), "yaml")
    theirs = parse_config(UNIFORM, "yaml")
    # the alias decides nothing else: same config digest, same suite version
    assert theirs.scorer == "feasible_fraction" and theirs.digest == ours.digest
    # description and output paths decide nothing about the tasks either
    bare = "\n".join(line for line in UNIFORM.splitlines()
                     if not line.startswith(("description", "  A uniform", "  four", "output", "summary_output")))
    assert parse_config(bare, "yaml").digest == theirs.digest


def test_dash_o_wins_over_the_config_and_a_bad_output_is_one_line(cli, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(UNIFORM)
    mine = tmp_path / "mine.jsonl"
    rc, _out, err = cli("suite", "generate", str(cfg), "-o", str(mine), "--workers", "1")
    assert rc == 0, err
    assert mine.is_file() and not (tmp_path / "made").exists()
    cfg.write_text(UNIFORM.replace("output: made/try_uniform.jsonl", "output: made/try_uniform.csv"))
    rc, _out, err = cli("suite", "generate", str(cfg), "--workers", "1")
    assert rc == 2 and err.count("\n") == 1 and "output (line 5)" in err and ".jsonl" in err
    bare = tmp_path / "bare.yaml"
    bare.write_text("\n".join(line for line in UNIFORM.splitlines() if not line.startswith(("output", "summary_output"))))
    rc, _out, err = cli("suite", "generate", str(bare), "--workers", "1")
    assert rc == 2 and err.count("\n") == 1 and "-o FILE.jsonl is needed" in err
