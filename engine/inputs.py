"""Reading files a user hands us, within bounds (issue 24, items 8, 11, 13, 15, 17).

Every file CalBench reads on a user's say-so — study, suite, prices, personas and keys
files, task files, traces — goes through :func:`read_text`, and every TOML, YAML or JSON
text through :func:`loads_toml`, :func:`loads_yaml` or :func:`check_nesting`.  What they
guarantee, each as one plain sentence naming the limit (never a traceback, a hang or an
unbounded allocation):

* only a regular file is read: a FIFO (which would block for ever), ``/dev/zero`` (which
  never ends), a directory or a socket is refused before a byte is read;
* at most ``limit`` bytes are read (:data:`MAX_CONFIG_BYTES` for settings files,
  :data:`MAX_DATA_BYTES` for task files and traces); a longer file is refused;
* the text is UTF-8 (the byte offset of the first bad byte is named);
* a document nests at most :data:`MAX_NESTING` levels (lists and tables/objects);
* a YAML document expands to at most :data:`MAX_YAML_NODES` nodes once its aliases are
  followed (a "billion laughs" file is a few hundred bytes);
* an id (task, game, participant, study) has at most :data:`MAX_ID_CHARS` characters.

:func:`printable` is the one helper that makes a text safe for a terminal: control
characters (escape sequences, carriage returns, bells, ...) are dropped and long ids are
elided in the middle.  It lives in the engine because every layer prints ids and labels.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_CONFIG_BYTES", "MAX_DATA_BYTES", "MAX_NESTING", "MAX_YAML_NODES", "MAX_ID_CHARS", "InputError",
    "read_text", "read_bytes", "non_finite_at", "loads_toml", "loads_yaml", "loads_json", "check_nesting", "nesting_depth", "check_id",
    "printable", "elide",
]

#: Largest settings file (study, suite config, prices, personas, keys): 1 MiB.  Ours are a
#: few kilobytes; the authors' taskgen YAML files are under 10 kB.
MAX_CONFIG_BYTES = 1 << 20
#: Largest task file or trace read: 256 MiB (the authors' full task file is ~3 MB; a trace
#: of a long LLM game a few MB).
MAX_DATA_BYTES = 256 << 20
#: Deepest nesting of lists and tables/objects in any file we read (a trace nests about a
#: dozen levels, a settings file three or four).  The store refuses deeper values too
#: (``engine.tracecheck.MAX_DEPTH`` is this number).
MAX_NESTING = 64
#: Most nodes a YAML document may expand to once its aliases are followed.
MAX_YAML_NODES = 100_000
#: Longest id (task, game, study, participant) accepted from a file or the command line.
MAX_ID_CHARS = 200
#: Ids longer than this are shown elided in the middle when printed.
SHOW_ID_CHARS = 48


class InputError(ValueError):
    """A file or value that is not read, in one sentence naming the limit."""


def _size(n: int) -> str:
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10} KiB"
    return f"{n:,} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_bytes(path: str | os.PathLike, what: str = "file", *, limit: int = MAX_CONFIG_BYTES,
               error: type[Exception] = InputError) -> bytes:
    """The bytes of the regular file ``path``: at most ``limit`` of them.

    The file is opened without blocking (a FIFO with no writer would otherwise block the
    open itself) and checked on the open descriptor, so what is read is what was checked.
    ``OSError`` (missing file, no permission) is left to the caller, who knows how to word
    it; what is refused here raises ``error`` naming ``what``, the path and the limit.
    """
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except OSError:
        raise
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{what} {p} is {_kind(st.st_mode)}, not a regular file; give the path of a file")
    if st.st_size > limit:
        raise error(f"{what} {p} is {_size(st.st_size)}; the limit is {_size(limit)}")
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between the two looks
            raise error(f"{what} {p} is {_kind(st.st_mode)}, not a regular file; give the path of a file")
        chunks: list[bytes] = []
        got = 0
        while got <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:  # it grew while we read it
            raise error(f"{what} {p} is larger than the limit of {_size(limit)}")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike, what: str = "file", *, limit: int = MAX_CONFIG_BYTES,
              error: type[Exception] = InputError) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a leading byte-order mark is dropped)."""
    data = read_bytes(path, what, limit=limit, error=error)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} {os.fspath(path)} is not UTF-8 text (byte {exc.start}: "
                    f"{data[exc.start:exc.start + 1]!r}); save it as UTF-8") from None
    return text.removeprefix("\ufeff")


# -- nesting ---------------------------------------------------------------------------------

def nesting_depth(obj: Any, stop_at: int = MAX_NESTING) -> int:
    """How deep lists and dicts nest in ``obj`` (a scalar is 0), counted level by level
    (no recursion); stops counting once past ``stop_at``."""
    level = [obj] if isinstance(obj, (dict, list, tuple)) else []
    depth = 0
    while level:
        depth += 1
        if depth > stop_at:
            return depth
        below = []
        for v in level:
            for x in (v.values() if isinstance(v, dict) else v):
                if isinstance(x, (dict, list, tuple)):
                    below.append(x)
        level = below
    return depth


def non_finite_at(obj: Any) -> str | None:
    """Where the first NaN or infinite number in ``obj`` is (``metrics.coordination``), or
    None.  JSON has no such numbers; Python's reader accepts ``NaN`` and ``Infinity``."""
    stack: list[tuple[Any, str]] = [(obj, "")]
    while stack:
        v, where = stack.pop()
        if isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")):
                return where or "the top"
        elif isinstance(v, dict):
            stack.extend((x, f"{where}.{k}" if where else str(k)) for k, x in v.items()
                         if isinstance(x, (dict, list, float)))
        elif isinstance(v, list):
            stack.extend((x, f"{where}[{i}]") for i, x in enumerate(v) if isinstance(x, (dict, list, float)))
    return None


def check_nesting(obj: Any, where: str, *, limit: int = MAX_NESTING, error: type[Exception] = InputError) -> Any:
    """``obj`` if it nests at most ``limit`` levels, else ``error``."""
    if nesting_depth(obj, limit) > limit:
        raise error(f"{where} nests lists or tables more than {limit} levels deep (the limit)")
    return obj


def loads_toml(text: str, where: str, *, error: type[Exception] = InputError) -> dict[str, Any]:
    """``tomllib.loads`` with the nesting limit; TOML syntax errors are left to the caller
    (``tomllib.TOMLDecodeError``), who words them for its file."""
    import tomllib

    try:
        doc = tomllib.loads(text)
    except RecursionError:
        raise error(f"{where} nests lists or tables more than {MAX_NESTING} levels deep (the limit)") from None
    return check_nesting(doc, where, error=error)


def loads_json(text: str | bytes, where: str, *, error: type[Exception] = InputError) -> Any:
    """``json.loads`` with the nesting limit; ``json.JSONDecodeError`` is left to the caller."""
    import json

    try:
        doc = json.loads(text)
    except RecursionError:
        raise error(f"{where} nests lists or objects more than {MAX_NESTING} levels deep (the limit)") from None
    return check_nesting(doc, where, error=error)


def loads_yaml(text: str, where: str, *, error: type[Exception] = InputError) -> tuple[Any, Any]:
    """``(node, document)`` of a YAML text read with the safe loader, composed once.

    Refused before anything is built from it: a document that expands to more than
    :data:`MAX_YAML_NODES` nodes when its aliases are followed, or nests deeper than
    :data:`MAX_NESTING`.  ``yaml.YAMLError`` is left to the caller.
    """
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise error(f"{where} nests lists or mappings more than {MAX_NESTING} levels deep (the limit)") from None
        if node is None:
            return None, None
        _check_yaml_node(node, where, error)
        doc = loader.construct_document(node)
    finally:
        loader.dispose()
    return node, doc


def _check_yaml_node(root: Any, where: str, error: type[Exception]) -> None:
    """Count the nodes ``root`` expands to (an alias counts its whole target each time it
    is used) and its depth, without expanding anything."""
    import yaml

    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    # iterative post-order; a node on the current path that is met again is a cycle
    stack: list[tuple[Any, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if isinstance(node, yaml.ScalarNode):
            size[key], depth[key] = 1, 0
            continue
        children = ([c for kv in node.value for c in kv] if isinstance(node, yaml.MappingNode)
                    else list(node.value))
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            if size[key] > MAX_YAML_NODES:
                raise error(f"{where} expands to more than {MAX_YAML_NODES:,} values once its aliases (*name) "
                            "are followed (the limit); write the values out or use fewer aliases")
            if depth[key] > MAX_NESTING:
                raise error(f"{where} nests lists or mappings more than {MAX_NESTING} levels deep (the limit)")
            continue
        if key in size:
            continue
        if key in on_path:
            raise error(f"{where} holds an alias that refers to itself; write the values out")
        on_path.add(key)
        if isinstance(node, yaml.MappingNode):
            _no_key_twice(node, where, error)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)


def _no_key_twice(node: Any, where: str, error: type[Exception]) -> None:
    """A YAML mapping that gives a key twice is refused (PyYAML keeps the last one silently;
    issue 35): one line naming the key and both lines."""
    import yaml

    seen: dict[str, int] = {}
    for k, _ in node.value:
        if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
            line = k.start_mark.line + 1
            if k.value in seen:
                raise error(f"{where} line {line}: {printable(k.value, 48)!r} is given twice (also on line "
                            f"{seen[k.value]}); keep one")
            seen[k.value] = line


# -- ids ---------------------------------------------------------------------------------------

def check_id(value: str, what: str, *, error: type[Exception] = InputError) -> str:
    """``value`` if it is an id of at most :data:`MAX_ID_CHARS` characters without control
    characters, else ``error``."""
    if len(value) > MAX_ID_CHARS:
        raise error(f"{what} has {len(value):,} characters; the limit is {MAX_ID_CHARS}")
    if _CONTROL.search(value):
        raise error(f"{what} {printable(value)!r} holds control characters; use letters, digits, '-' or '_'")
    return value


# -- printing ------------------------------------------------------------------------------------

# C0 and C1 controls and DEL, plus the Unicode format characters that reorder or hide text
# (bidi overrides, zero-width joiners are kept out too: they make two ids look alike).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_CONTROL_KEEP_NL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def elide(text: str, width: int = SHOW_ID_CHARS) -> str:
    """``text`` cut to ``width`` characters with ``…`` in the middle (both ends stay readable)."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    tail = width - 1 - head
    return f"{text[:head]}…{text[len(text) - tail:]}"


def printable(value: Any, width: int | None = None, *, newlines: bool = False) -> str:
    """``str(value)`` safe for a terminal: every control character (escape sequences,
    carriage returns, backspaces, bidi overrides) dropped; with ``width``, elided to that
    many characters.  ``newlines=True`` keeps line breaks (for multi-line texts).  A known
    key goes too (``engine.redact``: a key typed as a model name, ``--agents llm:<key>``)."""
    from .redact import redact

    text = value if isinstance(value, str) else str(value)
    if width is not None and len(text) > 4 * width + 512:  # never scan a megabyte to show 48 characters
        # (a margin, so a key across the cut is still whole when it is redacted)
        text = redact(text[:2 * width + 256])[:2 * width] + "…" + redact(text[-2 * width - 256:])[-2 * width:]
    text = redact((_CONTROL_KEEP_NL if newlines else _CONTROL).sub("", text))
    return elide(text, width) if width is not None else text

