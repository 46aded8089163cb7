"""Task references: one string naming one or more tasks (command line, configs, traces).

Accepted forms:

* ``canonical`` — the 90-task canonical suite; ``canonical:7``, ``canonical:0-44`` and
  comma lists of both (``canonical:0-2,45``);
* ``seed:7`` — ``generate_scenario(7)`` with default arguments;
* ``PATH.jsonl`` — every row of a JSON-lines task file (the authors' or ours);
  ``PATH.jsonl:TASK_ID`` — the row with that ``task_id``; ``PATH.jsonl:3`` — row index 3
  (0-based; when a value is both a task id and an index, the task id wins);
* ``PATH.json`` — one task row, or a trace carrying its task under ``"task"`` (a list of
  rows gives them all).

Loading a file never runs the oracle: the rows carry their own ``optimal`` etc.  A row
without ``calbench.labels`` gets labels hydrated from its ``seed`` (or, without a seed,
its ``task_id``) by :func:`engine.labelbank.assign_labels`; the row itself is unchanged.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import orjson

from engine.labelbank import assign_labels
from engine.model import Task, TaskError

__all__ = ["TaskRefError", "ACCEPTED_FORMS", "resolve_tasks", "load_task_file", "hydrate_labels"]

ACCEPTED_FORMS = (
    "canonical, canonical:N, canonical:A-B, seed:N, PATH.jsonl, PATH.jsonl:TASK_ID, "
    "PATH.jsonl:ROW or PATH.json"
)


class TaskRefError(ValueError):
    """A task reference that names nothing; the message is one line."""


#: A whole number as a reference writes it: ASCII digits only (issue 35: ``seed:-1`` and the
#: full-width ``seed:１２`` were read as seeds).
_DIGITS = re.compile(r"[0-9]+")
#: The largest ``seed:N`` (2^53, as a suite config's seed).
MAX_TASK_SEED = 2 ** 53


def _bad(ref: str, why: str) -> TaskRefError:
    return TaskRefError(f"bad task reference {ref!r}: {why}; expected {ACCEPTED_FORMS}.")


def hydrate_labels(task: Task) -> Task:
    """The task with labels; a row that has none gets them from its seed (or task id)."""
    if task.labels.errands or task.labels.meetings:
        return task
    key: int | str = task.seed if task.seed is not None else task.task_id
    return task.with_labels(assign_labels(task, key))


def _file_row(row: Any, where: str) -> None:
    """What a row of a task file must hold beyond what ``Task.from_row`` reads (issue 35): its
    own ``task_id`` (a non-empty string: reports, claims and resumes are keyed by it), at least
    one meeting, and — when its ``params`` say — as many agents as calendars and finite
    densities from 0 to 1.  The authors' rows hold all of these."""
    if not isinstance(row, dict):
        return  # Task.from_row says what is wrong
    tid = row.get("task_id")
    if "task_id" not in row:
        raise TaskError(f"{where}: the row has no task_id; give every row its own id, e.g. \"task_id\": \"t1\"")
    if not isinstance(tid, str) or not tid.strip():
        raise TaskError(f"{where}: task_id must be a non-empty string, got {json.dumps(tid)[:40]}")
    if isinstance(row.get("meetings"), list) and not row["meetings"]:
        raise TaskError(f"{where}: the task has no meetings; a game plays one round per meeting")
    params = row.get("params")
    if isinstance(params, dict):
        n = params.get("total_agents")
        cals = row.get("calendars")
        if n is not None and isinstance(cals, list) and n != len(cals):
            raise TaskError(f"{where}: params.total_agents is {json.dumps(n)[:20]} but the row has {len(cals)} "
                            "calendars (one per agent)")
        d = params.get("density")  # one for the task, or one per agent
        if d is not None and not all(not isinstance(x, bool) and isinstance(x, (int, float)) and 0 <= x <= 1
                                     for x in (d if isinstance(d, list) else [d])):
            raise TaskError(f"{where}: params.density is {json.dumps(d)[:40]}; a density is a number from 0 to 1 "
                            "(or a list of them, one per agent)")


def _row_task(row: Any, where: str) -> Task:
    try:
        task = Task.from_row(row)
    except TaskError as exc:
        raise TaskError(f"{where}: {exc}") from None
    _file_row(row, where)
    for m in task.meetings:  # a row in a file is played: a meeting is between two or more seats
        if len(m.participants) < 2:
            raise TaskError(f"{where}: meeting {m.id} has {len(m.participants)} participant; a meeting in a task "
                            "file needs two or more")
    return hydrate_labels(task)


def _loads_line(line: str) -> Any:
    """``json.loads``, through orjson when it can (a few times faster, the same values);
    what orjson refuses (NaN, huge integers, bad JSON) goes to json for its answer."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


def load_task_file(path: str | Path, *, unique: bool = True) -> list[Task]:
    """Every task in a ``.jsonl`` file (one row per non-blank line) or a ``.json`` file: at
    least one, and (``unique``) no task id twice — ``suite show`` reads duplicates to report them."""
    tasks = _load_task_file(path)
    if not tasks:
        raise TaskError(f"{path} holds no tasks")
    if unique:
        seen: set[str] = set()
        for t in tasks:
            if t.task_id in seen:
                raise TaskError(f"{path}: task_id {t.task_id!r} is used by more than one row; give each row its "
                                "own id ('calbench suite show' lists them)")
            seen.add(t.task_id)
    return tasks


def _load_task_file(path: str | Path) -> list[Task]:
    from engine.inputs import MAX_DATA_BYTES, check_nesting, loads_json, read_text

    p = Path(path)
    try:
        text = read_text(p, "task file", limit=MAX_DATA_BYTES, error=TaskError)
    except OSError as exc:
        raise TaskError(f"cannot read task file {p}: {exc.strerror or exc}") from None
    if p.suffix == ".json":
        try:
            doc = loads_json(text, str(p), error=TaskError)
        except json.JSONDecodeError as exc:
            raise TaskError(f"{p}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
        except (RecursionError, ValueError) as exc:
            raise TaskError(f"{p}: not a task file ({_why(exc)})") from None
        return _tasks_from_json_doc(doc, p)
    tasks = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = _loads_line(line)
        except json.JSONDecodeError as exc:
            raise TaskError(f"{p} line {lineno}: not valid JSON ({exc.msg})") from None
        except (RecursionError, ValueError) as exc:
            raise TaskError(f"{p} line {lineno}: not a task row ({_why(exc)})") from None
        check_nesting(row, f"{p} line {lineno}", error=TaskError)
        tasks.append(_row_task(row, f"{p} line {lineno}"))
    return tasks


def _why(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "the JSON is nested far too deep"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _tasks_from_json_doc(doc: Any, p: Path) -> list[Task]:
    if isinstance(doc, list):
        return [_row_task(row, f"{p} item {k}") for k, row in enumerate(doc)]
    if isinstance(doc, dict):
        if isinstance(doc.get("task"), dict):
            return [_row_task(doc["task"], f"{p} (trace task)")]
        if "calendars" in doc:
            return [_row_task(doc, str(p))]
        if "events" in doc:
            tid = (doc.get("config") or {}).get("task_id")
            hint = f" (its config names task_id {tid!r}: load it as TASKFILE.jsonl:{tid})" if tid else ""
            raise TaskError(f"{p} is a trace without a 'task' key{hint}")
    raise TaskError(f"{p} holds neither a task row (with 'calendars') nor a trace with a 'task' key")


def _canonical(ref: str, spec: str) -> list[Task]:
    from engine.suite import CANONICAL_SIZE, canonical_task

    ids: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        lo_s, sep, hi_s = part.partition("-")
        if not _DIGITS.fullmatch(lo_s) or (sep and not _DIGITS.fullmatch(hi_s)):
            raise _bad(ref, f"{part!r} is not a task number or range")
        lo = int(lo_s)
        hi = int(hi_s) if sep else lo
        if lo > hi:
            raise _bad(ref, f"range {part!r} runs backwards")
        if hi >= CANONICAL_SIZE:
            raise _bad(ref, f"canonical ids are 0-{CANONICAL_SIZE - 1}, got {hi}")
        ids.extend(range(lo, hi + 1))
    return [canonical_task(i) for i in ids]


def _select(ref: str, tasks: list[Task], path: Path, sel: str) -> list[Task]:
    by_id = [t for t in tasks if t.task_id == sel]
    if by_id:
        return by_id
    if _DIGITS.fullmatch(sel):
        k = int(sel)
        if k < len(tasks):
            return [tasks[k]]
        raise _bad(ref, f"{path} has {len(tasks)} rows, so no row {k}, and no task has id {sel!r}")
    raise _bad(ref, f"no task in {path} has id {sel!r}")


def resolve_tasks(ref: str) -> list[Task]:
    """The tasks a reference names (see the module docstring), in order."""
    if not isinstance(ref, str) or not ref.strip():
        raise _bad(str(ref), "it is empty")
    ref = ref.strip()
    if ref == "canonical":
        from engine.suite import canonical_suite

        return canonical_suite()
    if ref.startswith("canonical:"):
        return _canonical(ref, ref[len("canonical:"):])
    if ref.startswith("seed:"):
        raw = ref[len("seed:"):].strip()
        if not _DIGITS.fullmatch(raw):  # int() also reads "-1", "+1", "1_0" and full-width "１"
            why = ("a seed is 0 or more" if _DIGITS.fullmatch(raw.lstrip("-")) else
                   "write it in the digits 0-9" if raw.isdigit() else "it is not a whole number")
            raise _bad(ref, f"seed {raw!r}: {why}")
        seed = int(raw)
        if seed > MAX_TASK_SEED:
            raise _bad(ref, f"seed {raw}: the largest seed is {MAX_TASK_SEED:,} (2^53)")
        from engine.generate import generate_scenario

        return [generate_scenario(seed)]
    whole = Path(ref)
    if whole.is_file() or (whole.suffix in (".jsonl", ".json") and whole.exists()):  # a FIFO: refused by name
        if whole.suffix not in (".jsonl", ".json"):
            raise _bad(ref, "a task file must end in .jsonl or .json")
        return load_task_file(whole)
    if ":" in ref:
        path_s, sel = ref.rsplit(":", 1)
        path = Path(path_s)
        if path.is_file():
            if path.suffix != ".jsonl":
                raise _bad(ref, "only a .jsonl file takes a :TASK_ID or :ROW selector")
            if not sel:
                raise _bad(ref, "the selector after ':' is empty")
            return _select(ref, load_task_file(path), path, sel)
        if path.suffix in (".jsonl", ".json"):
            raise _bad(ref, f"no such file {path_s!r}")
    if whole.suffix in (".jsonl", ".json"):
        raise _bad(ref, f"no such file {ref!r}")
    raise _bad(ref, "it is not a suite, a seed or an existing task file")
