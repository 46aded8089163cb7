"""Write the canonical suite's stored rows (``engine/suites/<SUITE_VERSION>.jsonl.zst``).

Run:  python -m calbench_devtools.canonical_rows

after any change that changes the canonical tasks (and with it ``engine.suite.SUITE_VERSION``):
the rows are rebuilt from the recipe (:func:`engine.suite.built_row`), one JSON row a line,
and compressed.  ``tests/engine/test_suite_stored.py`` fails until the stored file matches
the code again.
"""

from __future__ import annotations

import sys

import zstandard

from engine.suite import CANONICAL_SIZE, STORED_ROWS, built_row


def write_rows() -> int:
    payload = b"\n".join(built_row(i) for i in range(CANONICAL_SIZE)) + b"\n"
    STORED_ROWS.parent.mkdir(parents=True, exist_ok=True)
    STORED_ROWS.write_bytes(zstandard.ZstdCompressor(level=19).compress(payload))
    return len(payload)


def main() -> int:
    size = write_rows()
    print(f"wrote {STORED_ROWS} ({CANONICAL_SIZE} rows, {size:,} bytes of JSON, "
          f"{STORED_ROWS.stat().st_size:,} stored)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
