"""Shared by the db, api and jobs tests: per-test databases and small scenarios.

Every test gets its own database: a SQLite file under its tmp_path, or (when
``PLACER_TEST_POSTGRES_URL`` is set, as ``.ci/run`` does) a fresh PostgreSQL schema that
is dropped afterwards.
"""

from __future__ import annotations

import copy
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


#: llama-3.1-8b on a few H100s and L40S: every solve takes well under a second.
MICRO = {
    "name": "micro",
    "model": "llama-3.1-8b",
    "kv_dtype": "bf16",
    "datacenters": [
        {"name": "dc-a", "inventory": {"H100-SXM": 4}},
        {"name": "dc-b", "inventory": {"L40S": 4}},
    ],
    "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": 10, "rtt_ms": 20}],
    "workload": {
        "arrival_rps": 6.0,
        "classes": [
            {"name": "hot", "share": 0.8, "input_tokens": 16384, "output_tokens": 512, "hit_rate": 0.95},
            {"name": "cold", "share": 0.15, "input_tokens": 16384, "output_tokens": 512, "hit_rate": 0.3},
            {"name": "odd", "share": 0.05, "input_tokens": 16384, "output_tokens": 128, "hit_rate": 0.1},
        ],
    },
    "sla": {"ttft_p90_s": 2.0, "tpot_s": 0.05},
    "options": {"tp_degrees": [1, 2], "filter_min_input_tokens": 8192},
}


def micro(**changes) -> dict:
    """A deep copy of the micro scenario with top-level keys replaced."""
    data = copy.deepcopy(MICRO)
    data.update(copy.deepcopy(changes))
    return data


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
