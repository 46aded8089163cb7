"""Issue 20, item 5: belief rounds are counted from 1 in the study file, as on every screen;
rounds the tasks do not have are refused with the line and the fix; the old 0-based form
is read with a warning that says what to write instead."""

from __future__ import annotations

import asyncio

import pytest

from lab.study.example import EXAMPLE
from lab.study.model import StudyFileError, parse_study
from lab.study.runner import StudyRunner
from lab.study.seat import belief_rounds
from lab.study.simulate import SimulatedDriver
from saves.store import Store

from studykit import SCRIPTED_ONLY, example_text

ROUNDS = 'rounds = "last"'


def with_rounds(value: str, text: str = EXAMPLE) -> str:
    assert ROUNDS in text
    return text.replace(ROUNDS, f"rounds = {value}", 1)


def test_a_round_the_tasks_do_not_have_is_refused_with_the_line_and_the_fix():
    text = with_rounds("[9]")
    with pytest.raises(StudyFileError) as err:
        parse_study(text, source="s.toml")
    msg = str(err.value)
    line = int(msg.split("line ")[1].split(":")[0])
    assert text.splitlines()[line - 1].startswith("rounds = [9]")
    assert "beliefs.rounds" in msg and "5 rounds" in msg and "use 1-5" in msg and "\n" not in msg


def test_an_empty_list_is_refused():
    with pytest.raises(StudyFileError, match="asks no belief grid"):
        parse_study(with_rounds("[]"), source="s.toml")


def test_rounds_count_from_1_as_on_screen():
    s = parse_study(with_rounds("[1, 5]"))
    assert s.beliefs.rounds == [1, 5] and not s.warnings
    assert belief_rounds(s.beliefs.rounds, 5) == {0, 4}  # the engine's round numbers
    assert belief_rounds("last", 5) == {4} and belief_rounds("all", 3) == {0, 1, 2}


def test_the_old_0_based_form_is_read_with_a_warning():
    text = with_rounds("[0, 2]")
    s = parse_study(text, source="s.toml")
    assert s.beliefs.rounds == [1, 3]
    (w,) = s.warnings
    line = int(w.split("line ")[1].split(":")[0])
    assert text.splitlines()[line - 1].startswith("rounds = [0, 2]")
    assert "counts rounds from 0" in w and "write rounds = [1, 3]" in w


def test_study_check_prints_the_warning_and_the_rounds(cli, tmp_path):
    p = tmp_path / "study.toml"
    p.write_text(with_rounds("[0, 2]"))
    rc, out, err = cli("study", "check", str(p))
    assert rc == 0
    assert "warning:" in err and "write rounds = [1, 3]" in err
    assert "Belief grid after rounds 1, 3 of 5" in out
    p.write_text(with_rounds("[9]"))
    rc, out, err = cli("study", "check", str(p))
    assert rc == 2 and "round 9 is not a round of the tasks" in err and "Traceback" not in err


def test_the_grid_is_shown_after_the_round_the_file_names(tmp_path):
    """rounds = [2]: the grid comes after the second round (engine round 1), and beliefs.csv has its rows."""
    study = parse_study(with_rounds("[2]", example_text(**SCRIPTED_ONLY)))

    class Asked(SimulatedDriver):
        rounds: list[int] = []

        async def beliefs(self, ctx, req):
            self.rounds.append(req.round)
            return await super().beliefs(ctx, req)

    async def go():
        async with await Store.open(tmp_path / "s.db") as store:
            drv = Asked(study, "P1")
            await StudyRunner(study, store, "P1", drv).run()
            async with store._db.execute("SELECT DISTINCT round FROM study_beliefs") as cur:
                return drv.rounds, [r[0] for r in await cur.fetchall()]

    asked, stored = asyncio.run(go())
    assert asked and set(asked) == {1} and stored == [1]
