"""Fixtures for planner tests: small scenarios that solve in well under a second."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from placer.problem import resolve
from placer.specs import parse_scenario

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

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


def micro_dict(**changes) -> dict:
    """A deep copy of the micro scenario with top-level keys replaced."""
    data = copy.deepcopy(MICRO)
    data.update(copy.deepcopy(changes))
    return data


@pytest.fixture
def micro():
    return parse_scenario(micro_dict())


@pytest.fixture
def micro_problem(micro):
    return resolve(micro)
