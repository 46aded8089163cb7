"""``calbench mock-llm``: a real process serving real HTTP until Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from calbench_cli.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_mock_llm_serves_until_interrupted():
    _serve_and_stop(signal.SIGINT)


def test_mock_llm_stops_on_sigterm():
    _serve_and_stop(signal.SIGTERM)


def _serve_and_stop(sig):
    proc = subprocess.Popen([sys.executable, "-m", "calbench_cli.cli", "mock-llm", "--port", "0", "--policy",
                             "silent"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
        assert first.startswith("CalBench mock LLM at http://127.0.0.1:"), first + proc.stderr.read()
        base = first.split(" at ")[1].split()[0]
        with urllib.request.urlopen(base + "/models", timeout=5) as r:
            models = json.load(r)
        assert {m["id"] for m in models["data"]} >= {"mock-cooperative", "mock-silent", "mock-chaos"}
        body = json.dumps({"model": "x", "messages": [{"role": "system", "content": "You are Agent 1."},
                                                     {"role": "user", "content": "hello"}]}).encode()
        req = urllib.request.Request(base + "/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            reply = json.load(r)
        assert json.loads(reply["choices"][0]["message"]["content"]) == {"thinking": "", "actions": []}
        assert reply["usage"]["prompt_tokens"] > 0
    finally:
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "1 request(s)" in out and "Traceback" not in err


def test_mock_llm_user_errors(capsys):
    assert main(["mock-llm", "--port", "70000"]) == 2
    assert "calbench: error: --port must be 0..65535" in capsys.readouterr().err
    assert main(["mock-llm", "--latency", "-1"]) == 2


def test_shared_llm_options(tmp_path, monkeypatch):
    import argparse

    import pytest

    from calbench_cli.commands import UserError
    from calbench_cli.commands.llm import add_llm_arguments, settings_from_args

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    parser = argparse.ArgumentParser()
    add_llm_arguments(parser)
    base, seats = settings_from_args(parser.parse_args(
        ["--base-url", "http://127.0.0.1:9/v1", "--temperature", "0.3", "--llm-concurrency", "3", "--reflection"]))
    assert (base.temperature, base.concurrency, base.reflection, seats) == (0.3, 3, True, {})
    f = tmp_path / "p.toml"
    f.write_text('[seats.2]\nmodel = "m"\n')
    _, seats = settings_from_args(parser.parse_args(["--base-url", "http://127.0.0.1:9/v1", "--personas", str(f)]))
    assert seats[2].model == "m" and seats[2].pool is _.pool
    with pytest.raises(UserError, match="--temperature"):
        settings_from_args(parser.parse_args(["--temperature", "9"]))
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(UserError, match=r"\$NO_SUCH_KEY_VAR"):
        settings_from_args(parser.parse_args(["--api-key-env", "NO_SUCH_KEY_VAR"]))
    f.write_text('[seats.2]\nmodel = "m"\napi_key = "sk-1"\n')
    with pytest.raises(UserError, match="api_key is not allowed"):
        settings_from_args(parser.parse_args(["--base-url", "http://127.0.0.1:9/v1", "--personas", str(f)]))


def test_mock_llm_refuses_a_negative_retry_after(capsys):
    assert main(["mock-llm", "--retry-after", "-2"]) == 2
    assert "--retry-after must be 0 or more" in capsys.readouterr().err


def test_shared_llm_options_keep_zero_and_refuse_non_positive(monkeypatch):
    import argparse

    import pytest

    from calbench_cli.commands import UserError
    from calbench_cli.commands.llm import add_llm_arguments, settings_from_args

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    parser = argparse.ArgumentParser()
    add_llm_arguments(parser)
    base, _ = settings_from_args(parser.parse_args(["--base-url", "http://127.0.0.1:9/v1", "--temperature", "0",
                                                    "--llm-retries", "0"]))
    assert base.temperature == 0.0 and base.retries == 0
    for args, msg in ((["--max-tokens", "0"], "--max-tokens must be at least 1"),
                      (["--llm-concurrency", "-1"], "--llm-concurrency must be at least 1"),
                      (["--timeout", "0"], "--timeout must be more than 0")):
        with pytest.raises(UserError, match=msg):
            settings_from_args(parser.parse_args(["--base-url", "http://127.0.0.1:9/v1", *args]))
    with pytest.raises(UserError, match="--base-url: 'notaurl'"):
        settings_from_args(parser.parse_args(["--base-url", "notaurl"]))
