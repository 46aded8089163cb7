"""Issue 24: the fuzz harness (``fuzz_inputs.py``) over study, suite, prices, personas, keys,
task and trace files and the endpoint's numbers, run as a child process with a memory cap
(every case again in its own capped, timed child).

Asserts what this branch guarantees: no traceback, hang or silent acceptance for any file
case.  The endpoint cases are reported; a game that fails on an endpoint's odd number while
``run`` exits 0 is issue 24 item 12, another branch's; here they must not hang or raise a
traceback.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

HARNESS = Path(__file__).with_name("fuzz_inputs.py")
CAP = 8 << 30  # the harness and every case it forks (each case caps itself lower)


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def test_fuzz_files_and_endpoint_numbers():
    proc = subprocess.run([sys.executable, str(HARNESS), "--json", "--timeout", "60", "--mutations", "4"],
                          capture_output=True, text=True, timeout=1800, preexec_fn=_cap, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)["results"]
    assert len(results) > 150
    files = [r for r in results if not r["case"].startswith("endpoint:")]
    bad = [r for r in files if r["outcome"] != "ok"]
    assert not bad, json.dumps(bad, indent=1)
    endpoint = [r for r in results if r["case"].startswith("endpoint:")]
    assert endpoint and not [r for r in endpoint if r["outcome"] in ("traceback", "hang")], \
        json.dumps(endpoint, indent=1)


def test_issue_35_inputs_are_refused_in_one_line():
    """Issue 35: 33 inputs that were accepted silently (task rows, study files, a YAML key
    given twice, personas and keys files, options, database and output paths, a FIFO) are
    each refused in one line with exit 2."""
    proc = subprocess.run([sys.executable, str(HARNESS), "--json", "--timeout", "60", "--only", "t35:",
                           "--no-endpoint", "--mutations", "0"],
                          capture_output=True, text=True, timeout=900, preexec_fn=_cap, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)["results"]
    assert len(results) == 33
    bad = [r for r in results if r["outcome"] != "ok"]
    assert not bad, json.dumps(bad, indent=1)
