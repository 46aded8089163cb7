"""A study caps its LLM partners' calls per round (issue 22 item 3)."""

from __future__ import annotations

from lab.study.model import parse_study
from lab.study.runner import StudyRunner
from saves.store import Store
from studykit import example_text


async def test_a_study_condition_caps_llm_calls_per_round(tmp_path):
    text = example_text(**{'api_key_env = "OPENAI_API_KEY"':
                           'api_key_env = "OPENAI_API_KEY"\nmax_calls_per_round = 3'})
    study = parse_study(text)
    cond = next(c for c in study.conditions if c.uses_llm)
    assert cond.llm.max_calls_per_round == 3
    async with await Store.open(str(tmp_path / "s.db")) as store:
        runner = StudyRunner(study, store, "p1", driver=None, deterministic=True)
        settings = runner._llm_settings(cond)
        try:
            assert settings.max_calls_per_round == 3
        finally:
            await settings.pool.aclose()
