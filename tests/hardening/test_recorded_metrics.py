"""Issue 21: every recorded headline metric is recomputed and compared, and a foreign trace
whose oracle split is *an* optimal split (not necessarily ours) verifies.

The authors' traces are read from ``../shared/compat`` (skipped when absent); the edits
below are ours, made in memory."""

from __future__ import annotations

import copy
import json

import pytest

from engine import oracle
from engine.trace import seat_results, task_for_trace
from engine.verify import INFORMATIONAL, verify_trace

from .helpers import our_trace

IMAP_TRACE = "authors_trace_uniform_full_imap_b042_medium_5a_3p_d0p6_c1_2.json"


def _edit(trace, path, value):
    t = copy.deepcopy(trace)
    node = t
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return t


@pytest.fixture(scope="module")
def ours():
    return our_trace(5, agents="dsm-private")


# Each edit changes one recorded figure the issue found passing "Verified".
EDITS = [
    (("metrics", "vps"), lambda v: v + 1.0),
    (("metrics", "typed_vps"), lambda v: v + 0.5),
    (("metrics", "vps_weighted"), lambda v: v * 2),
    (("metrics", "vps_calibrated"), lambda v: v + 1),
    (("metrics", "vps_mean_target"), lambda v: v + 1),
    (("metrics", "per_target_vps", 0), lambda v: v + 1),
    (("metrics", "optimal_cost"), lambda v: v + 1),
    (("metrics", "oracle_cost_replayed"), lambda v: v + 1),
    (("metrics", "rounds_coordinated"), lambda v: v - 1),
    (("metrics", "fairness_shown"), lambda v: v + 0.25),
    (("metrics", "total_dms_sent"), lambda v: v + 1),
    (("metrics", "total_dm_chars"), lambda v: v - 10),
    (("metrics", "total_groupchat_messages_sent"), lambda v: v + 2),
    (("metrics", "scheduled_meeting_ids"), lambda v: v[:-1]),
    (("metrics", "per_seat", 1, "messages_per_meeting"), lambda v: v + 1),
    (("metrics", "per_seat", 3, "signed_excess_shown"), lambda v: v - 1),
    (("final_state", "per_agent_messages_sent", 0), lambda v: v + 1),
    (("final_state", "oracle_per_agent_cost", 0), lambda v: v + 1),
]


def _get(trace, path):
    node = trace
    for k in path:
        node = node[k]
    return node


@pytest.mark.parametrize("path, change", EDITS, ids=[".".join(map(str, p)) for p, _ in EDITS])
def test_each_edited_headline_metric_fails_verification(ours, path, change):
    assert verify_trace(copy.deepcopy(ours)).verified
    bad = _edit(ours, path, change(_get(ours, path)))
    res = verify_trace(bad)
    assert not res.verified
    name = ".".join(str(p) for p in path[:2])
    assert any(p.startswith(name.split(".")[0] + "." + str(path[1])) for p in res.problems), res.problems


def test_informational_keys_are_only_labels(ours):
    # what is not compared is documented and is a label, not a figure
    assert set(INFORMATIONAL) == {"communication_protocol", "cost_mode"}
    for key in INFORMATIONAL:
        assert isinstance(ours["metrics"][key], str)
    # a key this version does not compute is left alone (a newer writer's addition)
    assert verify_trace(_edit(ours, ("metrics", "some_future_figure"), 3)).verified


def test_calbench_trace_names_an_edited_vps(cli, tmp_path, ours):
    bad = tmp_path / "vps.json"
    bad.write_text(json.dumps(_edit(ours, ("metrics", "vps"), ours["metrics"]["vps"] + 2)))
    rc, out, _err = cli("trace", str(bad))
    assert rc == 1 and "Not verified" in out and "metrics.vps records" in out


# ---------------------------------------------------------------------------------------
# The authors' traces: another optimal split verifies, a wrong one does not
# ---------------------------------------------------------------------------------------
def _import(trace):
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "theirs.json"
        f.write_text(json.dumps(trace))
        res = subprocess.run([sys.executable, "-m", "calbench_cli.cli", "import", str(f), "--db", str(Path(d) / "i.db")],
                             capture_output=True, text=True, timeout=300)
        assert "Traceback" not in res.stderr, res.stderr
        return res.returncode


def _with_split(trace, split, replayed=True):
    t = copy.deepcopy(trace)
    cost = t["final_state"]["per_agent_cost"]
    burden = [c - o for c, o in zip(cost, split)]  # their burden is signed
    for where in (t["metrics"], t["final_state"]):
        where["oracle_per_agent_cost"] = list(split)
        where["per_agent_excess_burden"] = burden
    t["metrics"]["total_excess_burden"] = sum(burden)
    if replayed:
        t["metrics"]["oracle_cost_replayed"] = sum(split)
    return t


def test_a_foreign_trace_with_another_optimal_split_verifies(compat_dir):
    theirs = json.loads((compat_dir / IMAP_TRACE).read_text())
    task = task_for_trace(theirs)
    assert theirs["metrics"]["oracle_per_agent_cost"] == [0, 0, 1, 0, 1]
    assert list(oracle.solve(task).agent_costs) == [0, 1, 1, 0, 0]  # ours differs, both optimal
    res = verify_trace(theirs)
    assert res.verified and res.splits["kind"] == "an optimal split"
    assert res.splits["recorded"] == [0, 0, 1, 0, 1] and res.splits["ours"] == [0, 1, 1, 0, 0]

    # the case: a split under which agent 0 paid less than its share (burden -1)
    other = _with_split(theirs, [1, 0, 1, 0, 0])
    assert other["metrics"]["per_agent_excess_burden"] == [-1, 1, 0, 0, 1]
    assert other["metrics"]["total_excess_burden"] == 1
    res = verify_trace(other)
    assert res.verified, res.problems
    # calbench import takes it (it used to refuse: "per_agent_excess_burden[0] records -1 ...")
    return_code = _import(other)
    assert return_code == 0
    # its per-agent metrics use its own split; the excess is the positive part
    seats = seat_results(other)
    assert [s["oracle_cost_shown"] for s in seats] == [1, 0, 1, 0, 0]
    assert [s["excess_shown"] for s in seats] == [0, 1, 0, 0, 1]
    assert [s["signed_excess_shown"] for s in seats] == [-1, 1, 0, 0, 1]


@pytest.mark.parametrize("split, replayed, words", [
    ([0, 0, 0, 1, 1], True, "no optimal schedule gives it"),  # sums to the optimum, realised by none
    ([0, 0, 1, 0, 2], False, "oracle_cost_replayed records 2"),  # the split alone edited
    ([0, 0, 1, 0, 2], False, "not the optimal cost"),
    ([0, 0, 0, 0, 3], True, "costs some agent less"),  # a "replay" that beats every optimal schedule
])
def test_a_foreign_trace_with_a_wrong_split_fails(compat_dir, split, replayed, words):
    theirs = json.loads((compat_dir / IMAP_TRACE).read_text())
    res = verify_trace(_with_split(theirs, split, replayed))
    assert not res.verified and any(words in p for p in res.problems), res.problems


def test_a_foreign_trace_with_an_unsigned_burden_edit_fails(compat_dir):
    theirs = json.loads((compat_dir / IMAP_TRACE).read_text())
    bad = copy.deepcopy(theirs)
    bad["metrics"]["per_agent_excess_burden"][1] = 0
    assert not verify_trace(bad).verified
    for key, value in (("optimal_cost", 3), ("total_dms_sent", 31), ("efficiency", 5.0), ("total_dm_chars", 3000)):
        assert not verify_trace(_edit(theirs, ("metrics", key), value)).verified, key


def test_calbench_trace_reports_both_splits(cli, compat_dir):
    rc, out, _ = cli("trace", str(compat_dir / IMAP_TRACE))
    assert rc == 0
    assert "recorded [0, 0, 1, 0, 1] (an optimal split); ours [0, 1, 1, 0, 0]" in out.replace("\n", " ")
    rc, out, _ = cli("trace", str(compat_dir / IMAP_TRACE), "--json")
    doc = json.loads(out)
    assert doc["oracle_split"]["recorded"] == [0, 0, 1, 0, 1] and doc["oracle_split"]["ours"] == [0, 1, 1, 0, 0]


def test_every_authors_trace_still_verifies(compat_dir):
    for f in sorted(compat_dir.glob("authors_trace_*.json")):
        res = verify_trace(json.loads(f.read_text()))
        assert res.verified, (f.name, res.problems)
        assert res.splits["kind"] in ("an optimal split", "their replay of the oracle's schedule")
