"""``calbench-play`` takes the same LLM options as ``calbench run`` and ``calbench serve`` (one
parser), per seat through ``--personas``; they are saved with the game (never a key) and
come back on ``--resume``, where options typed again win (issue 22 item 7)."""

from __future__ import annotations

import pytest

from calbench_tui.app import make_app
from calbench_cli.commands import play
from calbench_tui.screens.end import EndScreen
from calbench_tui.settings import Settings
from calbench_devtools.mock_endpoint import MockLLMServer
from saves.store import Store

from .helpers import PATIENCE, play_to_end, wait_for

SIZE = (80, 24)


def _llm_options(parser) -> set[str]:
    group = next(g for g in parser._action_groups if g.title and g.title.startswith("LLM seats"))
    return {s for a in group._group_actions for s in a.option_strings}


def test_run_serve_and_play_share_one_set_of_llm_options():
    from calbench_cli.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    run, serve = _llm_options(sub.choices["run"]), _llm_options(sub.choices["serve"])
    mine = _llm_options(play.build_parser())
    assert run == serve == mine
    assert {"--timeout", "--request-deadline", "--max-tokens", "--llm-retries", "--structured", "--context-window",
            "--personas", "--temperature", "--top-p", "--repeat-penalty", "--frequency-penalty", "--llm-seed",
            "--stop", "--no-stream"} <= mine


def test_play_reads_the_options_and_a_personas_file_per_seat(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    personas = tmp_path / "p.toml"
    personas.write_text('[seats.3]\nmodel = "other"\ntemperature = 0.9\ntop_p = 0.5\nstop = ["##"]\n')
    args = play.build_parser().parse_args([
        "--seat", "2", "--agents", "imap,llm:m,human,llm:m,imap", "--base-url", "http://127.0.0.1:9/v1",
        "--timeout", "300", "--request-deadline", "900", "--max-tokens", "256", "--llm-retries", "1",
        "--structured", "json_object", "--context-window", "4096", "--temperature", "0.2", "--top-p", "0.9",
        "--repeat-penalty", "1.1", "--frequency-penalty", "0.3", "--llm-seed", "7", "--stop", "END", "--stop",
        "STOP", "--personas", str(personas)])
    base, per_seat, given = play._llm_settings(args)
    assert (base.timeout, base.request_deadline, base.max_tokens, base.retries, base.structured,
            base.context_window) == (300, 900, 256, 1, "json_object", 4096)
    assert (base.temperature, base.top_p, base.repeat_penalty, base.frequency_penalty, base.seed, base.stop) == (
        0.2, 0.9, 1.1, 0.3, 7, ["END", "STOP"])
    seat3 = per_seat[3]
    assert (seat3.model, seat3.temperature, seat3.top_p, seat3.stop, seat3.timeout) == ("other", 0.9, 0.5, ["##"], 300)
    assert given["timeout"] == 300 and given["seed"] == 7


def test_a_bad_llm_option_of_play_is_one_line(capsys):
    from calbench_cli.cli import play_main

    assert play_main(["--seat", "2", "--top-p", "1.5"]) == 2
    err = capsys.readouterr().err
    assert "--top-p" in err and "Traceback" not in err


async def test_sampling_per_seat_is_sent_saved_and_restored_and_options_typed_again_win(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    personas = tmp_path / "p.toml"
    personas.write_text('[seats.3]\nmodel = "m"\ntop_p = 0.5\nseed = 11\n')
    async with MockLLMServer() as server:
        args = play.build_parser().parse_args([
            "--seat", "2", "--agents", "imap,llm:m,human,llm:m,imap", "--base-url", server.base_url,
            "--top-p", "0.9", "--llm-seed", "7", "--stop", "END", "--timeout", "30", "--personas", str(personas)])
        base, per_seat, _given = play._llm_settings(args)
        store = await Store.open(tmp_path / "play.db")
        try:
            app = make_app(settings=Settings(seat=2, seed=7, deterministic=True, max_turns_per_round=3,
                                             agents="imap,llm:m,human,llm:m,imap"), store=store, llm=base)
            app.llm_per_seat = per_seat
            async with app.run_test(size=SIZE) as pilot:
                await play_to_end(pilot, app, stop_after_rounds=1, timeout=4 * PATIENCE)
                await wait_for(pilot, lambda: app.game_screen.pending is not None, what="a turn in round 2",
                               timeout=PATIENCE)
                game_id = app.game_id
                await pilot.press("ctrl+q")
                await pilot.pause()
            sent = {(r.seat, r.sampling.get("top_p"), r.sampling.get("seed"), tuple(r.sampling.get("stop") or ()))
                    for r in server.records if r.seat in (1, 3)}
            assert sent and sent <= {(1, 0.9, 7, ("END",)), (3, 0.5, 11, ("END",))}  # each seat its own sampling
            saved = (await store.load_trace(game_id))["config"]["llm"]
            assert (saved[1]["top_p"], saved[1]["seed"], saved[1]["stop"]) == (0.9, 7, ["END"])
            assert (saved[3]["top_p"], saved[3]["seed"]) == (0.5, 11)
            assert all("key" not in k or k == "api_key_env" for e in saved if e for k in e)

            # resume with nothing but a longer --timeout typed again: sampling comes back, the timeout is new
            args = play.build_parser().parse_args(["--resume", game_id[:8], "--timeout", "300"])
            base2, per2, overrides = play._llm_settings(args)
            again = make_app(settings=Settings(resume=game_id[:8], deterministic=True), store=store, llm=base2)
            again.llm_overrides = overrides
            made: list = []
            real = again.make_seats
            again.make_seats = lambda task: made.extend(real(task)) or made  # type: ignore[method-assign]
            before = len(server.records)
            async with again.run_test(size=SIZE) as pilot:
                await wait_for(pilot, lambda: again.game_screen is not None, what="the resumed game", timeout=PATIENCE)
                await play_to_end(pilot, again, timeout=4 * PATIENCE)
                assert isinstance(again.screen, EndScreen)
            s1, s3 = made[1].settings, made[3].settings
            assert (s1.top_p, s1.seed, s1.stop, s1.timeout) == (0.9, 7, ["END"], 300)
            assert (made[3].model_name, s3.top_p, s3.seed, s3.timeout) == ("m", 0.5, 11, 300)
            after = {(r.seat, r.sampling.get("top_p"), r.sampling.get("seed")) for r in server.records[before:]
                     if r.seat in (1, 3)}
            assert after and after <= {(1, 0.9, 7), (3, 0.5, 11)}
            both = {(r.seat, r.sampling.get("top_p")) for r in server.records if r.seat in (1, 3)}
            assert both == {(1, 0.9), (3, 0.5)}  # over the whole game both LLM seats talked
        finally:
            await store.close()
