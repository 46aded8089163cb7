"""A headless ``calbench run --json`` of scripted seats loads nothing it does not use (issue 33):
no module of the terminal app's settings, no Textual, Rich or OR-Tools, no multiprocessing
for a run in one process (the table a run prints without ``--json`` is drawn with Rich)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROBE = ("import sys\n"
         "from calbench_cli.cli import main\n"
         "rc = main(sys.argv[1:])\n"
         "print(json.dumps([rc, sorted(m for m in sys.modules if m.split('.')[0] in "
         "('textual', 'rich', 'ortools', 'multiprocessing', 'openai') or m == 'calbench_tui.settings')]))\n")


def test_a_scripted_run_loads_no_interface_solver_or_worker_modules(tmp_path: Path):
    env_cache = {"CALBENCH_CACHE": str(tmp_path / "cache")}
    import os

    for i in range(2):  # the second run reads the oracle from the cache, as a suite run does
        proc = subprocess.run([sys.executable, "-c", "import json\n" + PROBE, "run", "--tasks", "canonical:0-1",
                               "--agents", "imap", "--concurrency", "1", "--json", "--db", str(tmp_path / f"g{i}.db")],
                              capture_output=True, text=True, env={**os.environ, **env_cache}, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        rc, loaded = json.loads(proc.stdout.strip().splitlines()[-1])
        assert rc == 0 and loaded == [], loaded
