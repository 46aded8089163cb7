"""Custom suites: a grid of settings, candidates per cell, difficulty buckets (pure).

A *suite config* names a grid of settings.  Every combination of its values is a
*cell*; each cell gets ``candidates`` scenarios from consecutive seeds, each candidate is
*scored* (feasible fraction, oracle cost, greedy cost), the cell's candidates are cut
into difficulty tertiles (``easy`` / ``medium`` / ``hard``) and ``per_bucket`` tasks are
*selected* from each tertile.  Everything here is a pure function of the config: the
parallel driver (:mod:`lab.suites`) only decides where the functions run, so the task
file is byte-identical whatever the number of processes.

Two config formats load into one :class:`SuiteConfig`:

* **TOML** (ours, strict)::

      name = "my-study"
      seed = 5000            # first seed of the suite
      candidates = 300       # per cell
      per_bucket = 4         # tasks kept per tertile
      scorer = "feasible_fraction"

      [[grid]]               # one or more; every key takes one value or a list
      agents = 5
      participants = 3
      slots = 16
      meetings = 5
      density = [0.6, 0.8, 1.0]
      blocked = 0
      cost = "uniform"       # "uniform" | "varied" (or both, as a list)
      cost_values = [1, 10, 100]   # the shown values of a varied cell

* **the authors' taskgen YAML**, as it is: ``setting_name``, ``seed_base``,
  ``candidates_per_config``, ``selected_per_bucket`` and ``configs``, a list whose
  entries hold ``total_agents``, ``subset_size`` or ``subset_sizes``, ``num_slots``,
  ``num_meetings``, ``densities``, ``pref_level`` or ``pref_levels``,
  ``meeting_cost_level``, ``errand_cost_level`` and ``errand_cost_values``.

Cells are numbered in config order, each entry expanded with density innermost
(agents, participants, slots, meetings, cost, blocked, density).  Candidate ``j`` of
cell ``c`` uses seed ``seed + c·stride + j`` (``stride`` = 1000, or the next multiple of
1000 above ``candidates``): the layout of the seeds in the authors' task files.

A config mistake raises :class:`SuiteConfigError`: one line naming the field, the line
of the file where it can be found, and what to write instead.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import time
from dataclasses import dataclass, field, replace
from itertools import product
from pathlib import Path
from typing import Any, Callable, Sequence

from engine.model import COST_MODES, Task, TaskError

__all__ = [
    "SUITEGEN_VERSION",
    "SCORERS",
    "SCORER_ALIASES",
    "BUCKETS",
    "SuiteConfigError",
    "SuiteGenerationError",
    "Cell",
    "SuiteConfig",
    "Candidate",
    "load_config",
    "parse_config",
    "score_candidate",
    "bucket_candidates",
    "select_candidates",
    "build_row",
    "plan_rows",
    "cell_summary",
    "rows_to_jsonl",
    "distribution",
    "text_histogram",
    "row_cell",
    "check_row",
]

#: Stored in every row (``calbench.suite_version``); bump when generation changes.
SUITEGEN_VERSION = "suitegen-1"
#: ``feasible_fraction``: SPEC §3's ``d`` (higher is easier), the default;
#: ``optimal_cost_per_participant_slot``: oracle cost / (meetings x participants) (higher
#: is harder), the scorer named in the authors' uniform task file.
SCORERS = ("feasible_fraction", "optimal_cost_per_participant_slot")
#: Other names of our scorers: the authors' taskgen calls the feasible fraction
#: ``cp_sat_solvable_assignment_fraction`` (the same quantity, counted exactly here).
SCORER_ALIASES = {"cp_sat_solvable_assignment_fraction": "feasible_fraction"}
BUCKETS = ("easy", "medium", "hard")
SEED_BLOCK = 1000
DEFAULT_VARIED = (1, 10, 100)


class SuiteConfigError(ValueError):
    """A config mistake; the message is one line naming the field (and its line)."""


class SuiteGenerationError(RuntimeError):
    """The config is well formed but a cell cannot fill its buckets."""


# ---------------------------------------------------------------------------------
# The config model
# ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One combination of settings; ``code`` names it in task ids (``5a_3p_d0p6_c1``)."""

    index: int
    num_agents: int
    participants: int
    num_slots: int
    num_meetings: int
    density: float
    blocked: int
    cost_values: tuple[int, ...]
    origin: str = ""  # the config entry it came from, e.g. "grid[0]" or "configs[2]"
    code: str = ""

    @property
    def cost_mode(self) -> str:
        return "uniform" if len(self.cost_values) == 1 else "varied"

    def generator_args(self) -> dict[str, Any]:
        """Keyword arguments of :func:`engine.generate.generate_scenario` (no seed)."""
        return {
            "num_agents": self.num_agents,
            "num_slots": self.num_slots,
            "num_meetings": self.num_meetings,
            "density": self.density,
            "blocked": self.blocked,
            "cost_mode": self.cost_mode,
            "participants_per_meeting": self.participants,
            "cost_values": list(self.cost_values),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "cell": self.code,
            "agents": self.num_agents,
            "participants": self.participants,
            "slots": self.num_slots,
            "meetings": self.num_meetings,
            "density": self.density,
            "blocked": self.blocked,
            "cost_values": list(self.cost_values),
        }


@dataclass(frozen=True)
class SuiteConfig:
    name: str
    seed_base: int
    candidates: int
    per_bucket: int
    scorer: str
    cells: tuple[Cell, ...]
    source: str = "toml"  # "toml" | "taskgen-yaml" | "dict"
    #: Free text kept in the summary (the taskgen ``description``); decides nothing.
    description: str = ""
    #: Where the taskgen config asks its rows and summary to go (``output``,
    #: ``summary_output``), resolved against the config file's folder; the command uses
    #: them when ``-o`` is not given.  They decide nothing about the tasks.
    output: str | None = None
    summary_output: str | None = None

    @property
    def seed_stride(self) -> int:
        return SEED_BLOCK * max(1, math.ceil(self.candidates / SEED_BLOCK))

    def seed(self, cell: int, candidate: int) -> int:
        return self.seed_base + cell * self.seed_stride + candidate

    @property
    def total_tasks(self) -> int:
        return len(self.cells) * len(BUCKETS) * self.per_bucket

    @property
    def total_candidates(self) -> int:
        return len(self.cells) * self.candidates

    def to_json(self) -> dict[str, Any]:
        """Everything that decides the tasks (the format it was read from does not)."""
        return {
            "generator": SUITEGEN_VERSION,
            "name": self.name,
            "seed": self.seed_base,
            "seed_stride": self.seed_stride,
            "candidates": self.candidates,
            "per_bucket": self.per_bucket,
            "scorer": self.scorer,
            "cells": [c.to_json() for c in self.cells],
        }

    @property
    def digest(self) -> str:
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def suite_version(self) -> str:
        return f"{SUITEGEN_VERSION}:{self.name}:{self.digest[:8]}"


# ---------------------------------------------------------------------------------
# Where a field sits in the file (for error messages)
# ---------------------------------------------------------------------------------
_TOML_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"']+)\s*\]\]?")
_TOML_KEY = re.compile(r"^\s*([A-Za-z0-9_\-]+|\"[^\"]*\"|'[^']*')\s*=")


def _toml_lines(text: str) -> dict[tuple, int]:
    """``(key,)`` / ``(table, index, key)`` / ``(table, index)`` -> 1-based line."""
    out: dict[tuple, int] = {}
    table: tuple = ()
    counts: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("#"):
            continue
        h = _TOML_HEADER.match(line)
        if h:
            name = h.group(2).strip("\"'")
            if h.group(1) == "[[":
                idx = counts.get(name, 0)
                counts[name] = idx + 1
                table = (name, idx)
            else:
                table = (name,)
            out.setdefault(table, n)
            continue
        k = _TOML_KEY.match(line)
        if k:
            out.setdefault((*table, k.group(1).strip("\"'")), n)
    return out


def _yaml_lines(node: Any, path: tuple = (), out: dict | None = None) -> dict[tuple, int]:
    out = {} if out is None else out
    if node is None:
        return out
    out.setdefault(path, node.start_mark.line + 1)
    kind = type(node).__name__
    if kind == "MappingNode":
        for k, v in node.value:
            if type(k).__name__ != "ScalarNode":  # a list or mapping as a key: no path to name
                continue
            key = k.value
            out.setdefault((*path, key), k.start_mark.line + 1)
            _yaml_lines(v, (*path, key), out)
    elif kind == "SequenceNode":
        for i, v in enumerate(node.value):
            _yaml_lines(v, (*path, i), out)
    return out


class _Where:
    """Builds one-line errors: ``FILE: grid[0].density (line 9): <why>``."""

    def __init__(self, source: str, lines: dict[tuple, int]) -> None:
        self.source = source
        self.lines = lines

    def line(self, path: tuple) -> int | None:
        p = path
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return None

    def error(self, path: tuple, why: str) -> SuiteConfigError:
        name = _path_name(path)
        ln = self.line(path)
        where = f"{name} (line {ln})" if ln and name else (name or (f"line {ln}" if ln else ""))
        prefix = f"{self.source}: " if self.source else ""
        msg = f"{prefix}{where}: {why}" if where else f"{prefix}{why}"
        return SuiteConfigError(" ".join(msg.split()))


def _path_name(path: tuple) -> str:
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


# ---------------------------------------------------------------------------------
# Value checks (each names its field)
# ---------------------------------------------------------------------------------
def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int(w: _Where, path: tuple, v: Any, lo: int, hint: str = "", hi: int | None = None) -> int:
    if not _is_int(v) or v < lo:
        shown = repr(v) if len(repr(v)) <= 24 else f"{repr(v)[:20]}…"
        raise w.error(path, f"{shown} must be a whole number, at least {lo}{hint}.")
    if hi is not None and v > hi:
        shown = f"{v:,}" if len(str(v)) <= 24 else f"a {len(str(v))}-digit number"
        raise w.error(path, f"{shown} is more than the limit of {hi:,}{hint}.")
    return v


def _count_cells(w: _Where, path: tuple, axes: Sequence[Sequence[Any]], so_far: int) -> None:
    """Refuse a grid whose settings multiply out to more than :data:`MAX_CELLS` cells,
    before a single cell is built (six axes of 1,000 values would be 10^18 cells)."""
    total = so_far + math.prod(max(1, len(a)) for a in axes)  # lengths only: nothing is built
    if total > MAX_CELLS:
        raise w.error(path, f"the settings make more than {MAX_CELLS:,} cells (the limit); list fewer values.")


def _axis(w: _Where, path: tuple, v: Any, check: Callable[[tuple, Any], Any]) -> list:
    """One value or a non-empty list of distinct values -> the list, each checked."""
    if isinstance(v, list):
        if not v:
            raise w.error(path, "the list is empty; give one value or a list of values.")
        vals = [check((*path, i), x) for i, x in enumerate(v)]
        if len({json.dumps(x) for x in vals}) != len(vals):
            raise w.error(path, f"{v!r} repeats a value; list each value once.")
        return vals
    return [check(path, v)]


def _density(w: _Where, path: tuple, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise w.error(path, f"{v!r} must be a number between 0 and 1 (the share of slots holding errands).")
    return float(v)


def _cost_values(w: _Where, path: tuple, v: Any) -> tuple[int, ...]:
    if not isinstance(v, list) or not v or any(not _is_int(c) or c < 1 for c in v):
        raise w.error(path, f"{v!r} must be a list of positive whole numbers, e.g. [1, 10, 100].")
    if len(set(v)) != len(v):
        raise w.error(path, f"{v!r} repeats a value.")
    return tuple(sorted(v))


def _unknown(w: _Where, path: tuple, raw: dict, known: Sequence[str]) -> None:
    for key in raw:
        if key not in known:
            near = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f"did you mean '{near[0]}'?" if near else f"known keys: {', '.join(known)}."
            raise w.error((*path, key), f"unknown key; {hint}")


def _scorer(w: _Where, path: tuple, v: Any) -> str:
    if isinstance(v, str) and v in SCORER_ALIASES:
        return SCORER_ALIASES[v]
    if v not in SCORERS:
        names = ", ".join((*SCORERS, *SCORER_ALIASES))
        raise w.error(path, f"{v!r} is not a scorer; use one of {names}.")
    return v


def _text(w: _Where, path: tuple, v: Any) -> str:
    if not isinstance(v, str):
        raise w.error(path, f"{v!r} must be text.")
    return " ".join(v.split())


def _out_path(w: _Where, path: tuple, v: Any, suffix: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise w.error(path, f"{v!r} must be a file name ending in {suffix}.")
    if not v.endswith(suffix):
        raise w.error(path, f"{v!r}: this file ends in {suffix}.")
    return v


def _name(w: _Where, path: tuple, v: Any) -> str:
    if not isinstance(v, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}", v):
        raise w.error(path, f"{v!r} must be a short name of letters, digits, '_', '-' or '.', e.g. \"my-study\".")
    return v


# ---------------------------------------------------------------------------------
# TOML (ours)
# ---------------------------------------------------------------------------------
_TOML_TOP = ("name", "seed", "candidates", "per_bucket", "scorer", "grid")
_TOML_GRID = ("agents", "participants", "slots", "meetings", "density", "blocked", "cost", "cost_values")
#: Defaults of a grid entry: those of :func:`engine.generate.generate_scenario`.
_GRID_DEFAULTS = {"agents": 5, "participants": 3, "slots": 16, "meetings": 5, "density": 0.8, "blocked": 4,
                  "cost": "uniform"}
DEFAULT_CANDIDATES = 300
DEFAULT_PER_BUCKET = 4
#: Bounds on what a config may ask for (issue 24 item 8): candidates scored per cell, cells
#: in the grid, candidates over the whole suite, and the first seed (seeds are stored as
#: 64-bit integers and read by other tools as JSON numbers).
MAX_CANDIDATES = 10_000
MAX_CELLS = 1_000
MAX_TOTAL_CANDIDATES = 1_000_000
MAX_SEED = 2 ** 53


@dataclass
class _RawCell:
    origin: tuple
    agents: int
    participants: int
    slots: int
    meetings: int
    density: float
    blocked: int
    cost_values: tuple[int, ...]
    cost_path: tuple = ()
    blocked_path: tuple = ()
    fields: dict = field(default_factory=dict)  # generator argument -> config path


def _parse_toml(doc: dict, w: _Where, default_name: str) -> SuiteConfig:
    _unknown(w, (), doc, _TOML_TOP)
    name = _name(w, ("name",), doc.get("name", default_name))
    seed = _int(w, ("seed",), doc.get("seed", 0), 0, hi=MAX_SEED)
    candidates = _int(w, ("candidates",), doc.get("candidates", DEFAULT_CANDIDATES), 1, hi=MAX_CANDIDATES)
    per_bucket = _int(w, ("per_bucket",), doc.get("per_bucket", DEFAULT_PER_BUCKET), 1, hi=MAX_CANDIDATES)
    scorer = _scorer(w, ("scorer",), doc.get("scorer", SCORERS[0]))
    grid = doc.get("grid")
    if not isinstance(grid, list) or not grid or not all(isinstance(g, dict) for g in grid):
        raise w.error(("grid",), "missing: add at least one [[grid]] table, e.g. [[grid]] agents = 5 density = [0.6, 0.8].")
    raws: list[_RawCell] = []
    for gi, entry in enumerate(grid):
        base = ("grid", gi)
        _unknown(w, base, entry, _TOML_GRID)
        g = {**_GRID_DEFAULTS, **entry}
        agents = _axis(w, (*base, "agents"), g["agents"], lambda p, v: _int(w, p, v, 1))
        parts = _axis(w, (*base, "participants"), g["participants"], lambda p, v: _int(w, p, v, 2))
        slots = _axis(w, (*base, "slots"), g["slots"], lambda p, v: _int(w, p, v, 1))
        meetings = _axis(w, (*base, "meetings"), g["meetings"], lambda p, v: _int(w, p, v, 1))
        densities = _axis(w, (*base, "density"), g["density"], lambda p, v: _density(w, p, v))
        blocked = _axis(w, (*base, "blocked"), g["blocked"], lambda p, v: _int(w, p, v, 0))

        def _mode(p, v):
            if v not in COST_MODES:
                raise w.error(p, f"{v!r} must be \"uniform\" or \"varied\".")
            return v
        modes = _axis(w, (*base, "cost"), g["cost"], _mode)
        varied = DEFAULT_VARIED
        if "cost_values" in entry:
            if "varied" not in modes:
                raise w.error((*base, "cost_values"), "is only used by varied cells; add cost = \"varied\" or remove it.")
            varied = _cost_values(w, (*base, "cost_values"), entry["cost_values"])
            if len(varied) < 2:
                raise w.error((*base, "cost_values"), f"{list(varied)} has one value; a varied cell needs two or more.")
        costs = [(1,) if m == "uniform" else varied for m in modes]
        _count_cells(w, base, (agents, parts, slots, meetings, costs, blocked, densities), len(raws))
        fields = {"num_agents": (*base, "agents"), "participants_per_meeting": (*base, "participants"),
                  "num_slots": (*base, "slots"), "num_meetings": (*base, "meetings"),
                  "density": (*base, "density"), "blocked": (*base, "blocked"),
                  "cost_values": (*base, "cost_values"), "participant": (*base, "participants")}
        for a, p, s, m, c, b, d in product(agents, parts, slots, meetings, costs, blocked, densities):
            raws.append(_RawCell(base, a, p, s, m, d, b, c, (*base, "cost"), (*base, "blocked"), fields))
    return _finish(w, name, seed, candidates, per_bucket, scorer, raws, "toml",
                   ("candidates",), ("per_bucket",))


# ---------------------------------------------------------------------------------
# The authors' taskgen YAML (as it is)
# ---------------------------------------------------------------------------------
_YAML_TOP = ("setting_name", "description", "output", "summary_output", "seed_base", "candidates_per_config",
             "selected_per_bucket", "configs", "difficulty_scorer")
_YAML_CONFIG = ("total_agents", "subset_size", "subset_sizes", "num_slots", "num_meetings", "densities", "density",
                "pref_level", "pref_levels", "meeting_cost_level", "errand_cost_level", "errand_cost_values",
                "blocked")
DEFAULT_TASKGEN_CANDIDATES = 100


def _pref_values(w: _Where, base: tuple, level: int, entry: dict) -> tuple[int, ...]:
    """The shown errand costs of ``pref_level`` = ``level`` (see docs/suites.md).

    Level 1 is uniform (every errand costs 1).  Level k > 1 takes k values spread over
    ``errand_cost_values`` (both ends kept; all of them when k equals its length), or,
    without a list, k values spread over ``1 .. errand_cost_level`` (their generator draws
    errand costs from that range; without ``errand_cost_level`` it is ``1 .. k``).
    """
    top = entry.get("errand_cost_level")
    if top is not None:
        _int(w, (*base, "errand_cost_level"), top, 1)
    if level == 1:
        return (1,)
    if "errand_cost_values" in entry:
        vals = _cost_values(w, (*base, "errand_cost_values"), entry["errand_cost_values"])
        if len(vals) < level:
            raise w.error((*base, "errand_cost_values"),
                          f"{list(vals)} has {len(vals)} values but pref_level {level} needs {level}; list more values.")
        picks = tuple(vals[round(i * (len(vals) - 1) / (level - 1))] for i in range(level))
        if top is not None and top != picks[-1]:
            raise w.error((*base, "errand_cost_level"),
                          f"{top} is not the largest errand cost {picks[-1]} of errand_cost_values; make them agree.")
        return picks
    hi = level if top is None else top
    if hi < level:
        raise w.error((*base, "errand_cost_level"),
                      f"{top} leaves fewer than {level} distinct costs for pref_level {level}; use at least {level} "
                      "or list errand_cost_values.")
    return tuple(sorted({round(1 + i * (hi - 1) / (level - 1)) for i in range(level)}))


def _parse_yaml(doc: Any, w: _Where, default_name: str) -> SuiteConfig:
    if not isinstance(doc, dict):
        raise w.error((), "a taskgen config is a mapping with setting_name, seed_base, ... and configs.")
    _unknown(w, (), doc, _YAML_TOP)
    name = _name(w, ("setting_name",), doc.get("setting_name", default_name))
    seed = _int(w, ("seed_base",), doc.get("seed_base", 0), 0, hi=MAX_SEED)
    candidates = _int(w, ("candidates_per_config",), doc.get("candidates_per_config", DEFAULT_TASKGEN_CANDIDATES), 1,
                      hi=MAX_CANDIDATES)
    per_bucket = _int(w, ("selected_per_bucket",), doc.get("selected_per_bucket", DEFAULT_PER_BUCKET), 1,
                      hi=MAX_CANDIDATES)
    scorer = _scorer(w, ("difficulty_scorer",), doc.get("difficulty_scorer", SCORERS[0]))
    description = _text(w, ("description",), doc["description"]) if "description" in doc else ""
    output = _out_path(w, ("output",), doc["output"], ".jsonl") if "output" in doc else None
    summary_output = (_out_path(w, ("summary_output",), doc["summary_output"], ".json")
                      if "summary_output" in doc else None)
    configs = doc.get("configs")
    if not isinstance(configs, list) or not configs:
        raise w.error(("configs",), "missing or empty: list one or more settings (total_agents, subset_size, ...).")
    raws: list[_RawCell] = []
    for ci, entry in enumerate(configs):
        base = ("configs", ci)
        if not isinstance(entry, dict):
            raise w.error(base, "each entry of configs must be a mapping (total_agents: 5, ...).")
        _unknown(w, base, entry, _YAML_CONFIG)
        for a, b in (("subset_size", "subset_sizes"), ("pref_level", "pref_levels"), ("densities", "density")):
            if a in entry and b in entry:
                raise w.error((*base, b), f"give {a} or {b}, not both.")
        for req in ("total_agents", "num_slots", "num_meetings"):
            if req not in entry:
                raise w.error((*base, req), "missing; every entry of configs needs it.")
        if "subset_size" not in entry and "subset_sizes" not in entry:
            raise w.error((*base, "subset_size"), "missing: participants per meeting (subset_size or subset_sizes).")
        if "densities" not in entry and "density" not in entry:
            raise w.error((*base, "densities"), "missing: a list of errand densities, e.g. [0.6, 0.8, 1.0].")
        agents = _axis(w, (*base, "total_agents"), entry["total_agents"], lambda p, v: _int(w, p, v, 1))
        pkey = "subset_size" if "subset_size" in entry else "subset_sizes"
        parts = _axis(w, (*base, pkey), entry[pkey], lambda p, v: _int(w, p, v, 2))
        slots = _axis(w, (*base, "num_slots"), entry["num_slots"], lambda p, v: _int(w, p, v, 1))
        meetings = _axis(w, (*base, "num_meetings"), entry["num_meetings"], lambda p, v: _int(w, p, v, 1))
        dkey = "densities" if "densities" in entry else "density"
        densities = _axis(w, (*base, dkey), entry[dkey], lambda p, v: _density(w, p, v))
        lkey = "pref_level" if "pref_level" in entry else "pref_levels"
        levels = _axis(w, (*base, lkey), entry.get(lkey, 1), lambda p, v: _int(w, p, v, 1))
        mcl = entry.get("meeting_cost_level", 1)
        if mcl != 1 or isinstance(mcl, bool):
            raise w.error((*base, "meeting_cost_level"),
                          f"{mcl!r}: CalBench meetings cost 1 to move (SPEC §2); use 1 or remove the key.")
        costs = [_pref_values(w, base, lv, entry) for lv in levels]
        blocked = _axis(w, (*base, "blocked"), entry.get("blocked", 0), lambda p, v: _int(w, p, v, 0))
        _count_cells(w, base, (agents, parts, slots, meetings, costs, blocked, densities), len(raws))
        fields = {"num_agents": (*base, "total_agents"), "participants_per_meeting": (*base, pkey),
                  "num_slots": (*base, "num_slots"), "num_meetings": (*base, "num_meetings"),
                  "density": (*base, dkey), "blocked": (*base, "blocked"),
                  "cost_values": (*base, "errand_cost_values"), "participant": (*base, pkey)}
        for a, p, s, m, c, b, d in product(agents, parts, slots, meetings, costs, blocked, densities):
            raws.append(_RawCell(base, a, p, s, m, d, b, c, (*base, lkey), (*base, "blocked"), fields))
    config = _finish(w, name, seed, candidates, per_bucket, scorer, raws, "taskgen-yaml",
                     ("candidates_per_config",), ("selected_per_bucket",))
    return replace(config, description=description, output=output, summary_output=summary_output)


# ---------------------------------------------------------------------------------
# Shared: cell codes, per-cell checks against the generator
# ---------------------------------------------------------------------------------
def density_code(d: float) -> str:
    """``0.6`` -> ``0p6``, ``1.0`` -> ``1p0`` (the authors' spelling in task ids)."""
    return repr(float(d)).replace(".", "p")


def _codes(raws: Sequence[_RawCell]) -> list[str]:
    vary = {
        "slots": len({r.slots for r in raws}) > 1,
        "meetings": len({r.meetings for r in raws}) > 1,
        "blocked": len({r.blocked for r in raws}) > 1,
        "values": len({r.cost_values for r in raws}) > len({len(r.cost_values) for r in raws}),
    }
    out = []
    for r in raws:
        code = f"{r.agents}a_{r.participants}p_d{density_code(r.density)}_c{len(r.cost_values)}"
        if vary["slots"]:
            code += f"_{r.slots}s"
        if vary["meetings"]:
            code += f"_{r.meetings}m"
        if vary["blocked"]:
            code += f"_blk{r.blocked}"
        if vary["values"]:
            code += "_v" + "-".join(str(v) for v in r.cost_values)
        out.append(code)
    return out


_GEN_FIELD = re.compile(r"^(num_agents|num_slots|num_meetings|density|blocked|participants_per_meeting|cost_values)\b")


def _finish(w: _Where, name: str, seed: int, candidates: int, per_bucket: int, scorer: str,
            raws: list[_RawCell], source: str, cand_path: tuple, per_path: tuple) -> SuiteConfig:
    from engine.generate import _validate

    if candidates < len(BUCKETS) * per_bucket:
        raise w.error(cand_path, f"{candidates} candidates per cell cannot fill 3 buckets of {per_bucket}; "
                                 f"use at least {len(BUCKETS) * per_bucket} (or fewer per bucket).")
    if len(raws) * candidates > MAX_TOTAL_CANDIDATES:
        raise w.error(cand_path, f"{len(raws):,} cells × {candidates:,} candidates = {len(raws) * candidates:,} "
                                 f"candidates to score; the limit is {MAX_TOTAL_CANDIDATES:,} (fewer cells or "
                                 "candidates).")
    codes = _codes(raws)
    seen: dict[str, tuple] = {}
    cells = []
    stride = SEED_BLOCK * max(1, math.ceil(candidates / SEED_BLOCK))
    for i, (r, code) in enumerate(zip(raws, codes)):
        if code in seen:
            raise w.error(r.origin, f"makes the cell {code} a second time (first from {_path_name(seen[code])}); "
                                    "list each setting once.")
        seen[code] = r.origin
        if r.participants > r.agents:
            raise w.error(r.fields["participant"], f"{r.participants} participants per meeting but only "
                                                   f"{r.agents} agents in cell {code}; use at most {r.agents}.")
        cell = Cell(i, r.agents, r.participants, r.slots, r.meetings, r.density, r.blocked, r.cost_values,
                    _path_name(r.origin), code)
        args = cell.generator_args()
        try:
            _validate(seed + i * stride, args["num_agents"], args["num_slots"], args["num_meetings"],
                      args["density"], args["blocked"], args["cost_mode"], args["participants_per_meeting"],
                      None, True, args["cost_values"])
        except TaskError as exc:
            msg = str(exc)
            m = _GEN_FIELD.match(msg)
            if m:
                path = r.fields.get(m.group(1), r.origin)
            elif "meetings" in msg and "slots" in msg:  # no room for the meetings on a calendar
                path = r.fields["num_meetings"]
            else:
                path = r.origin
            raise w.error(path, f"cell {code}: {msg}") from None
        cells.append(cell)
    return SuiteConfig(name, seed, candidates, per_bucket, scorer, tuple(cells), source)


def parse_config(text: str, fmt: str, *, source: str = "", default_name: str = "suite") -> SuiteConfig:
    """A config from its text; ``fmt`` is ``"toml"`` or ``"yaml"`` (the authors' taskgen)."""
    w = _Where(source, {})
    if fmt == "toml":
        import tomllib

        from engine.inputs import loads_toml

        try:
            doc = loads_toml(text, source or "the config", error=SuiteConfigError)
        except tomllib.TOMLDecodeError as exc:
            raise SuiteConfigError(f"{source + ': ' if source else ''}not valid TOML: {exc}") from None
        w.lines = _toml_lines(text)
        return _parse_toml(doc, w, default_name)
    if fmt == "yaml":
        try:
            import yaml
        except ImportError:  # pragma: no cover - a declared dependency
            raise SuiteConfigError("reading a taskgen YAML config needs PyYAML: pip install pyyaml") from None
        from engine.inputs import loads_yaml

        try:
            node, doc = loads_yaml(text, source or "the config", error=SuiteConfigError)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise SuiteConfigError(" ".join(f"{source + ': ' if source else ''}not valid YAML{where}: {problem}".split())) from None
        w.lines = _yaml_lines(node)
        return _parse_yaml(doc, w, default_name)
    raise SuiteConfigError(f"unknown config format {fmt!r}; use toml or yaml")


def load_config(path: str | Path) -> SuiteConfig:
    """A config file: ``.toml`` (ours) or ``.yaml`` / ``.yml`` (the authors' taskgen)."""
    p = Path(path)
    fmt = {".toml": "toml", ".yaml": "yaml", ".yml": "yaml"}.get(p.suffix.lower())
    if fmt is None:
        raise SuiteConfigError(f"{p}: a suite config ends in .toml (ours) or .yaml/.yml (the authors' taskgen)")
    from engine.inputs import read_text

    try:
        text = read_text(p, "suite config", error=SuiteConfigError)
    except OSError as exc:
        raise SuiteConfigError(f"cannot read {p}: {exc.strerror or exc}") from None
    stem = re.sub(r"[^A-Za-z0-9_.\-]", "-", p.stem).strip("-.") or "suite"
    config = parse_config(text, fmt, source=str(p), default_name=stem[:64])
    # The taskgen's output paths are relative to the config file's folder.
    here = p.parent
    return replace(config,
                   output=str(here / config.output) if config.output else None,
                   summary_output=str(here / config.summary_output) if config.summary_output else None)


# ---------------------------------------------------------------------------------
# Scoring one candidate
# ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    """One scored candidate.  ``score`` is the config's scorer; ``error`` says why a
    candidate could not be used."""

    cell: int
    index: int
    seed: int
    fraction: float | None = None
    fraction_exact: bool = True
    optimal_cost: int | None = None
    greedy_cost: int | None = None
    witness_cost: int | None = None
    participant_slots: int = 1
    score: float | None = None
    error: str | None = None
    seconds: float = field(default=0.0, compare=False)

    @property
    def usable(self) -> bool:
        return self.error is None

    @property
    def cost_per_participant_slot(self) -> float:
        assert self.optimal_cost is not None
        return self.optimal_cost / self.participant_slots

    def easiness(self, scorer: str) -> tuple[float, float]:
        """Higher is easier: the scorer's value first, the other score breaks ties
        (the feasible fraction is 1 for every candidate of a cell without blocked
        errands, so the oracle cost then decides)."""
        assert self.fraction is not None and self.optimal_cost is not None
        if scorer == "feasible_fraction":
            return (self.fraction, -self.cost_per_participant_slot)
        return (-self.cost_per_participant_slot, self.fraction)


def _score_value(scorer: str, fraction: float, optimal_cost: int, participant_slots: int) -> float:
    if scorer == "feasible_fraction":
        return fraction
    return optimal_cost / participant_slots


def score_candidate(config: SuiteConfig, cell_index: int, j: int) -> Candidate:
    """Generate candidate ``j`` of a cell (unlabelled) and score it."""
    from engine import oracle
    from engine.generate import _structural_task

    t0 = time.perf_counter()
    cell = config.cells[cell_index]
    seed = config.seed(cell_index, j)
    try:
        task = _structural_task(seed, **cell.generator_args(), task_id="candidate", labelled=False)
    except TaskError as exc:
        return Candidate(cell_index, j, seed, error=str(exc), seconds=time.perf_counter() - t0)
    ff = oracle.feasible_fraction(task)
    res = oracle.solve(task)
    g_cost, _ = oracle.greedy(task)
    w_cost = (task.row.get("witness_solution") or {}).get("cost")
    if not res.feasible:
        return Candidate(cell_index, j, seed, ff.value, ff.exact, None, g_cost, w_cost,
                         error="the oracle finds no feasible schedule", seconds=time.perf_counter() - t0)
    slots = cell.num_meetings * cell.participants
    score = _score_value(config.scorer, ff.value, res.cost, slots)
    return Candidate(cell_index, j, seed, ff.value, ff.exact, res.cost, g_cost, w_cost, slots, score,
                     seconds=time.perf_counter() - t0)


# ---------------------------------------------------------------------------------
# Tertiles and selection
# ---------------------------------------------------------------------------------
def bucket_candidates(cands: Sequence[Candidate], scorer: str) -> dict[int, str]:
    """Candidate index -> tertile, over the usable candidates of one cell.

    :func:`engine.oracle.difficulty_tertiles` on the rank of each candidate's
    :meth:`Candidate.easiness` (easiest first, full ties by candidate index): the easiest
    third ``easy``, the hardest ``hard``.
    """
    from engine.oracle import difficulty_tertiles

    usable = sorted((c for c in cands if c.usable), key=lambda c: c.index)
    keys = [c.easiness(scorer) for c in usable]
    rank = {k: float(r) for r, k in enumerate(sorted(set(keys)))}
    tiers = difficulty_tertiles([rank[k] for k in keys])
    return {c.index: t for c, t in zip(usable, tiers)}


def select_candidates(cands: Sequence[Candidate], scorer: str, per_bucket: int, cell_name: str = ""
                      ) -> list[tuple[str, int, Candidate]]:
    """``(bucket, k, candidate)`` for ``k`` = 1..per_bucket in each tertile.

    Within a tertile the candidates are ranked easiest first (ties by index) and the
    picks sit at evenly spaced ranks ``floor((k - 1/2)·n/K)``, so they span the tertile
    rather than crowd one end of it.
    """
    tiers = bucket_candidates(cands, scorer)
    by_index = {c.index: c for c in cands}
    out = []
    for bucket in BUCKETS:
        members = sorted((by_index[i] for i, t in tiers.items() if t == bucket),
                         key=lambda c: (tuple(-x for x in c.easiness(scorer)), c.index))
        n = len(members)
        if n < per_bucket:
            name = cell_name or f"#{cands[0].cell if cands else '?'}"
            bad = [c for c in cands if not c.usable]
            why = (f" ({len(bad)} of {len(cands)} candidates could not be used: {bad[0].error})" if bad else "")
            raise SuiteGenerationError(
                f"cell {name}: only {n} usable candidates are {bucket} but {per_bucket} are wanted{why}; "
                "raise the candidates per cell or lower the tasks per bucket")
        for k in range(per_bucket):
            out.append((bucket, k + 1, members[math.floor((k + 0.5) * n / per_bucket)]))
    return out


def task_id(config: SuiteConfig, position: int, bucket: str, cell: Cell, k: int) -> str:
    """``b007_medium_5a_3p_d0p6_c1_3``: the authors' id shape (position is 1-based)."""
    width = max(3, len(str(config.total_tasks)))
    return f"b{position:0{width}d}_{bucket}_{cell.code}_{k}"


def plan_rows(config: SuiteConfig, selections: Sequence[Sequence[tuple[str, int, Candidate]]]
              ) -> list[tuple[str, str, int, Candidate]]:
    """``(task_id, bucket, k, candidate)`` for every row of the file, in file order."""
    out = []
    pos = 0
    for cell, picks in zip(config.cells, selections):
        for bucket, k, cand in picks:
            pos += 1
            out.append((task_id(config, pos, bucket, cell, k), bucket, k, cand))
    return out


_ROW_ORDER = ("task_id", "seed", "version", "params", "calendars", "meetings", "witness_solution",
              "optimal", "greedy", "difficulty", "difficulty_score", "difficulty_scorer", "calbench")


def build_row(config: SuiteConfig, tid: str, bucket: str, cand: Candidate) -> dict[str, Any]:
    """The full task row of a selected candidate: labelled, oracle-annotated, with the
    bucket as ``difficulty``, the scorer's value as ``difficulty_score`` and the suite
    bookkeeping under ``calbench.suite``."""
    from engine import oracle
    from engine.generate import _structural_task, annotate

    cell = config.cells[cand.cell]
    task = _structural_task(cand.seed, **cell.generator_args(), task_id=tid, suite_version=config.suite_version)
    ff = oracle.feasible_fraction(task)
    row = annotate(task, difficulty=bucket, fraction=ff).to_row()
    if row["optimal"]["cost"] != cand.optimal_cost or ff.value != cand.fraction:
        raise SuiteGenerationError(f"{tid}: the candidate scored differently when rebuilt (a bug; please report it)")
    row["difficulty_score"] = cand.score
    row["difficulty_scorer"] = config.scorer
    cb = dict(row["calbench"])
    cb["suite"] = {"name": config.name, "config": config.digest, "cell": cell.code, "bucket": bucket,
                   "candidate": cand.index, "score": cand.score, "scorer": config.scorer}
    row["calbench"] = cb
    ordered = {k: row[k] for k in _ROW_ORDER if k in row}
    ordered.update({k: v for k, v in row.items() if k not in ordered})
    return ordered


def rows_to_jsonl(rows: Sequence[dict[str, Any]]) -> str:
    """The task file's text: one JSON object per line, in order (byte-stable)."""
    return "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in rows)


# ---------------------------------------------------------------------------------
# Summaries and distributions
# ---------------------------------------------------------------------------------
def _quantile(sorted_vals: Sequence[float], q: float) -> float:
    if not sorted_vals:
        return math.nan
    pos = q * (len(sorted_vals) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def distribution(values: Sequence[float], bins: int = 8) -> dict[str, Any]:
    """Count, min, quartiles, max, mean and a histogram of ``values``: one bin per value
    for whole numbers spanning at most 16, else ``bins`` equal-width bins."""
    vals = sorted(float(v) for v in values)
    if not vals:
        return {"count": 0}
    lo, hi = vals[0], vals[-1]
    if all(v.is_integer() for v in vals) and hi - lo < 16:
        edges = [lo + i for i in range(int(hi - lo) + 2)]
        counts = [0] * (len(edges) - 1)
        for v in vals:
            counts[int(v - lo)] += 1
    elif hi > lo:
        width = (hi - lo) / bins
        counts = [0] * bins
        for v in vals:
            counts[min(bins - 1, int((v - lo) / width))] += 1
        edges = [lo + i * width for i in range(bins)] + [hi]
    else:
        edges, counts = [lo, hi], [len(vals)]
    return {
        "count": len(vals), "min": lo, "q25": _quantile(vals, 0.25), "median": _quantile(vals, 0.5),
        "q75": _quantile(vals, 0.75), "max": hi, "mean": sum(vals) / len(vals),
        "histogram": {"edges": edges, "counts": counts},
    }


def text_histogram(dist: dict[str, Any], width: int = 30, fmt: str = "{:.4g}") -> list[str]:
    """Lines ``lo – hi  ███████ n`` of a :func:`distribution`'s histogram (one value per
    line when the bins are whole numbers)."""
    if not dist.get("count"):
        return ["(no values)"]
    edges = dist["histogram"]["edges"]
    counts = dist["histogram"]["counts"]
    top = max(counts) or 1
    unit = all(float(e).is_integer() for e in edges) and all(b - a == 1 for a, b in zip(edges, edges[1:]))
    if unit:
        labels = [fmt.format(edges[i]) for i in range(len(counts))]
    elif len(counts) == 1:
        labels = [fmt.format(edges[0])]
    else:
        labels = [f"{fmt.format(edges[i])} – {fmt.format(edges[i + 1])}" for i in range(len(counts))]
    pad = max(len(s) for s in labels)
    return [f"{lab:>{pad}}  {'█' * max(1 if c else 0, round(width * c / top)):<{width}} {c}"
            for lab, c in zip(labels, counts)]


def cell_summary(config: SuiteConfig, cell: Cell, cands: Sequence[Candidate],
                 picks: Sequence[tuple[str, str, int, Candidate]]) -> dict[str, Any]:
    """Per cell: the settings, the score distributions, the tertile ranges and edges,
    the chosen tasks and the time the candidates took.  ``degenerate`` is true when the
    scorer gives every candidate the same value (the tie-break score then decides)."""
    usable = [c for c in cands if c.usable]
    tiers = bucket_candidates(cands, config.scorer)
    degenerate = len({c.score for c in usable}) <= 1
    measures = {"feasible_fraction": lambda c: c.fraction,
                "cost_per_participant_slot": lambda c: c.cost_per_participant_slot}
    ranges: dict[str, dict[str, Any]] = {}
    for b in BUCKETS:
        members = [c for c in usable if tiers.get(c.index) == b]
        ranges[b] = {"count": len(members)}
        for name, get in measures.items():
            vals = [get(c) for c in members]
            ranges[b][name] = [min(vals), max(vals)] if vals else None
    # The edges: halfway between neighbouring tertiles on the measure that decided them
    # (the scorer; the tie-break when the scorer is the same for every candidate).
    edges_on = ("cost_per_participant_slot" if (config.scorer == "feasible_fraction") == degenerate
                else "feasible_fraction")
    edges = []
    for easier, harder in (("easy", "medium"), ("medium", "hard")):
        ra, rb = ranges[easier][edges_on], ranges[harder][edges_on]
        if ra is None or rb is None:
            edges.append(None)
        elif edges_on == "feasible_fraction":  # higher is easier
            edges.append((ra[0] + rb[1]) / 2)
        else:  # higher is harder
            edges.append((ra[1] + rb[0]) / 2)
    errors: dict[str, int] = {}
    for c in cands:
        if c.error:
            errors[c.error] = errors.get(c.error, 0) + 1
    return {
        **cell.to_json(),
        "origin": cell.origin,
        "seeds": [config.seed(cell.index, 0), config.seed(cell.index, config.candidates - 1)],
        "candidates": len(cands),
        "usable": len(usable),
        "unusable": errors,
        "scorer": config.scorer,
        "degenerate": degenerate,
        "score": distribution([c.score for c in usable]),
        "cost_per_participant_slot": distribution([c.cost_per_participant_slot for c in usable]),
        "feasible_fraction": distribution([c.fraction for c in usable]),
        "optimal_cost": distribution([c.optimal_cost for c in usable]),
        "greedy_cost": distribution([c.greedy_cost for c in usable]),
        "buckets": ranges,
        "edges_on": edges_on,
        "edges": edges,
        "chosen": [{"task_id": tid, "bucket": b, "candidate": c.index, "seed": c.seed, "score": c.score,
                    "feasible_fraction": c.fraction, "optimal_cost": c.optimal_cost, "greedy_cost": c.greedy_cost}
                   for tid, b, _k, c in picks],
        "seconds": round(sum(c.seconds for c in cands), 3),
    }


# ---------------------------------------------------------------------------------
# Reading a suite back (ours or the authors')
# ---------------------------------------------------------------------------------
_AUTHORS_ID = re.compile(r"^b\d+_(easy|medium|hard)_(.+)_\d+$")


def row_cell(task: Task) -> str:
    """The cell a row belongs to: ``calbench.suite.cell``, else the middle of an id of
    the authors' shape (``b042_medium_5a_3p_d0p6_c1_2`` -> ``5a_3p_d0p6_c1``), else
    one made from the row's params."""
    cb = task.row.get("calbench") or {}
    suite = cb.get("suite") or {}
    if suite.get("cell"):
        return str(suite["cell"])
    m = _AUTHORS_ID.match(task.task_id)
    if m:
        return m.group(2)
    p = task.row.get("params") or {}
    dens = p.get("density")
    d = density_code(dens) if isinstance(dens, (int, float)) and not isinstance(dens, bool) else "mixed"
    return f"{task.num_agents}a_{p.get('subset_size', '?')}p_d{d}_c{len(task.cost_values)}"


def check_row(task: Task) -> dict[str, Any]:
    """Re-solve a row: our optimum and feasible fraction against what the file records.

    ``status`` is ``agree``, ``explained`` (our exact errand-capacity constraint binds,
    SPEC §3), ``disagree`` or ``unknown`` (the file records no optimum).
    """
    from engine import oracle

    res = oracle.solve(task)
    ff = oracle.feasible_fraction(task)
    file_cost = (task.row.get("optimal") or {}).get("cost")
    ours = res.cost if res.feasible else None
    if file_cost is None:
        status, reason = "unknown", "the file records no optimal cost"
    elif ours == file_cost:
        status, reason = "agree", ""
    elif res.capacity_binds:
        status, reason = "explained", ("our exact errand-capacity constraint binds "
                                       f"(without it the optimum is {res.relaxed_cost})")
    else:
        status, reason = "disagree", f"our optimum is {ours}, the file says {file_cost}"
    recorded = ((task.row.get("calbench") or {}).get("oracle") or {}).get("feasible_fraction")
    if status in ("agree", "unknown") and recorded is not None and recorded != ff.value:
        status, reason = "disagree", f"the file's feasible fraction {recorded} is not ours, {ff.value}"
    return {"task_id": task.task_id, "optimal_cost": ours, "file_optimal_cost": file_cost,
            "feasible_fraction": ff.value, "status": status, "reason": reason}
