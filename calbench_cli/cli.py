"""The command line: ``calbench`` (headless tools) and ``calbench-play`` (the terminal app).

Each sub-command lives in its own module under ``calbench_cli/commands/`` and exposes
``register(subparsers)``; this file only wires them up and turns user mistakes into one
clear line and a non-zero exit (never a traceback).  Command modules import their heavy
dependencies (ortools, openai, textual, aiosqlite) inside their handlers, so
``calbench --help`` answers at once.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sqlite3
import sys

from .commands import ArgumentParser, UserError

# Order = order in --help.  Each module registers one or more sub-commands.
COMMAND_MODULES = [
    "scenario",
    "oracle",
    "suite",
    "run",
    "saves",
    "llm",
    "replay",
    "report",
    "rescore",
    "study",
    "serve",
]


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="calbench",
        description="CalBench: schedule meetings across private calendars — humans, LLMs and "
                    "reference protocols — and measure cost, fairness and privacy against an oracle.",
        epilog="Play a seat yourself with 'calbench-play --seat 2'. Each command has its own --help.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(f"calbench_cli.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"calbench_cli.commands.{name}":
                continue  # a command not built yet
            raise
        mod.register(sub)
    return parser


def _resume_hint(args) -> str:
    """For an interrupted ``calbench run``: the full command that picks the suite up again."""
    if getattr(args, "command", None) != "run":
        return ""
    import shlex

    argv = list(sys.argv[1:])
    if "--resume" not in argv:
        argv.append("--resume")
    return "; the games so far are saved. Continue with: " + shlex.join(["calbench", *argv])


def _run(handler, args) -> int:
    try:
        rc = handler(args)
        sys.stdout.flush()  # inside the try: a full disk behind stdout is one line too
        return int(rc or 0)
    except UserError as exc:
        from engine.inputs import printable
        from engine.redact import redact

        print(f"calbench: error: {printable(redact(str(exc)))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("calbench: interrupted" + _resume_hint(args), file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except (OSError, sqlite3.Error) as exc:
        line = _environment_error(exc)
        if line is None:
            raise
        _quiet_stdout()
        print(f"calbench: error: {line}{_resume_hint(args)}", file=sys.stderr)
        return 1


#: errors of the machine, not of CalBench: a full disk, a quota, a file-size limit, a
#: read-only file system (issue 24 item 13: one line, not a traceback)
_FULL = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
         errno.EFBIG: "a file grew past the size this system allows", errno.EROFS: "the file system is read-only"}


def _environment_error(exc: BaseException) -> str | None:
    """One line for a full disk (or its kin) met anywhere, else None (a real bug keeps its
    traceback)."""
    if isinstance(exc, OSError) and exc.errno in _FULL:
        where = f" writing {exc.filename}" if exc.filename else ""
        return f"{_FULL[exc.errno]} ({exc.strerror}{where}); free some space and try again"
    if isinstance(exc, sqlite3.Error):
        text = str(exc)
        if "disk is full" in text or "disk I/O error" in text or "readonly database" in text:
            return f"the save database could not be written ({text}); free some space and try again"
    return None


def _quiet_stdout() -> None:
    """Send what is still buffered for standard output nowhere: a full disk behind stdout
    would otherwise add Python's 'Exception ignored' lines at exit."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):
        pass


def _command_parser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser:
    """The parser of subcommand ``name`` (the top parser when there is none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return action.choices[name]
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's own parser, with its usage ("run ... --sahrd" showed the top one)
        _command_parser(parser, getattr(args, "command", None)).error(
            f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "handler", None):
        parser.print_help()
        return 0
    return _run(args.handler, args)


def play_main(argv: list[str] | None = None) -> int:
    from .commands import play

    parser = play.build_parser()
    args = parser.parse_args(play.code_argv(sys.argv[1:] if argv is None else argv))
    return _run(play.handle, args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
