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


def test_one_public_link_admits_a_pool_id_once_and_caps_the_study(tmp_path):
    """[pool] max_participants: `serve --study` needs no --participants and prints one public link;
    a pool id gets its own private link (the same one every time), the cap refuses the next id."""
    pytest.importorskip("textual_serve")
    import urllib.parse

    from calbench_cli.cli import main as cli_main

    study = tmp_path / "study.toml"
    assert cli_main(["study", "init", str(study)]) == 0
    text = study.read_text().replace('id_param = "participant"', 'id_param = "PROLIFIC_PID"\nmax_participants = 1')
    study.write_text(text)
    cmd = [sys.executable, "-c", "import sys; from calbench_cli.cli import main; sys.exit(main())", "serve",
           "--study", str(study), "--port", "0", "--json", "--db", str(tmp_path / "s.db")]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **kw):
            return None

    opener = urllib.request.build_opener(NoRedirect)

    def visit(pid: str | None) -> tuple[int, str]:
        url = public.split("&PROLIFIC_PID=")[0] + ("" if pid is None else f"&PROLIFIC_PID={pid}")
        try:
            r = opener.open(url, timeout=20)
            return r.status, r.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.headers.get("Location") or err.read().decode()

    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        info = json.loads(line)
        public = info["public_link"]
        assert info["participants"] == [] and public.endswith("&PROLIFIC_PID={{%PROLIFIC_PID%}}")
        status, where = visit("5f3c0001")
        assert status == 302 and "&PROLIFIC_PID=5f3c0001" in where
        own = urllib.parse.parse_qs(urllib.parse.urlsplit(where).query)["code"][0]
        assert visit("5f3c0001") == (302, where)  # the same pool id: the same participant, never a second slot
        page = urllib.request.urlopen(info["web"] + where.lstrip("/"), timeout=20).read().decode()
        assert f"/ws/{own}/pool/5f3c0001" in page  # their own session, with the pool's id
        status, text = visit("5f3c0002")
        assert status == 403 and "full" in text  # max_participants = 1
        status, text = visit(None)
        assert status == 403 and "PROLIFIC_PID" in text
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
        proc.kill()
