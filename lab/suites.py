"""Custom suites on every core: generate one from a config, inspect a task file.

The work itself is the pure functions of :mod:`engine.suitegen`; this module only
decides where they run.  Candidates are scored in chunks on a process pool, gathered by
``(cell, candidate)`` and bucketed in the parent; the chosen rows are built on the pool
and written in plan order.  The task file is therefore byte-identical for any number of
workers (``workers=1`` runs everything in this process, with no pool at all).

Workers come from a ``forkserver`` context where the platform has one (else
``spawn``): a pool is never forked from a process whose progress bar runs a thread.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from engine import suitegen
from engine.model import Task
from engine.suitegen import BUCKETS, Candidate, SuiteConfig

__all__ = ["GeneratedSuite", "ProgressFn", "SuiteFileError", "default_workers", "generate_suite", "inspect_suite",
           "generate_suite_files", "load_suite_file", "suite_outputs", "check_workers"]

#: ``progress(phase, done, total)``; phases: "scoring", "building", "checking".
ProgressFn = Callable[[str, int, int], None]
#: Below this many items per worker a pool costs more than it saves (starting one takes
#: 0.3-0.7 s; a candidate takes 2-5 ms), so the work stays in this process.
MIN_PER_WORKER = 100


def default_workers() -> int:
    """All cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class GeneratedSuite:
    config: SuiteConfig
    rows: list[dict[str, Any]]
    text: str  # the .jsonl file's content
    summary: dict[str, Any]
    seconds: float
    workers: int


# ---------------------------------------------------------------------------------
# Worker entry points (module level: they are pickled by name)
# ---------------------------------------------------------------------------------
def _score_chunk(config: SuiteConfig, items: Sequence[tuple[int, int]]) -> list[Candidate]:
    return [suitegen.score_candidate(config, c, j) for c, j in items]


def _build_chunk(config: SuiteConfig, items: Sequence[tuple[str, str, Candidate]]) -> list[dict[str, Any]]:
    return [suitegen.build_row(config, tid, bucket, cand) for tid, bucket, cand in items]


def _check_chunk(_config: None, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [suitegen.check_row(Task.from_row(r)) for r in rows]


def _executor(workers: int) -> ProcessPoolExecutor:
    import multiprocessing as mp

    methods = mp.get_all_start_methods()
    if "forkserver" in methods:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["engine.suitegen", "engine.oracle", "engine.generate"])
    else:  # pragma: no cover - Windows
        ctx = mp.get_context("spawn")
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx)


def _chunks(items: Sequence[Any], workers: int, largest: int) -> list[list[Any]]:
    """About eight chunks per worker (so the bar moves and the load evens out)."""
    if not items:
        return []
    size = max(1, min(largest, math.ceil(len(items) / (workers * 8))))
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def _run(fn, config: Any, chunks: list[list[Any]], pool: ProcessPoolExecutor | None,
         progress: ProgressFn | None, phase: str) -> list[Any]:
    """``fn(config, chunk)`` for every chunk; the results flattened in chunk order."""
    total = sum(len(c) for c in chunks)
    done = 0
    if progress:
        progress(phase, 0, total)
    results: list[list[Any] | None] = [None] * len(chunks)
    if pool is None:
        for i, ch in enumerate(chunks):
            results[i] = fn(config, ch)
            done += len(ch)
            if progress:
                progress(phase, done, total)
    else:
        pending = {pool.submit(fn, config, ch): i for i, ch in enumerate(chunks)}
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    i = pending.pop(fut)
                    results[i] = fut.result()
                    done += len(chunks[i])
                    if progress:
                        progress(phase, done, total)
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise
    return [x for r in results for x in (r or [])]


# ---------------------------------------------------------------------------------
# Generate
# ---------------------------------------------------------------------------------
def generate_suite(config: SuiteConfig, *, workers: int | None = None,
                   progress: ProgressFn | None = None, min_per_worker: int = MIN_PER_WORKER) -> GeneratedSuite:
    """Score every candidate, bucket each cell, select, build the rows.

    ``workers`` processes (default: every core) share the work when there are at least
    ``min_per_worker`` candidates per worker; the file is the same either way.

    Raises :class:`engine.suitegen.SuiteGenerationError` when a cell cannot fill its
    buckets (too few usable candidates).
    """
    t0 = time.perf_counter()
    workers = default_workers() if workers is None else max(1, int(workers))
    items = [(c, j) for c in range(len(config.cells)) for j in range(config.candidates)]
    if len(items) < workers * min_per_worker:
        workers = max(1, min(workers, len(items) // max(1, min_per_worker)))
    pool = _executor(workers) if workers > 1 else None
    try:
        scored = _run(_score_chunk, config, _chunks(items, workers, 64), pool, progress, "scoring")
        per_cell: list[list[Candidate]] = [[] for _ in config.cells]
        for cand in scored:
            per_cell[cand.cell].append(cand)
        selections = [suitegen.select_candidates(cands, config.scorer, config.per_bucket, cell.code)
                      for cell, cands in zip(config.cells, per_cell)]
        plan = suitegen.plan_rows(config, selections)
        jobs = [(tid, bucket, cand) for tid, bucket, _k, cand in plan]
        rows = _run(_build_chunk, config, _chunks(jobs, workers, 8), pool, progress, "building")
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    seconds = time.perf_counter() - t0
    text = suitegen.rows_to_jsonl(rows)
    picks_by_cell: list[list[tuple[str, str, int, Candidate]]] = [[] for _ in config.cells]
    for p in plan:
        picks_by_cell[p[3].cell].append(p)
    summary = {
        "name": config.name,
        "generator": suitegen.SUITEGEN_VERSION,
        "suite_version": config.suite_version,
        "config_digest": config.digest,
        "source": config.source,
        **({"description": config.description} if config.description else {}),
        "config": config.to_json(),
        "tasks": len(rows),
        "candidates": len(scored),
        "workers": workers,
        "seconds": round(seconds, 3),
        "tasks_per_second": round(len(rows) / seconds, 2) if seconds > 0 else None,
        "candidates_per_second": round(len(scored) / seconds, 1) if seconds > 0 else None,
        "cells": [suitegen.cell_summary(config, cell, cands, picks)
                  for cell, cands, picks in zip(config.cells, per_cell, picks_by_cell)],
    }
    return GeneratedSuite(config, rows, text, summary, seconds, workers)


# ---------------------------------------------------------------------------------
# Inspect (ours or the authors')
# ---------------------------------------------------------------------------------
def inspect_suite(tasks: Sequence[Task], *, workers: int | None = None,
                  progress: ProgressFn | None = None, min_per_worker: int = MIN_PER_WORKER) -> dict[str, Any]:
    """Counts by cell and bucket, distributions, and the checks of ``calbench suite show``.

    Every row is re-solved (oracle cost and feasible fraction); ``checks`` lists what
    fails: a row whose optimum disagrees with ours (a binding errand-capacity constraint
    is reported as explained, not failed), ids used twice, a cell whose buckets are not
    the same size.
    """
    workers = default_workers() if workers is None else max(1, int(workers))
    rows = [t.to_row() for t in tasks]
    if len(rows) < workers * min_per_worker:
        workers = max(1, min(workers, len(rows) // max(1, min_per_worker)))
    pool = _executor(workers) if workers > 1 else None
    try:
        checked = _run(_check_chunk, None, _chunks(rows, workers, 32), pool, progress, "checking")
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    cells: dict[str, dict[str, int]] = {}
    for t in tasks:
        b = str(t.row.get("difficulty") or "none")
        counts = cells.setdefault(suitegen.row_cell(t), {})
        counts[b] = counts.get(b, 0) + 1
    seen: dict[str, int] = {}
    for t in tasks:
        seen[t.task_id] = seen.get(t.task_id, 0) + 1
    duplicates = sorted(k for k, n in seen.items() if n > 1)
    unbalanced = []
    for cell, counts in cells.items():
        wanted = [counts.get(b, 0) for b in BUCKETS]
        if len(set(wanted)) > 1 or set(counts) - set(BUCKETS):
            unbalanced.append(cell)
    status: dict[str, int] = {}
    for c in checked:
        status[c["status"]] = status.get(c["status"], 0) + 1
    disagree = [c for c in checked if c["status"] == "disagree"]
    scorers = sorted({str(t.row.get("difficulty_scorer") or
                          ((t.row.get("calbench") or {}).get("suite") or {}).get("scorer") or "unstated")
                      for t in tasks})
    file_scores = [t.row["difficulty_score"] for t in tasks
                   if isinstance(t.row.get("difficulty_score"), (int, float))]
    return {
        "tasks": len(tasks),
        "cells": {cell: {b: counts.get(b, 0) for b in (*BUCKETS, *sorted(set(counts) - set(BUCKETS)))}
                  for cell, counts in cells.items()},
        "feasible_fraction": suitegen.distribution([c["feasible_fraction"] for c in checked]),
        "optimal_cost": suitegen.distribution([c["optimal_cost"] for c in checked if c["optimal_cost"] is not None]),
        "difficulty_scorer": scorers,
        "difficulty_score": suitegen.distribution(file_scores),
        "oracle": status,
        "checks": {
            "oracle_agrees": not disagree,
            "unique_ids": not duplicates,
            "balanced_buckets": not unbalanced,
        },
        "disagreements": disagree,
        "explained": [c for c in checked if c["status"] == "explained"],
        "duplicate_ids": duplicates,
        "unbalanced_cells": unbalanced,
        "rows": checked,
    }


# ---------------------------------------------------------------------------------
# Files: what ``calbench suite generate`` / ``show`` read and write
# ---------------------------------------------------------------------------------
class SuiteFileError(ValueError):
    """A suite file (config, task file, output, summary) that cannot be used; one line."""


def check_workers(n: int | None) -> int | None:
    """``--workers``: None (every core) or 1 or more."""
    if n is not None and n < 1:
        raise SuiteFileError(f"--workers {n}: give 1 or more processes")
    return n


def _check_output(path: Path, what: str) -> None:
    if path.is_dir():
        raise SuiteFileError(f"{what} {path} is a directory; give a file name")
    if not path.parent.is_dir():
        raise SuiteFileError(f"{what} {path}: the directory {path.parent} does not exist")


def _make_folders(*paths: Path | None) -> None:
    for path in paths:
        if path is not None and not path.parent.exists():
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise SuiteFileError(f"cannot make the folder {path.parent}: {exc.strerror or exc}") from None


def _inside(path: Path, folder: Path, key: str) -> None:
    """A taskgen config's ``output`` / ``summary_output`` stays inside the config's folder
    (issue 35, 2): a config someone hands you may not write ``../victim/tasks.jsonl`` or an
    absolute path."""
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        raise SuiteFileError(f"the config's {key} {path} is outside the config's folder {folder}; give a path "
                             "inside it, or name the file with -o / --summary") from None


def _no_overwrite(path: Path, what: str, force: bool) -> None:
    if path.exists() and not force:
        raise SuiteFileError(f"{what} {path} exists; add --force to replace it")


def suite_outputs(config: SuiteConfig, config_path: str, *, output: str | None = None,
                  summary: str | None = None, force: bool = False) -> tuple[Path, Path | None]:
    """Where a generated suite's rows (``.jsonl``) and summary (``.json``, or None) go: ``-o`` /
    ``--summary``, else a taskgen config's own ``output`` / ``summary_output`` (relative to
    the config file and inside its folder; their folders made if missing, as the authors'
    generator does).  An existing file is replaced only with ``force`` (``--force``)."""
    folder = Path(config_path).parent
    if output is not None:
        out = Path(output)
        if out.suffix != ".jsonl":
            raise SuiteFileError(f"-o {out}: a task file ends in .jsonl")
    elif config.output is not None:
        out = Path(config.output)
        _inside(out, folder, "output")
    else:
        raise SuiteFileError("-o FILE.jsonl is needed: this config names no output file")
    if summary is None and output is None and config.summary_output:
        summary = config.summary_output
        _inside(Path(summary), folder, "summary_output")
    if output is None:
        _make_folders(out, Path(summary) if summary else None)
    _check_output(out, "-o")
    summary_path = Path(summary) if summary else None
    if summary_path is not None:
        if summary_path.suffix != ".json":
            raise SuiteFileError(f"--summary {summary_path}: the summary is a .json file")
        _check_output(summary_path, "--summary")
    if Path(config_path).resolve() in {out.resolve(), *([summary_path.resolve()] if summary_path else [])}:
        raise SuiteFileError("the output would overwrite the config; give another file name")
    _no_overwrite(out, "the output" if output is None else "-o", force)
    if summary_path is not None:
        _no_overwrite(summary_path, "the summary", force)
    return out, summary_path


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it (never half a file)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise SuiteFileError(f"cannot write {path}: {exc.strerror or exc}") from None


def generate_suite_files(config_path: str, *, output: str | None = None, summary: str | None = None,
                         workers: int | None = None, force: bool = False,
                         progress: ProgressFn | None = None) -> tuple[dict[str, Any], Path | None]:
    """``calbench suite generate``: read the config, generate the suite, write the task file
    (and the summary); returns the summary (with ``output``) and where it was written (or None).
    Raises ``SuiteConfigError``, ``SuiteGenerationError`` or :class:`SuiteFileError` (one line each)."""
    import json

    config = suitegen.load_config(config_path)
    out, summary_path = suite_outputs(config, config_path, output=output, summary=summary, force=force)
    result = generate_suite(config, workers=check_workers(workers), progress=progress)
    write_atomic(out, result.text)
    doc = {**result.summary, "output": str(out)}
    if summary_path is not None:
        write_atomic(summary_path, json.dumps(doc, indent=2) + "\n")
    return doc, summary_path


def load_suite_file(raw: str) -> list[Task]:
    """The tasks of a task file for ``calbench suite show`` (ours or the authors')."""
    from engine.model import TaskError
    from engine.taskref import load_task_file

    path = Path(raw)
    if not raw.strip():
        raise SuiteFileError("suite show needs a task file, e.g. calbench suite show study.jsonl")
    if path.is_dir():
        raise SuiteFileError(f"{path} is a folder; give a task file (.jsonl) in it")
    if not path.exists() and not path.is_symlink():
        raise SuiteFileError(f"no such file {path}")
    try:  # a FIFO, a device or a socket is refused by the reader, by what it is (engine.inputs)
        tasks = load_task_file(path, unique=False)  # duplicate ids are one of the checks show reports
    except TaskError as exc:
        raise SuiteFileError(str(exc)) from None
    if not tasks:
        raise SuiteFileError(f"{path} holds no tasks")
    return tasks
