"""``calbench mock-llm``: a real process serving real HTTP until Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from calbench_tui.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_mock_llm_serves_until_interrupted():
    _serve_and_stop(signal.SIGINT)


def test_mock_llm_stops_on_sigterm():
    _serve_and_stop(signal.SIGTERM)


def _serve_and_stop(sig):
    proc = subprocess.Popen([sys.executable, "-m", "calbench_tui.cli", "mock-llm", "--port", "0", "--policy",
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
