"""Warm start for the browser page's app processes: a pre-imported parent that forks them.

A browser participant's app (``calbench study run …`` or ``calbench-play --join …``) used
to be a fresh Python process: about 1.4–2.2 CPU-seconds of imports (Textual, the app, the
study runner, SQLite …) before its first screen, per participant, all at once when a lab
opens its links together (issue 34).  Here one **zygote** process is started with the web
front: it imports all of that once, freezes its heap (``gc.freeze``: forked children share
those pages instead of copying them), and then forks one child per participant.  A child
only builds its app: a few tenths of a CPU-second less than a cold start by a factor of
about ten (``benchmarks/browser_capacity.py`` measures it).

How a child is asked for (host → zygote, one ``SOCK_SEQPACKET`` message): JSON ``{"id",
"entry": "module:function", "argv", "env", "cwd"}`` with three file descriptors attached
(the child's stdin, stdout and stderr pipes, passed with ``SCM_RIGHTS``).  The zygote
answers ``{"id", "pid"}`` (or ``{"id", "error"}``) and, when a child ends, ``{"exit": pid,
"code": N}`` (``-N`` for a signal, as :mod:`subprocess` says it).

Nobody outlives the host (issue 34, item 1: orphans kept participants' sessions claimed
after a ``kill -9`` of the server):

* the zygote dies with the host: ``PR_SET_PDEATHSIG`` plus a watchdog
  (:func:`lab.lease.die_with_parent`), and it also ends when its control socket closes —
  killing every child it forked first;
* each child dies with the zygote the same way (so a ``kill -9`` of the host takes the
  zygote, and the zygote takes the children), and also stops when the host's pid is gone;
* the zygote runs in a session of its own, so a ctrl+c at the host's terminal does not
  reach the participants' apps: the host decides what the pages are told (the
  "reconnecting" banner, not "Session ended").

A process that is gone leaves its participant's lease stale, so a restarted host takes it
over (``lab.lease.Lease``): everyone's link works again.
"""

from __future__ import annotations

import array
import asyncio
import gc
import importlib
import json
import os
import signal
import socket
import sys
import traceback
from typing import Any, Sequence

__all__ = ["Zygote", "ZygoteProcess", "PRELOAD"]

#: What the zygote imports before its first fork: everything a participant's app needs.
PRELOAD = ("textual.app", "textual.drivers.web_driver", "textual.widgets", "textual.layouts.factory",
           "textual.layouts.horizontal", "textual.layouts.stream", "concurrent.futures.thread",
           "calbench_tui.study_app", "calbench_tui.app", "calbench_tui.remote", "lab.study.runner", "lab.study.model",
           "lab.lease", "saves.store", "saves.study", "engine.generate", "engine.labelbank", "engine.labels",
           "engine.oracle", "engine.taskref", "calbench_cli.cli", "calbench_cli.commands.study",
           "calbench_cli.commands.play")
_MAX_MSG = 1 << 20


# ---------------------------------------------------------------------------------------
# the zygote process
# ---------------------------------------------------------------------------------------
def _run_child(control: socket.socket, fds: Sequence[int], req: dict[str, Any], zygote_pid: int,
               host_pid: int) -> None:
    """In the forked child: wire the pipes, the environment and the arguments, run the entry."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        control.close()
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        from lab.lease import die_with_parent

        die_with_parent(zygote_pid, watch=False)
        _watch(zygote_pid, host_pid)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in (req.get("env") or {}).items()})
        if req.get("cwd"):
            os.chdir(req["cwd"])
        module, _, name = str(req["entry"]).partition(":")
        entry = getattr(importlib.import_module(module), name)
        argv = [str(a) for a in req.get("argv") or []]
        sys.argv = [module, *argv]
        gc.enable()
        try:
            result = entry(argv)
            code = result if isinstance(result, int) else 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except KeyboardInterrupt:
            code = 130
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _watch(parent: int, host: int, interval: float = 0.5) -> None:
    """End this process once its parent (the zygote) or the host is gone."""
    import threading
    import time

    from saves.lease import pid_alive

    def watch() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent or not pid_alive(host):
                os._exit(1)

    threading.Thread(target=watch, name="calbench-host-watchdog", daemon=True).start()


def _send(control: socket.socket, msg: dict[str, Any]) -> None:
    try:
        control.send(json.dumps(msg).encode())
    except OSError:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """The zygote: ``python -m calbench_tui.zygote CONTROL_FD HOST_PID [MODULE ...]``."""
    import selectors

    args = list(sys.argv[1:] if argv is None else argv)
    control_fd, host_pid, preload = int(args[0]), int(args[1]), args[2:] or list(PRELOAD)
    from lab.lease import die_with_parent

    die_with_parent(host_pid, watch=False)  # no thread in a process that forks: the loop below watches
    control = socket.socket(fileno=control_fd)
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception:  # a module that cannot load here loads in the child (and says why there)
            pass
    # children reaped as they end; the wake-up byte makes the loop look
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the host's terminal is not ours to obey
    children: set[int] = set()
    sys.stdout.flush()
    sys.stderr.flush()
    gc.collect()
    gc.freeze()  # the imported heap stays shared with the children (no copy on write by the collector)
    zygote_pid = os.getpid()
    sel = selectors.DefaultSelector()
    sel.register(control, selectors.EVENT_READ, "control")
    sel.register(wake_r, selectors.EVENT_READ, "wake")
    _send(control, {"ready": zygote_pid})
    try:
        while True:
            if os.getppid() != host_pid:  # the host is gone (where PR_SET_PDEATHSIG is not)
                return 1
            for key, _ in sel.select(timeout=1.0):
                if key.data == "wake":
                    os.read(wake_r, 4096)
                    _reap(control, children)
                    continue
                fds = array.array("i")
                try:
                    data, anc, _flags, _addr = control.recvmsg(_MAX_MSG, socket.CMSG_SPACE(3 * fds.itemsize))
                except InterruptedError:
                    continue
                if not data:  # the host closed its end (or died): nobody to serve
                    return 0
                for level, kind, raw in anc:
                    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                        fds.frombytes(raw[:len(raw) - len(raw) % fds.itemsize])
                try:
                    req = json.loads(data)
                except ValueError:
                    req = {}
                if len(fds) != 3 or "entry" not in req:
                    for fd in fds:
                        os.close(fd)
                    _send(control, {"id": req.get("id"), "error": "a request needs an entry and three pipes"})
                    continue
                pid = os.fork()
                if pid == 0:
                    sel.close()
                    os.close(wake_r)
                    os.close(wake_w)
                    _run_child(control, list(fds), req, zygote_pid, host_pid)
                children.add(pid)
                for fd in fds:
                    os.close(fd)
                _send(control, {"id": req.get("id"), "pid": pid})
                _reap(control, children)
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _reap(control: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        code = os.waitstatus_to_exitcode(status)
        _send(control, {"exit": pid, "code": code})


# ---------------------------------------------------------------------------------------
# the host's side
# ---------------------------------------------------------------------------------------
class ZygoteProcess:
    """A child of the zygote as the host sees it: the parts of ``asyncio.subprocess.Process``
    textual-serve uses (``stdin``, ``stdout``, ``stderr``, ``pid``, ``returncode``, ``wait``,
    ``kill``, ``terminate``)."""

    def __init__(self, pid: int, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader,
                 stderr: asyncio.StreamReader, done: asyncio.Future) -> None:
        self.pid = pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self._done = done

    @property
    def returncode(self) -> int | None:
        return self._done.result() if self._done.done() else None

    async def wait(self) -> int:
        return await asyncio.shield(self._done)

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except OSError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class Zygote:
    """The host's handle on one zygote process (start it once, ``spawn`` per participant)."""

    def __init__(self, env: dict[str, str], preload: Sequence[str] = PRELOAD) -> None:
        self.env = dict(env)
        self.preload = list(preload)
        self.pid: int | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._sock: socket.socket | None = None
        self._ready: asyncio.Future | None = None
        self._pending: dict[int, asyncio.Future] = {}
        self._exits: dict[int, asyncio.Future] = {}
        self._early: dict[int, int] = {}  # exits reported before the spawn's answer was read
        self._next = 0
        self.spawned = 0

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None and self._sock is not None

    async def start(self, timeout: float = 120.0) -> None:
        loop = asyncio.get_running_loop()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "calbench_tui.zygote", str(theirs.fileno()), str(os.getpid()), *self.preload,
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=None,
                pass_fds=(theirs.fileno(),), env=self.env, start_new_session=True)
        finally:
            theirs.close()
        mine.setblocking(False)
        self._sock = mine
        self._ready = loop.create_future()
        loop.add_reader(mine.fileno(), self._on_readable)
        try:
            async with asyncio.timeout(timeout):
                self.pid = await self._ready
        except BaseException:
            await self.stop()
            raise

    def _on_readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        while True:
            try:
                data = sock.recv(_MAX_MSG)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._lost()
                return
            try:
                msg = json.loads(data)
            except ValueError:
                continue
            if "ready" in msg and self._ready is not None and not self._ready.done():
                self._ready.set_result(int(msg["ready"]))
            elif "exit" in msg:
                pid, code = int(msg["exit"]), int(msg["code"])
                fut = self._exits.pop(pid, None)
                if fut is None:
                    self._early[pid] = code
                elif not fut.done():
                    fut.set_result(code)
            elif "id" in msg:
                fut = self._pending.pop(msg["id"], None)
                if fut is not None and not fut.done():
                    if "pid" in msg:
                        fut.set_result(int(msg["pid"]))
                    else:
                        fut.set_exception(OSError(msg.get("error") or "the zygote refused"))

    def _lost(self) -> None:
        """The zygote is gone: every child it had is gone with it."""
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                asyncio.get_running_loop().remove_reader(sock.fileno())
            except (RuntimeError, ValueError):
                pass
            sock.close()
        err = OSError("the app launcher stopped")
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(err)
        for fut in self._exits.values():
            if not fut.done():
                fut.set_result(-signal.SIGKILL)
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(err)
        self._pending.clear()
        self._exits.clear()

    async def spawn(self, entry: str, argv: Sequence[str], env: dict[str, str], cwd: str | None = None) -> ZygoteProcess:
        """A new app process running ``entry(argv)`` with ``env``; its pipes as asyncio streams."""
        if not self.alive:
            raise OSError("the app launcher is not running")
        loop = asyncio.get_running_loop()
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self._next += 1
        rid = self._next
        fut = self._pending[rid] = loop.create_future()
        msg = json.dumps({"id": rid, "entry": entry, "argv": list(argv), "env": env, "cwd": cwd or os.getcwd()})
        try:
            fds = array.array("i", [in_r, out_w, err_w])
            self._sock.sendmsg([msg.encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        except BaseException:
            self._pending.pop(rid, None)
            for fd in (in_r, in_w, out_r, out_w, err_r, err_w):
                os.close(fd)
            raise
        finally:
            for fd in (in_r, out_w, err_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
        try:
            pid = await fut
        except BaseException:
            for fd in (in_w, out_r, err_r):
                os.close(fd)
            raise
        done = loop.create_future()
        if pid in self._early:
            done.set_result(self._early.pop(pid))
        else:
            self._exits[pid] = done
        self.spawned += 1
        stdout = asyncio.StreamReader(limit=2 ** 24)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdout), os.fdopen(out_r, "rb", 0))
        stderr = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stderr), os.fdopen(err_r, "rb", 0))
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), os.fdopen(in_w, "wb", 0))
        stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        return ZygoteProcess(pid, stdin, stdout, stderr, done)

    async def stop(self) -> None:
        """Close the control socket (the zygote kills its children and ends), then wait for it."""
        self._lost()
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            async with asyncio.timeout(5):
                await proc.wait()
        except (asyncio.TimeoutError, ProcessLookupError):
            try:
                proc.kill()
            except ProcessLookupError:
                pass
            await proc.wait()


if __name__ == "__main__":  # pragma: no cover - the zygote process itself
    sys.exit(main())
