"""The study file: the annotated example validates; mistakes come back as one line with the line number and the fix."""

from __future__ import annotations

import json

import pytest

from lab.study.example import EXAMPLE
from lab.study.model import StudyFileError, load_study, parse_study


def test_example_validates_and_has_every_section():
    s = parse_study(EXAMPLE)
    assert [c.name for c in s.conditions] == ["scripted", "llm"]
    assert s.conditions[1].uses_llm and not s.conditions[0].uses_llm
    assert s.games_per_participant == 2 and s.tasks.practice == "seed:99"
    assert s.assignment.method == "latin" and s.assignment.seats == [0, 2]
    assert s.timing.talk_seconds == 90 and s.timing.on_decision_timeout == "submit"
    assert len(s.quiz) == 2 and {q.when for q in s.questionnaires} == {"before", "after_game", "after_study"}
    assert {it.type for q in s.questionnaires for it in q.items} == {"likert", "choice", "text"}
    assert s.beliefs.enabled and s.beliefs.rounds == "last"


@pytest.mark.parametrize("old,new,line_text,words", [
    ("seat = 0                  # used", "seat = 9                  # used", "seat = 9", ["conditions[0].seat", "use 0-4"]),
    ('method = "latin"', 'method = "latn"', 'method = "latn"', ["assignment.method", "use one of the values"]),
    ("max_turns = 6             # talk", "max_turnz = 6             # talk", "max_turnz", ["remove it or check its spelling"]),
    ('talk_seconds = 90', 'talk_seconds = -5', "talk_seconds = -5", ["timing.talk_seconds", "use a larger value"]),
    ('"seed:103"]', '"seed:nine"]', '"seed:nine"]', ["tasks.pool", "seed:N"]),
    ('api_key_env = "OPENAI_API_KEY"', 'api_key_env = "sk-abc 123"', "api_key_env", ["NAME of an environment variable"]),
])
def test_mistakes_name_the_line_and_the_fix(old, new, line_text, words):
    assert old in EXAMPLE
    text = EXAMPLE.replace(old, new, 1)
    with pytest.raises(StudyFileError) as err:
        parse_study(text, source="s.toml")
    msg = str(err.value)
    assert "\n" not in msg
    line = int(msg.split("line ")[1].split(":")[0])
    assert line_text in text.splitlines()[line - 1], (msg, text.splitlines()[line - 1])
    for w in words:
        assert w in msg, msg


def test_quiz_answer_out_of_range_and_bad_toml():
    with pytest.raises(StudyFileError, match=r"line \d+: quiz\[1\]: answer = 5 but there are only 3 choices"):
        parse_study(EXAMPLE.replace("answer = 2", "answer = 5"))
    with pytest.raises(StudyFileError, match="not valid TOML"):
        parse_study(EXAMPLE.replace('name = "pilot-1"', 'name = "pilot-1'))


def test_consent_file_must_exist(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text(EXAMPLE.replace('[consent]\ntext = """', '[consent]\nfile = "consent.md"\nunused = """'))
    with pytest.raises(StudyFileError):
        load_study(p)
    text = EXAMPLE.split("[consent]")[0] + '[consent]\nfile = "consent.md"\n\n[instructions]' + \
        EXAMPLE.split("[instructions]")[1]
    p.write_text(text)
    with pytest.raises(StudyFileError, match="consent.md' does not exist"):
        load_study(p)
    (tmp_path / "consent.md").write_text("# Consent\nPress y.")
    s = load_study(p)
    assert s.consent.read(tmp_path).startswith("# Consent")


def test_init_writes_the_example_and_refuses_to_overwrite(cli, tmp_path):
    p = tmp_path / "study.toml"
    rc, out, err = cli("study", "init", str(p))
    assert rc == 0 and p.read_text() == EXAMPLE and "study check" in out
    rc, out, err = cli("study", "init", str(p))
    assert rc == 2 and "exists" in err and "Traceback" not in err


def test_check_prints_the_design_as_json(cli, tmp_path):
    p = tmp_path / "study.toml"
    p.write_text(EXAMPLE)
    rc, out, err = cli("study", "check", str(p), "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["participants_per_cycle"] == 4 and d["games_per_participant"] == 2
    assert [c["name"] for c in d["conditions"]] == ["scripted", "llm"]
    assert all(c["seats"] == [0, 2] and c["positions"] == [0, 1] for c in d["conditions"])
    assert "dry_run" not in d
    rc, out, err = cli("study", "check", str(p))
    assert rc == 0 and "4 participants per counterbalancing cycle" in out


def test_bad_file_is_one_line_exit_2(cli, tmp_path):
    p = tmp_path / "study.toml"
    p.write_text(EXAMPLE.replace("seat = 0                  # used", "seat = 7                  # used"))
    rc, out, err = cli("study", "check", str(p))
    assert rc == 2 and err.count("\n") == 1 and "line 24" in err


def test_condition_cost_recosts_seed_scenarios_only():
    from lab.study.assign import assignment
    from lab.study.model import condition_task, pool_tasks

    s = parse_study(EXAMPLE.replace('cost = "task"             # task', 'cost = "varied"           # task'))
    assert s.conditions[0].cost == "varied"
    varied = condition_task(s, s.conditions[0], pool_tasks(s)[0])
    uniform = condition_task(s, s.conditions[1], pool_tasks(s)[0])
    assert varied.cost_mode == "varied" and uniform.cost_mode == "uniform"
    assert [m.participants for m in varied.meetings] == [m.participants for m in uniform.meetings]
    plan = assignment(s, 0)
    ids = {g.condition: g.task_id for g in plan if not g.practice}
    assert ids["scripted"].startswith("seed-") and ids["scripted"] != "seed-100" and ids["llm"] in ("seed-100", "seed-101")
    with pytest.raises(StudyFileError, match=r"conditions\[0\]\.cost: cost = 'varied' re-costs seed:N scenarios only"):
        parse_study(EXAMPLE.replace('cost = "task"             # task', 'cost = "varied"           # task')
                    .replace('pool = ["seed:100", "seed:101", "seed:102", "seed:103"]', 'pool = "canonical:1-4"'))
