"""Issue 24: the fuzz harness (``fuzz_inputs.py``) over study, suite, prices, personas, keys,
task and trace files and the endpoint's numbers, run as a child process with a memory cap
(every case again in its own capped, timed child), once for both tests.

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

import pytest

HARNESS = Path(__file__).with_name("fuzz_inputs.py")
CAP = 8 << 30  # the harness and every case it forks (each case caps itself lower)


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


@pytest.fixture(scope="module")
def harness_results() -> list[dict]:
    """One run of the harness over every case (files, issue 35's inputs, mutations, the
    endpoint's numbers), shared by the tests below: each used to run it on its own."""
    proc = subprocess.run([sys.executable, str(HARNESS), "--json", "--timeout", "60", "--mutations", "4"],
                          capture_output=True, text=True, timeout=1800, preexec_fn=_cap, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)["results"]


def test_fuzz_files_and_endpoint_numbers(harness_results):
    results = harness_results
    assert len(results) > 150
    files = [r for r in results if not r["case"].startswith("endpoint:")]
    bad = [r for r in files if r["outcome"] != "ok"]
    assert not bad, json.dumps(bad, indent=1)
    endpoint = [r for r in results if r["case"].startswith("endpoint:")]
    assert endpoint and not [r for r in endpoint if r["outcome"] in ("traceback", "hang")], \
        json.dumps(endpoint, indent=1)


def test_issue_35_inputs_are_refused_in_one_line(harness_results):
    """Issue 35: 33 inputs that were accepted silently (task rows, study files, a YAML key
    given twice, personas and keys files, options, database and output paths, a FIFO) are
    each refused in one line with exit 2 (the harness's ``t35:`` cases, ``expect="line"``)."""
    results = [r for r in harness_results if r["case"].startswith("t35:")]
    assert len(results) == 33
    bad = [r for r in results if r["outcome"] != "ok"]
    assert not bad, json.dumps(bad, indent=1)
