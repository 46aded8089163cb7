"""Issue 35: a keys file may name only keys a keyboard has, and may not give one key to two
actions of a screen (the second action was silently unreachable)."""

from __future__ import annotations

import pytest


def test_every_default_key_is_a_known_key_and_none_is_bound_twice():
    from calbench_tui.app import binding_table, keymap_conflicts
    from calbench_tui.settings import known_key

    assert [(i, k) for i, keys, _ in binding_table() for k in keys.split(",") if not known_key(k.strip())] == []
    assert keymap_conflicts({}) == []


@pytest.mark.parametrize("text, words", [
    ('end_turn = "ctrl+banana"', "'ctrl+banana' is not a key name"),
    ('end_turn = "hyper+"', "is not a key name"),
    ('end_turn = "p"', "'p' is bound to both 'end_turn' and 'propose'"),
    ('quit = "e"', "'e' is bound to both 'quit' and 'end_turn'"),
    ('end_turn = "f2,?"', "'question_mark' is bound to both 'help' and 'end_turn'"),
])
def test_a_keys_file_is_refused_in_one_line(text, words, tmp_path, capsys):
    from calbench_cli.cli import play_main

    p = tmp_path / "keys.toml"
    p.write_text(f"[keys]\n{text}\n")
    assert play_main(["--list-keys", "--keys", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err


def test_a_remapping_that_clashes_with_nothing_is_accepted(tmp_path, capsys):
    from calbench_cli.cli import play_main

    p = tmp_path / "keys.toml"
    p.write_text('[keys]\nend_turn = "ctrl+t,f2"\n"replay.faster" = "plus"\n')
    assert play_main(["--list-keys", "--keys", str(p)]) == 0
    assert "ctrl+t" in capsys.readouterr().out.lower()
