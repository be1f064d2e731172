"""Shared by the db, api and jobs tests: per-test databases and small scenarios.

Every test gets its own database: a SQLite file under its tmp_path, or (when
``PLACER_TEST_POSTGRES_URL`` is set, as ``.ci/run`` does) a fresh PostgreSQL schema that
is dropped afterwards.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

POSTGRES_URL = os.environ.get("PLACER_TEST_POSTGRES_URL")
NO_POSTGRES = "PLACER_TEST_POSTGRES_URL is not set (.ci/run starts a local PostgreSQL and sets it)"

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.skipif(not POSTGRES_URL, reason=NO_POSTGRES)),
]


@contextmanager
def database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty database of ``backend`` that exists for the ``with`` block."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'placer.db'}"
        return
    from db.session import normalize_url

    base = normalize_url(POSTGRES_URL)
    schema = f"test_{uuid.uuid4().hex[:16]}"
    admin = create_engine(base)
    try:
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


from tests.placer.conftest import MICRO  # noqa: E402,F401  (the planner tests' small scenario)
from tests.placer.conftest import micro_dict as micro  # noqa: E402


def two_dc(**changes) -> dict:
    """Prefill-capable H100s are scarce in dc-a, cheap L40S plenty in dc-b, 10 Gbit/s between:
    the plan's WAN use and RelayDecode depend on how much KV misses the prefix cache."""
    return micro(name="two-dc", datacenters=[{"name": "dc-a", "inventory": {"H100-SXM": 2}},
                                             {"name": "dc-b", "inventory": {"L40S": 8}}],
                 workload={**MICRO["workload"], "arrival_rps": 4.0}, **changes)


def write_trace(path: Path, hot_hit_rate: float, rps: float = 4.0, requests: int = 400) -> Path:
    """An agentic-looking JSONL trace: 80 % hot requests at ``hot_hit_rate``, 15 % cold
    (hit 0.3), 5 % long-input short-output anomalous ones, interleaved evenly at ``rps``."""
    mix = [(0.80, 512, hot_hit_rate), (0.15, 512, 0.3), (0.05, 128, 0.1)]
    lines = []
    for i in range(requests):
        u, acc = (i * 0.6180339887) % 1.0, 0.0
        for share, output, hit in mix:
            acc += share
            if u < acc:
                break
        lines.append(json.dumps({"timestamp": i * 1000.0 / rps, "input_length": 16384, "output_length": output,
                                 "hit_rate": hit}))
    path.write_text("\n".join(lines) + "\n")
    return path
