"""engine.events.wall_clock writes exactly what datetime's isoformat writes."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import engine.events as events


def test_same_text_as_isoformat(monkeypatch):
    for ns in (0, 1_764_521_379_000_000_000, 1_764_521_379_000_123_000, 1_764_521_379_999_999_000,
               1_764_521_380_000_001_000, 4_102_444_799_500_000_000):
        monkeypatch.setattr(time, "time_ns", lambda ns=ns: ns)
        us = ns // 1000
        want = datetime.fromtimestamp(us // 1_000_000, timezone.utc).replace(microsecond=us % 1_000_000).isoformat()
        assert events.wall_clock() == want
