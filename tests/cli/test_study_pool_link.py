"""Online pools (issue 20, lab extras): a study link may carry the pool's id for the
participant (``&participant=ID``); it reaches ``study run --pool-id`` through the app
socket's path, and a link whose id is not an id is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_the_pool_id_in_a_link_reaches_study_run(tmp_path):
    pytest.importorskip("textual_serve")
    from calbench_cli.cli import main as cli_main

    study = tmp_path / "study.toml"
    assert cli_main(["study", "init", str(study)]) == 0
    cmd = [sys.executable, "-c", "import sys; from calbench_cli.cli import main; sys.exit(main())", "serve",
           "--study", str(study), "--participants", "P01", "--port", "0", "--json", "--db", str(tmp_path / "s.db")]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        info = json.loads(line)
        link, code = info["participants"][0]["link"], info["participants"][0]["code"]
        page = urllib.request.urlopen(link + "&participant=5f3c-77", timeout=10).read().decode()
        assert f"/ws/{code}/pool/5f3c-77" in page  # the app socket carries the pool's id
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(link + "&participant=a%20b%3Bx", timeout=10)
        assert err.value.code == 400
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
        proc.kill()


def test_the_command_a_pool_link_starts_records_the_pool_id():
    pytest.importorskip("textual_serve")
    from calbench_tui.web import WebFront

    web = WebFront(host="127.0.0.1", port=0, study=("s.toml", "s.db"), participants={"abc": "P01"})
    assert web.command_for("abc", "5f3c-77").endswith("--participant P01 --db s.db --pool-id 5f3c-77")
    assert "--pool-id" not in web.command_for("abc", "a b;rm")  # not an id: never reaches the shell
    assert web.command_for("nope", "5f3c") is None


def test_serve_refuses_ids_the_study_would_refuse(cli, tmp_path):
    cli("study", "init", str(tmp_path / "ok.toml"))
    rc, out, err = cli("serve", "--study", str(tmp_path / "ok.toml"), "--participants", "P-1,P2")
    assert rc == 2 and "participant_pattern" in err
