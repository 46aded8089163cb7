"""Helpers for the study tests (imported by name: tests/study is on sys.path via conftest)."""

from __future__ import annotations

from lab.study.example import EXAMPLE

#: The example with its LLM condition pointed at a mock endpoint URL (filled per test).
def example_text(base_url: str | None = None, **replace: str) -> str:
    text = EXAMPLE
    if base_url:
        text = text.replace("http://127.0.0.1:8765/v1", base_url)
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


#: A small scripted-only study: two conditions, both scripted (fast).
SCRIPTED_ONLY = {'partners = ["llm:mock-model", "imap", "imap", "imap"]': 'partners = "sdmap"'}
