"""Fuzz harness over the files and numbers a user or an endpoint hands CalBench (issue 24).

What it feeds the real command line (``calbench`` and ``calbench-play``, in-process in a
forked child per case):

* study, suite (TOML and the authors' YAML), prices, personas and keys files, task files
  and traces: hand-made bad inputs (not UTF-8, nested thousands deep, a FIFO,
  ``/dev/zero``, a directory, files past the size limit, YAML alias bombs, NaN and
  infinite numbers, sizes of 10^6 to 10^18, ids of 100,000 characters, escape sequences)
  and seeded random mutations of a valid file of each kind;
* the endpoint's numbers: a game with an LLM seat against the project's loopback mock
  endpoint whose replies carry token counts past 64 bits, negative, NaN, 1e308, strings,
  a context length of 10^30 or a ``retry-after-ms: inf``.

Each case ends as one of

``ok``         refused in one line (or accepted, where accepting is right);
``traceback``  a Python traceback, or the child died of a signal (the memory cap included);
``hang``       still running at the time-out (the child and its own children are killed);
``silent``     a case that must be refused exited 0 (for the endpoint: exit 0 although a
               game failed);
``vague``      a case that must be refused in one line (``expect="line"``: issue 35's inputs)
               exited 0, exited other than 2, or said more than one line.

Every child runs under ``RLIMIT_AS`` (its address space when forked + ``--mem-mb``) and
``RLIMIT_FSIZE``, in its own process group, killed at ``--timeout`` seconds: no case can
take the machine's memory, disk or time.

Run it against any checkout (it only uses the command line):

    python tests/hardening/fuzz_inputs.py --json         # counts, then one line per case
    python tests/hardening/fuzz_inputs.py --only suite   # cases whose name contains 'suite'

``tests/hardening/test_fuzz_inputs.py`` runs it in a child process and asserts no
traceback, hang or silent acceptance.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ESC = "\x1b]0;pwned\x07\x1b[2J\x1b[31m[/]\r"


@dataclass
class Case:
    name: str
    argv: list[str]
    expect: str = "refuse"  # refuse | line (refused in one line, exit 2) | any
    entry: str = "calbench"  # calbench | play
    db_check: str | None = None  # a database whose failed games make exit 0 a silent acceptance
    env: dict[str, str] = field(default_factory=dict)


# -- valid files of each kind ---------------------------------------------------------------------

SUITE_TOML = """name = "fz"
seed = 10
candidates = 9
per_bucket = 1

[[grid]]
agents = 3
participants = 2
slots = 8
meetings = 2
blocked = 0
density = 0.5
"""

SUITE_YAML = """setting_name: fz
seed_base: 10
candidates_per_config: 9
selected_per_bucket: 1
configs:
  - total_agents: 3
    subset_size: 2
    num_slots: 8
    num_meetings: 2
    densities: [0.5]
"""

PRICES = """currency = "USD"
[models."mock-cooperative"]
prompt = 1.0
completion = 2.0
"""

PERSONAS = """[defaults]
model = "mock-cooperative"
max_tokens = 512
"""

KEYS = """[keys]
end_turn = "ctrl+t"
"""

TOML_WEIRD = ["nan", "inf", "-inf", "1e308", "-1", "0", "1.5", "99999999999999999999", "9223372036854775807",
              '""', '"x"', "[]", "{}", "true", '"' + "y" * 3000 + '"', '"\\u001b[31m"', "[[[[1]]]]"]
JSON_WEIRD = ["NaN", "Infinity", "-Infinity", "1e999", "-1", "0", "1.5", "1" + "0" * 30, "\"x\"", "[]", "{}",
              "null", "true", "\"\\u001b]0;x\\u0007\"", "[[[[[[1]]]]]]", "\"" + "z" * 5000 + "\""]


class Setup:
    """Files and a database the cases point at (built once, with the checkout under test)."""

    def __init__(self, root: Path, python: str) -> None:
        self.root = root
        self.python = python
        self.db = root / "games.db"
        subprocess.run([python, "-m", "calbench_cli.cli", "run", "--tasks", "seed:1", "--agents", "imap",
                        "--db", str(self.db)], check=True, capture_output=True, timeout=300)
        self.study = (root / "study.toml")
        subprocess.run([python, "-m", "calbench_cli.cli", "study", "init", str(self.study)], check=True,
                       capture_output=True, timeout=120)
        self.study_text = self.study.read_text()
        row = subprocess.run([python, "-m", "calbench_cli.cli", "scenario", "--seed", "1", "--json"], check=True,
                             capture_output=True, text=True, timeout=300).stdout
        self.row = json.loads(row)
        gid = json.loads(subprocess.run([python, "-m", "calbench_cli.cli", "games", "--db", str(self.db), "--json"],
                                        check=True, capture_output=True, text=True,
                                        timeout=120).stdout)["games"][0]["game_id"]
        out = root / "trace.json"
        subprocess.run([python, "-m", "calbench_cli.cli", "export", gid, "-o", str(out), "--db", str(self.db)],
                       check=True, capture_output=True, timeout=120)
        self.trace = json.loads(out.read_text())
        self.n = 0

    def file(self, name: str, content: str | bytes) -> str:
        self.n += 1
        p = self.root / f"c{self.n:03d}-{name}"
        if isinstance(content, str):
            content = content.encode("utf-8", "surrogatepass")
        p.write_bytes(content)
        return str(p)

    def special(self, name: str, kind: str) -> str:
        self.n += 1
        p = self.root / f"c{self.n:03d}-{name}"
        if kind == "fifo":
            os.mkfifo(p)
        elif kind == "zero":
            os.symlink("/dev/zero", p)
        elif kind == "dir":
            p.mkdir()
        elif kind == "sparse":  # 300 MiB of zeros that take no disk
            with open(p, "wb") as fh:
                fh.truncate(300 << 20)
        return str(p)

    def out(self, name: str) -> str:
        self.n += 1
        return str(self.root / f"o{self.n:03d}-{name}")

    def db_copy(self) -> str:
        self.n += 1
        p = self.root / f"d{self.n:03d}.db"
        src = sqlite3.connect(self.db)
        dst = sqlite3.connect(p)
        src.backup(dst)
        src.close()
        dst.close()
        return str(p)


# -- the cases -------------------------------------------------------------------------------------

def _file_kinds(s: Setup) -> dict[str, tuple[str, str, Callable[[str], list[str]], str]]:
    """kind -> (valid text, file suffix, argv for a path, syntax)."""
    return {
        "study": (s.study_text, ".toml", lambda p: ["study", "check", p], "toml"),
        "suite": (SUITE_TOML, ".toml", lambda p: ["suite", "generate", p, "-o", s.out("suite.jsonl")], "toml"),
        "suite-yaml": (SUITE_YAML, ".yaml", lambda p: ["suite", "generate", p, "-o", s.out("suite.jsonl")], "yaml"),
        "prices": (PRICES, ".toml", lambda p: ["report", "--prices", p, "--db", str(s.db)], "toml"),
        "personas": (PERSONAS, ".toml", lambda p: ["run", "--tasks", "seed:1", "--agents", "llm,imap,imap,imap,imap",
                                                  "--personas", p, "--base-url", s.base_url, "--max-turns", "1",
                                                  "--llm-retries", "0", "--timeout", "10", "--db", s.db_copy()],
                     "toml"),
        "keys": (KEYS, ".toml", lambda p: ["--list-keys", "--keys", p], "toml"),
        "task": (json.dumps(s.row) + "\n", ".jsonl", lambda p: ["scenario", "--task", p, "--json"], "json"),
        "trace": (json.dumps(s.trace), ".json", lambda p: ["import", p, "--db", s.db_copy()], "json"),
    }


def _deep(syntax: str, n: int) -> str:
    if syntax == "toml":
        return "a = " + "[" * n + "]" * n + "\n"
    if syntax == "yaml":
        return "a: " + "[" * n + "]" * n + "\n"
    return '{"a": ' + "[" * n + "]" * n + "}"


def _bomb() -> str:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for prev, cur in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def crafted_cases(s: Setup) -> list[Case]:
    cases: list[Case] = []
    for kind, (valid, suffix, argv, syntax) in _file_kinds(s).items():
        entry = "play" if kind == "keys" else "calbench"

        def add(name: str, path: str, expect: str = "refuse") -> None:
            cases.append(Case(f"{kind}:{name}", argv(path), expect, entry))

        add("valid", s.file(f"valid{suffix}", valid), "any")
        add("not-utf8", s.file(f"latin1{suffix}", valid.encode() + "# café\n".encode("latin-1")
                               if syntax != "json" else valid.encode()[:-2] + b'\xe9"}'))
        add("nested-5000", s.file(f"deep{suffix}", _deep(syntax, 5000)))
        add("nested-100", s.file(f"deep100{suffix}", _deep(syntax, 100)))
        if syntax == "toml":
            add("headers-nested-300", s.file(f"hdr{suffix}", "[" + ".".join(["a"] * 300) + "]\nx = 1\n"))
        add("fifo", s.special(f"fifo{suffix}", "fifo"))
        add("dev-zero", s.special(f"zero{suffix}", "zero"))
        add("directory", s.special(f"dir{suffix}", "dir"))
        add("empty", s.file(f"empty{suffix}", ""), "any" if kind == "keys" else "refuse")  # no remapping
        add("binary", s.file(f"bin{suffix}", bytes(random.Random(kind).randrange(256) for _ in range(4096))))
        if syntax == "json":
            add("300MiB", s.special(f"big{suffix}", "sparse"))
        else:
            add("5MB", s.file(f"big{suffix}", valid + ("# " + "x" * 78 + "\n") * 65_000))
        if syntax == "yaml":
            add("alias-bomb", s.file(f"bomb{suffix}", _bomb()))
            add("python-tag", s.file(f"tag{suffix}", "setting_name: !!python/object/apply:os.system ['true']\n"))
    # -- suite: sizes -----------------------------------------------------------------------------
    for name, text in {
        "candidates-1e6": SUITE_TOML.replace("candidates = 9", "candidates = 1000000"),
        "candidates-1e18": SUITE_TOML.replace("candidates = 9", "candidates = 1000000000000000000"),
        "per-bucket-1e9": SUITE_TOML.replace("per_bucket = 1", "per_bucket = 1000000000").replace(
            "candidates = 9", "candidates = 3000000000"),
        "seed-2e70": SUITE_TOML.replace("seed = 10", "seed = 1180591620717411303424"),
        "cells-1e12": SUITE_TOML.replace("density = 0.5", "density = [" + ", ".join(
            f"0.{i:03d}" for i in range(1, 1000)) + "]").replace("blocked = 0", "blocked = [" + ", ".join(
                str(i) for i in range(1000)) + "]").replace("slots = 8", "slots = [" + ", ".join(
                    str(i) for i in range(8, 1008)) + "]"),
        "slots-1e9": SUITE_TOML.replace("slots = 8", "slots = 1000000000"),
        "density-nan": SUITE_TOML.replace("density = 0.5", "density = nan"),
    }.items():
        cases.append(Case(f"suite:{name}", ["suite", "generate", s.file("s.toml", text), "-o", s.out("s.jsonl")]))
    cases.append(Case("suite-yaml:candidates-1e18", ["suite", "generate", s.file("s.yaml", SUITE_YAML.replace(
        "candidates_per_config: 9", "candidates_per_config: 1000000000000000000")), "-o", s.out("s.jsonl")]))
    # -- study: ids, numbers ------------------------------------------------------------------------
    st = s.study_text
    for name, text in {
        "name-100k": st.replace('name = "pilot-1"', 'name = "' + "p" * 100_000 + '"', 1),
        "name-escape": st.replace('name = "pilot-1"', 'name = "pilot\\u001b[31m"', 1),
        "retries-1e18": st.replace("timeout = 60", "timeout = 60\nretries = 1000000000000000000", 1),
        "timeout-nan": st.replace("timeout = 60", "timeout = nan", 1),
        "games-1e9": st.replace("games_per_condition = 1", "games_per_condition = 1000000000", 1),
        "max-turns-inf": st.replace("max_turns = 6", "max_turns = inf", 1),
    }.items():
        cases.append(Case(f"study:{name}", ["study", "check", s.file("st.toml", text)]))
    # -- prices -----------------------------------------------------------------------------------------
    for name, text in {
        "nan": PRICES.replace("prompt = 1.0", "prompt = nan"),
        "inf": PRICES.replace("completion = 2.0", "completion = inf"),
        "negative": PRICES.replace("prompt = 1.0", "prompt = -1.0"),
        "1e308": PRICES.replace("prompt = 1.0", "prompt = 1e308"),
        "model-escape": PRICES.replace('"mock-cooperative"', '"m\\u001b]0;x\\u0007"'),
        "model-100k": PRICES.replace('"mock-cooperative"', '"' + "m" * 100_000 + '"'),
        "currency-escape": PRICES.replace('"USD"', '"\\u001b[2J"'),
    }.items():
        cases.append(Case(f"prices:{name}", ["report", "--prices", s.file("p.toml", text), "--db", str(s.db)]))
    # -- keys -------------------------------------------------------------------------------------------
    for name, text in {"escape": KEYS.replace('"ctrl+t"', '"\\u001b[2J"'),
                       "100k": KEYS.replace('"ctrl+t"', '"' + "a," * 50_000 + 'b"')}.items():
        cases.append(Case(f"keys:{name}", ["--list-keys", "--keys", s.file("k.toml", text)], entry="play"))
    # -- task rows ----------------------------------------------------------------------------------------
    def row(mut: Callable[[dict], None]) -> str:
        r = json.loads(json.dumps(s.row))
        mut(r)
        return json.dumps(r) + "\n"

    def set_first_errand_cost(r: dict, v) -> None:
        for cal in r["calendars"]:
            for it in cal:
                if it and "errand_id" in it:
                    it["cost"] = v
                    return

    for name, mut in {
        "no-participants": lambda r: r["meetings"][0].update(participants=[], speaker_order=[]),
        "one-participant": lambda r: r["meetings"][0].update(participants=[0], speaker_order=[0]),
        "twice": lambda r: r["meetings"][0].update(participants=[0, 0, 1], speaker_order=[0, 0, 1]),
        "optimal-nan": lambda r: r["optimal"].update(cost=float("nan")),
        "optimal-inf": lambda r: r["optimal"].update(cost=float("inf")),
        "cost-1.5": lambda r: set_first_errand_cost(r, 1.5),
        "meeting-cost-2.5": lambda r: r["meetings"][0].update(cost=2.5),
        "task-id-100k": lambda r: r.update(task_id="t" * 100_000),
        "task-id-escape": lambda r: r.update(task_id="t" + ESC),
        "duration-2": lambda r: r["meetings"][0].update(duration=2),
        "slots-600": lambda r: r.update(calendars=[c + [None] * 600 for c in r["calendars"]],
                                        params={**r.get("params", {}), "num_slots": None}),
    }.items():
        cases.append(Case(f"task:{name}", ["scenario", "--task", s.file("t.jsonl", row(mut)), "--json"]))
    # -- traces ---------------------------------------------------------------------------------------------
    def trace(mut: Callable[[dict], None]) -> str:
        t = json.loads(json.dumps(s.trace))
        t["game_id"] = "fuzz-" + str(s.n)
        mut(t)
        return json.dumps(t)

    for name, mut in {
        "metric-nan": lambda t: t["metrics"].update(coordination=float("nan")),
        "metric-inf": lambda t: t["metrics"].update(excess=float("inf")),
        "game-id-100k": lambda t: t.update(game_id="g" * 100_000),
        "game-id-escape": lambda t: t.update(game_id="g" + ESC),
        "nested-100-extra": lambda t: t.update(x=json.loads("[" * 100 + "]" * 100)),
    }.items():
        cases.append(Case(f"trace:{name}", ["import", s.file("tr.json", trace(mut)), "--db", s.db_copy()]))
    return cases


def silent_cases(s: Setup) -> list[Case]:
    """Issue 35: inputs that were accepted silently; each must be refused in one line, exit 2."""
    cases: list[Case] = []

    def line(name: str, argv: list[str], entry: str = "calbench") -> None:
        cases.append(Case(f"t35:{name}", argv, "line", entry))

    # -- task rows --------------------------------------------------------------------------------------
    def row_file(mut: Callable[[dict], None] | None, rows: int = 1) -> str:
        r = json.loads(json.dumps(s.row))
        if mut:
            mut(r)
        return s.file("t35.jsonl", (json.dumps(r) + "\n") * rows)

    for name, mut in {
        "task:total-agents-7": lambda r: r["params"].update(total_agents=7),
        "task:density-nan": lambda r: r["params"].update(density=float("nan")),
        "task:density-inf": lambda r: r["params"].update(density=float("inf")),
        "task:task-id-missing": lambda r: r.pop("task_id"),
        "task:task-id-null": lambda r: r.update(task_id=None),
        "task:task-id-number": lambda r: r.update(task_id=5),
        "task:task-id-empty": lambda r: r.update(task_id=""),
        "task:meetings-empty": lambda r: r.update(meetings=[]),
    }.items():
        line(name, ["scenario", "--task", row_file(mut), "--json"])
    line("task:duplicate-ids", ["oracle", row_file(None, rows=2)])
    line("task:empty-file-oracle", ["oracle", s.file("t35-empty.jsonl", "")])
    line("task:seed-minus-1", ["scenario", "--task", "seed:-1", "--json"])
    line("task:seed-full-width", ["scenario", "--task", "seed:\uff11\uff12", "--json"])
    # -- study files --------------------------------------------------------------------------------------
    st = s.study_text
    for name, (old, new) in {
        "talk-seconds-inf": ("talk_seconds = 90", "talk_seconds = inf"),
        "talk-seconds-1e308": ("talk_seconds = 90", "talk_seconds = 1e308"),
        "talk-seconds-string": ("talk_seconds = 90", 'talk_seconds = "90"'),
        "seat-true": ("seat = 0", "seat = true"),
        "seat-string": ("seat = 0", 'seat = "0"'),
        "max-turns-string": ("max_turns = 6", 'max_turns = "6"'),
        "base-url-not-a-url": ('base_url = "http://127.0.0.1:8765/v1"', 'base_url = "localhost port 8765"'),
        "quiz-question-empty": ('question = "When is a meeting scheduled?"', 'question = ""'),
        "pool-four-identical": ('pool = ["seed:100", "seed:101", "seed:102", "seed:103"]',
                                'pool = ["seed:100", "seed:100", "seed:100", "seed:100"]'),
        "seed-2^64": ("seed = 7 ", "seed = 18446744073709551616 "),
    }.items():
        assert old in st, old  # the template changed: update the case
        line(f"study:{name}", ["study", "check", s.file("t35.toml", st.replace(old, new, 1))])
    # -- YAML, personas, keys --------------------------------------------------------------------------------
    line("suite-yaml:key-twice", ["suite", "generate", s.file("t35.yaml", SUITE_YAML.replace(
        "seed_base: 10\n", "seed_base: 10\nseed_base: 11\n")), "-o", s.out("t35.jsonl")])
    personas = ["run", "--tasks", "seed:1", "--agents", "llm,imap,imap,imap,imap", "--base-url", s.base_url,
                "--max-turns", "1", "--llm-retries", "0", "--timeout", "10"]
    line("personas:seats-9-of-5", [*personas, "--personas", s.file("t35.toml", PERSONAS + '[seats.9]\nmodel = "m"\n'),
                                   "--db", s.db_copy()])
    line("personas:json-mode-yes", [*personas, "--personas", s.file("t35.toml", PERSONAS + 'json_mode = "yes"\n'),
                                    "--db", s.db_copy()])
    line("keys:unknown-key-name", ["--list-keys", "--keys", s.file("t35.toml", '[keys]\nend_turn = "ctrl+banana"\n')],
         "play")
    line("keys:one-key-two-actions", ["--list-keys", "--keys", s.file("t35.toml", '[keys]\nend_turn = "p"\n')], "play")
    # -- options and paths --------------------------------------------------------------------------------------
    line("mock-llm:latency-nan", ["mock-llm", "--port", "0", "--latency", "nan"])
    line("run:judge-empty", ["run", "--tasks", "seed:1", "--agents", "imap", "--judge", "", "--db", s.db_copy()])
    line("games:db-typo", ["games", "--db", str(s.root / "typo.db")])
    line("games:db-0-bytes", ["games", "--db", s.file("t35-empty.db", b"")])
    line("export:o-missing-folder", ["export", "--all", "-o", str(s.root / "missing" / "dir" / "x"), "--db", str(s.db)])
    line("suite-show:fifo", ["suite", "show", s.special("t35.jsonl", "fifo")])
    return cases


def mutated_cases(s: Setup, per_kind: int, seed: int) -> list[Case]:
    """Seeded random mutations of a valid file of each kind: a number or a value replaced by
    a weird one, a line duplicated or cut, bytes flipped.  Either answer may be right, so
    only tracebacks and hangs count."""
    rng = random.Random(seed)
    out = []
    for kind, (valid, suffix, argv, syntax) in _file_kinds(s).items():
        weird = JSON_WEIRD if syntax == "json" else TOML_WEIRD
        import re

        spots = [m.span() for m in re.finditer(r"(?<![\w.])-?\d+(\.\d+)?(?![\w.])|\"[^\"\n]*\"", valid)]
        for i in range(per_kind):
            text = valid
            how = rng.choice(["value", "value", "value", "bytes", "line"])
            if how == "value" and spots:
                for _ in range(rng.randint(1, 3)):
                    a, b = rng.choice(spots)
                    if b <= len(text):
                        text = text[:a] + rng.choice(weird) + text[b:]
            elif how == "line":
                lines = text.splitlines(keepends=True)
                k = rng.randrange(len(lines))
                lines.insert(k, lines[k] * rng.choice([2, 50])) if rng.random() < 0.5 else lines.pop(k)
                text = "".join(lines)
            data = text.encode()
            if how == "bytes":
                b = bytearray(data)
                for _ in range(rng.randint(1, 8)):
                    b[rng.randrange(len(b))] = rng.randrange(256)
                data = bytes(b)
            out.append(Case(f"{kind}:random-{i}-{how}", argv(s.file(f"m{suffix}", data)), "any",
                            "play" if kind == "keys" else "calbench"))
    return out


# -- the endpoint's numbers --------------------------------------------------------------------------

ENDPOINT_VARIANTS = ("plain", "usage-2e70", "usage-negative", "usage-nan", "usage-1e308", "usage-string",
                     "cached-1e9", "context-1e30", "retry-after-inf", "models-2e80")

_SERVER = r'''
import asyncio, json, math, sys
from calbench_devtools.mock_endpoint import MockLLMServer

class Variant(MockLLMServer):
    def __init__(self, variant, **kw):
        super().__init__("cooperative", **kw)
        self.variant = variant

    async def _dispatch(self, method, path, body):
        v = self.variant
        status, headers, payload = await super()._dispatch(method, path, body)
        if method == "GET" and v == "models-2e80" and isinstance(payload, dict):
            for m in payload.get("data", []):
                m["max_model_len"] = 2 ** 80
                m["context_length"] = 2 ** 80
            return status, headers, payload
        if method != "POST" or status != 200 or not isinstance(payload, dict):
            return status, headers, payload
        u = payload.get("usage") or {}
        if v == "usage-2e70":
            u["prompt_tokens"] = u["total_tokens"] = 2 ** 70
        elif v == "usage-negative":
            u["completion_tokens"] = -7
        elif v == "usage-nan":
            u["prompt_tokens"] = float("nan")
        elif v == "usage-1e308":
            u["completion_tokens"] = 1e308
        elif v == "usage-string":
            u["prompt_tokens"] = "12"
        elif v == "cached-1e9":
            u["prompt_tokens_details"] = {"cached_tokens": 10 ** 9}
        elif v == "context-1e30":
            return 400, {}, {"error": {"message": "This model's maximum context length is "
                                                  + "1" + "0" * 30 + " tokens. However, you requested "
                                                  + "2" + "0" * 30 + " tokens.", "type": "invalid_request_error",
                                       "code": "context_length_exceeded"}}
        elif v == "retry-after-inf":
            return 429, {"retry-after-ms": "inf", "retry-after": "1e308"}, {
                "error": {"message": "slow down", "type": "rate_limit", "code": "rate_limit"}}
        return status, headers, payload

async def main():
    servers = {}
    for v in sys.argv[1:]:
        s = Variant(v, advertise_context=(v == "models-2e80"), context_limit=(8192 if v == "models-2e80" else None))
        await s.start()
        servers[v] = s.base_url
    print(json.dumps(servers), flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
'''


def endpoint_cases(s: Setup, urls: dict[str, str]) -> list[Case]:
    out = []
    for v, url in urls.items():
        db = s.db_copy()
        # a Retry-After of 'inf' must be capped: at 2 s here (the default cap, 120 s, is right but slow)
        extra = (["--personas", s.file("ra.toml", '[defaults]\nmodel = "mock-cooperative"\nretry_after_max = 2\n')]
                 if v == "retry-after-inf" else [])
        out.append(Case(f"endpoint:{v}", ["run", "--tasks", "seed:1", "--agents", "llm:mock-cooperative,imap,imap,"
                                          "imap,imap", "--base-url", url, "--max-turns", "2", "--timeout", "10",
                                          "--llm-retries", "1", *extra, "--db", db], "any", db_check=db))
    return out


# -- running a case ------------------------------------------------------------------------------------

def _vm_bytes() -> int:
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _child(case: Case, out_path: str, mem_mb: int) -> None:
    """In the forked child: caps, then the command line in-process; never returns."""
    rc = 1
    try:
        os.setpgid(0, 0)
        fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        cap = _vm_bytes() + (mem_mb << 20)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 30, 1 << 30))
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for k, v in case.env.items():
            os.environ[k] = v
        sys.argv = ["calbench-play" if case.entry == "play" else "calbench", *case.argv]
        from calbench_cli.cli import main, play_main

        rc = (play_main if case.entry == "play" else main)(list(case.argv))
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - what Python would print for an uncaught exception
        traceback.print_exc()
        rc = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        pass
    os._exit(rc if isinstance(rc, int) else 1)


def run_case(case: Case, workdir: Path, timeout: float, mem_mb: int) -> dict:
    out_path = str(workdir / "case.out")
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(case, out_path, mem_mb)
    status = None
    while time.monotonic() - t0 < timeout:
        got, st = os.waitpid(pid, os.WNOHANG)
        if got:
            status = st
            break
        time.sleep(0.02)
    hung = status is None
    if hung:
        for sig in (signal.SIGKILL,):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                pass
        _, status = os.waitpid(pid, 0)
    else:
        try:  # whatever the case left behind (a worker pool) goes too
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    seconds = time.monotonic() - t0
    text = Path(out_path).read_text(errors="replace")
    rc = os.waitstatus_to_exitcode(status)
    if hung:
        outcome = "hang"
    elif "Traceback (most recent call last)" in text or rc < 0 or rc not in (0, 1, 2, 130):
        outcome = "traceback"
    elif rc == 0 and case.expect in ("refuse", "line"):
        outcome = "silent"
    elif case.expect == "line" and (rc != 2 or len([ln for ln in text.splitlines() if ln.strip()]) != 1):
        outcome = "vague"
    elif rc == 0 and case.db_check and _failed_games(case.db_check):
        outcome = "silent"
    else:
        outcome = "ok"
    last = [ln for ln in text.strip().splitlines() if ln.strip()]
    return {"case": case.name, "outcome": outcome, "rc": rc, "seconds": round(seconds, 2),
            "last": (last[-1][:160] if last else "")}


def _failed_games(db: str) -> int:
    try:
        con = sqlite3.connect(db)
        try:
            return con.execute("SELECT count(*) FROM games WHERE status = 'failed'").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case (default 60)")
    ap.add_argument("--mem-mb", type=int, default=1024, help="memory each case may add (default 1024 MiB)")
    ap.add_argument("--mutations", type=int, default=6, help="random mutations per file kind (default 6)")
    ap.add_argument("--seed", type=int, default=24)
    ap.add_argument("--only", default=None, help="run the cases whose name contains this")
    ap.add_argument("--no-endpoint", action="store_true", help="leave out the endpoint cases")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args(argv)

    # preload what the command line imports, once, before forking
    import calbench_cli.cli  # noqa: F401
    for mod in ("ortools.sat.python.cp_model", "aiosqlite", "rich.console", "yaml", "pydantic", "openai",
                "textual.app",
                # and CalBench's own modules the commands import when they run (each case paid for
                # them again: ~0.2 s a case, most of the harness's time)
                "calbench_cli.commands", "calbench_cli.commands.run", "calbench_cli.commands.saves",
                "calbench_cli.commands.report", "calbench_cli.commands.scenario", "calbench_cli.commands.suite",
                "calbench_cli.commands.study", "calbench_cli.commands.play", "calbench_cli.commands.llm",
                "saves.store", "engine.oracle", "engine.generate", "lab.archive", "lab.replaycheck",
                "lab.runner", "lab.study.check", "personas.llm.factory", "calbench_tui.app"):
        try:
            __import__(mod)
        except ImportError:
            pass
    import gc

    gc.freeze()  # what is loaded stays out of the cases' collections (and their copy-on-write)
    with tempfile.TemporaryDirectory(prefix="calbench-fuzz-") as tmp:
        root = Path(tmp)
        os.environ.setdefault("OPENAI_API_KEY", "sk-fuzz-not-a-key")
        os.environ["CALBENCH_CONFIG_DIR"] = str(root / "config")
        os.environ["CALBENCH_CACHE"] = str(root / "cache")
        server = None
        urls: dict[str, str] = {}
        try:
            server = subprocess.Popen([sys.executable, "-c", _SERVER, *ENDPOINT_VARIANTS], stdout=subprocess.PIPE,
                                      text=True)
            urls = json.loads(server.stdout.readline())
            s = Setup(root, sys.executable)
            s.base_url = urls["plain"]
            cases = crafted_cases(s) + silent_cases(s) + mutated_cases(s, args.mutations, args.seed)
            if not args.no_endpoint:
                cases += endpoint_cases(s, urls)
            if args.only:
                cases = [c for c in cases if args.only in c.name]
            results = []
            for c in cases:
                r = run_case(c, root, args.timeout, args.mem_mb)
                results.append(r)
                if not args.json:
                    print(f"{r['outcome']:9} {r['rc']:>4} {r['seconds']:>6.1f}s  {r['case']}  {r['last'][:100]}",
                          flush=True)
        finally:
            if server is not None:
                server.kill()
                server.wait()
    counts = {k: sum(1 for r in results if r["outcome"] == k) for k in ("ok", "traceback", "hang", "silent", "vague")}
    counts["cases"] = len(results)
    if args.json:
        print(json.dumps({"counts": counts, "results": results}, indent=1))
    else:
        print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
