"""``calbench`` commands in child processes forked from one process that has the CLI loaded.

A fresh ``python -c "...main()"`` per command spends most of its time importing CalBench
(the engine, the store, OR-Tools).  :class:`ForkRunner` starts one Python process that
imports those once, then forks a child for every command: each child is still a process of
its own — its own memory cap (``RLIMIT_AS``, set in the child), its own standard input
(``/dev/null``), output, error and environment, a time-out that kills it — and it ends the
way ``python -c`` ends (the same ``-c`` source runs as ``__main__``; ``SystemExit``, an
uncaught exception and the flush of standard output at exit are the interpreter's own).
What it does not get again is the import of the modules the server loaded.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile

# The server: reads one JSON request per line on fd 0, answers one JSON line per command on fd 1.
_SERVER = r'''
import json, os, resource, signal, sys, time
import calbench_cli.cli, calbench_cli.commands  # noqa: F401  (what every command needs)
for name in ("calbench_cli.commands.run", "calbench_cli.commands.saves", "calbench_cli.commands.report",
             "calbench_cli.commands.scenario", "calbench_cli.commands.suite", "calbench_cli.commands.study",
             "calbench_cli.commands.play", "saves.store", "engine.oracle", "engine.generate",
             "lab.archive", "lab.replaycheck", "lab.runner", "lab.study.check", *sys.argv[1:]):
    try:
        __import__(name)
    except Exception:  # a module a command imports anyway: the child would import it itself
        pass
import gc
gc.freeze()  # the loaded modules stay out of the children's collections (and their copy-on-write)
ctl_in, ctl_out = os.fdopen(0, "rb", buffering=0), 1

def answer(d):
    os.write(ctl_out, (json.dumps(d) + "\n").encode())

def read_line():
    buf = b""
    while not buf.endswith(b"\n"):
        ch = ctl_in.read(1)
        if not ch:
            return None
        buf += ch
    return buf

while True:
    line = read_line()
    if line is None:
        break
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:  # the child: a command of its own, ended as `python -c CODE ARGS` ends
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(null, 0); os.dup2(out, 1); os.dup2(err, 2)
        for fd in (null, out, err):
            os.close(fd)
        os.closerange(3, 256)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if req["mem_cap"] is not None:
            resource.setrlimit(resource.RLIMIT_AS, (req["mem_cap"], req["mem_cap"]))
        os.environ.clear()
        os.environ.update(req["env"])
        sys.argv = ["-c", *req["args"]]
        exec(compile(req["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        sys.exit(0)  # the code ran to its end without calling sys.exit
    pidfd = os.pidfd_open(pid)
    ready, _, _ = select.select([pidfd], [], [], req["timeout"])
    timed_out = not ready
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(pidfd)
    answer({"status": os.waitstatus_to_exitcode(status), "timed_out": timed_out})
'''


class ForkRunner:
    """One preloaded server; :meth:`run` is ``subprocess.run([python, "-c", code, *args])``
    with ``stdin=DEVNULL`` and ``capture_output=True`` (or ``stdout`` to a file by path)."""

    def __init__(self, mem_cap: int | None = None, preload: tuple[str, ...] = ()) -> None:
        """``mem_cap``: each child's RLIMIT_AS (None: no cap); ``preload``: modules to load in the server
        besides the CLI's (a child imports whatever else its command needs itself)."""
        self.mem_cap, self.preload = mem_cap, preload
        self.proc: subprocess.Popen | None = None
        self.tmp = tempfile.TemporaryDirectory(prefix="calbench-forkrun-")
        self.n = 0

    def _server(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([sys.executable, "-c", "import select\n" + _SERVER, *self.preload], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=None, bufsize=0)
        return self.proc

    def run(self, code: str, args: list[str], *, timeout: float, env: dict[str, str],
            stdout_path: str | None = None) -> subprocess.CompletedProcess:
        """Run ``code`` (the ``-c`` source) with ``args`` in a forked child; a time-out raises
        :class:`subprocess.TimeoutExpired` (the child is killed first)."""
        self.n += 1
        out = stdout_path or os.path.join(self.tmp.name, f"{self.n}.out")
        err = os.path.join(self.tmp.name, f"{self.n}.err")
        req = {"args": args, "env": env, "timeout": timeout, "mem_cap": self.mem_cap, "stdout": out, "stderr": err,
               "code": code}
        proc = self._server()
        proc.stdin.write((json.dumps(req) + "\n").encode())
        reply = b""
        while not reply.endswith(b"\n"):
            r, _, _ = select.select([proc.stdout], [], [], timeout + 60)
            ch = os.read(proc.stdout.fileno(), 4096) if r else b""
            if not ch:
                self.close()
                raise RuntimeError("the fork server ended or did not answer")
            reply += ch
        ans = json.loads(reply)
        argv = [sys.executable, "-c", code, *args]
        stderr = _read(err)
        stdout = None if stdout_path else _read(out)
        for p in (out, err):
            if p != stdout_path:
                os.unlink(p)
        if ans["timed_out"]:
            raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr)
        return subprocess.CompletedProcess(argv, ans["status"], stdout, stderr)

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except Exception:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        self.tmp.cleanup()


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:  # as subprocess.run(text=True) decodes
        return fh.read()
