"""The small two-datacenter scenarios the agreement benchmark and the simulator's tests share.

in:  nothing (plain data)
out: :data:`SMALL_PDD` and :func:`small_pdd_dict` (a scenario mapping whose plan solves in about a
     second), :data:`CASES` (its relay-heavy variants, by name: ``bench/bench_agreement.py``'s
     default cases and ``tests/placer/sim/test_relay_agreement.py``'s), :data:`LOW_HIT`,
     :func:`line` and :func:`classes` (the pieces the cases are made of)

A script under ``bench/`` imports it as a sibling module (the script's folder is on ``sys.path``
when it runs as ``python bench/NAME.py``); the tests import ``bench.agreement_cases``. It
imports only the standard library, so a benchmark runs from the installed package alone.
"""

from __future__ import annotations

import copy

#: Two datacenters: H100 for P and RelayDecode, cheap bandwidth-rich H20 for MainDecode
#: (0.80 USD/h: remote decode is the cheap place to decode), a 10 Gbit/s line. Low-hit
#: prompts cannot cross it within the SLA, so the plan relays them.
SMALL_PDD = {
    "name": "small-pdd", "model": "llama-3.1-8b", "kv_dtype": "bf16",
    "chips": [{"name": "H20", "base": "H20", "price_usd_per_h": 0.80}],
    "datacenters": [{"name": "dc-a", "inventory": {"H100-SXM": 8}}, {"name": "dc-b", "inventory": {"H20": 32}}],
    "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": 10, "rtt_ms": 30, "jitter_ms": 3}],
    "workload": {"arrival_rps": 24.0, "classes": [
        {"name": "hot", "share": 0.6, "input_tokens": 16384, "output_tokens": 512, "hit_rate": 0.97},
        {"name": "warm", "share": 0.25, "input_tokens": 16384, "output_tokens": 512, "hit_rate": 0.9},
        {"name": "cold", "share": 0.11, "input_tokens": 16384, "output_tokens": 512, "hit_rate": 0.4},
        {"name": "odd", "share": 0.04, "input_tokens": 16384, "output_tokens": 128, "hit_rate": 0.1}]},
    "sla": {"ttft_p90_s": 1.0, "tpot_s": 0.03},
    "options": {"tp_degrees": [1, 2]},
}

LOW_HIT = [
    {"name": "hot", "share": 0.5, "input_tokens": 16384, "output_tokens": 512, "hit_rate": 0.97},
    {"name": "low", "share": 0.4, "input_tokens": 16384, "output_tokens": 512, "hit_rate": 0.8},
    {"name": "odd", "share": 0.1, "input_tokens": 16384, "output_tokens": 128, "hit_rate": 0.1},
]


def small_pdd_dict(**changes) -> dict:
    """A deep copy of :data:`SMALL_PDD` with top-level ``changes``."""
    data = copy.deepcopy(SMALL_PDD)
    data.update(copy.deepcopy(changes))
    return data


def line(gbit_per_s: float) -> list[dict]:
    """The ``links`` of SMALL_PDD at another rate."""
    return [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": gbit_per_s, "rtt_ms": 30, "jitter_ms": 3}]


def classes(mix: list[dict]) -> dict:
    """A ``workload`` of these classes at SMALL_PDD's 24 req/s."""
    return {"arrival_rps": 24.0, "classes": mix}


CASES = {
    "10g-low-hit": dict(workload=classes(LOW_HIT)),
    "5g-low-hit": dict(links=line(5), workload=classes(LOW_HIT)),
    "5g": dict(links=line(5)),
    "10g-few-local-chips": dict(
        datacenters=[{"name": "dc-a", "inventory": {"H100-SXM": 6}}, {"name": "dc-b", "inventory": {"H20": 32}}]),
}
