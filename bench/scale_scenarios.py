"""Generated fleet-scale scenarios for :mod:`bench.bench_scale`: sites, chips per site, classes, link density, seed.

in:  sizes (sites, chips kinds per site, request classes), a link density and a seed
out: :func:`scale_scenario`: a scenario dict (parse it with :func:`placer.specs.parse_scenario`) shaped
     like ``examples/sixteen-dc.yaml``: DeepSeek-V3.2 FP8, tp 8/16/32, a ring of regional lines plus
     random chords (``link_density``: the share of the other site pairs that get a chord), 7.5 req/s
     per site, classes spread over hit rates like sixteen-dc's agentic mix (shares sum to 1).

Deterministic per seed; nothing is measured here, only shaped.
"""

from __future__ import annotations

import random

#: Chip kinds the sites draw from (catalog names, as sixteen-dc uses them).
CHIPS = ("H100-SXM", "H200-SXM", "B200", "L40S", "GB200", "MI300X", "A100-80G-SXM", "MI325X", "Gaudi3",
         "H20", "L20", "A800-80G-SXM", "H800-SXM", "Ascend-910B", "Ascend-910C")
RPS_PER_SITE = 7.5


def scale_scenario(sites: int, classes: int = 12, chips_per_site: int = 2, link_density: float = 0.05,
                   seed: int = 0) -> dict:
    """A scenario with ``sites`` datacenters of ``chips_per_site`` chip kinds each (32-192 chips per kind)."""
    if sites < 2 or classes < 1 or not 1 <= chips_per_site <= len(CHIPS) or not 0 <= link_density <= 1:
        raise ValueError(f"scale_scenario: sites >= 2, classes >= 1, 1 <= chips_per_site <= {len(CHIPS)}, "
                         f"0 <= link_density <= 1; got {sites}, {classes}, {chips_per_site}, {link_density}")
    rng = random.Random(seed)
    names = [f"dc-{i:03d}" for i in range(sites)]
    dcs = [{"name": n, "inventory": {c: 32 * rng.randint(1, 6) for c in rng.sample(CHIPS, chips_per_site)}}
           for n in names]
    links = []
    for i, n in enumerate(names):  # a ring: every site reaches the next
        links.append({"src": n, "dst": names[(i + 1) % sites], "gbit_per_s": rng.choice([25, 40, 100]),
                      "rtt_ms": rng.randint(5, 40)})
    ring = {(i, (i + 1) % sites) for i in range(sites)} | {((i + 1) % sites, i) for i in range(sites)}
    for i in range(sites):
        for j in range(i + 1, sites):
            if (i, j) not in ring and rng.random() < link_density:
                links.append({"src": names[i], "dst": names[j], "gbit_per_s": rng.choice([10, 25, 40]),
                              "rtt_ms": rng.randint(40, 180)})
    hits = sorted(rng.uniform(0.1, 0.998) for _ in range(classes))
    weights = [rng.uniform(0.5, 2.0) for _ in range(classes)]
    total = sum(weights)
    shares = [round(w / total, 6) for w in weights]
    shares[-1] = round(1.0 - sum(shares[:-1]), 6)
    workload = [{"name": f"class-{k:02d}", "share": shares[k], "input_tokens": 65536,
                 "output_tokens": rng.choice([300, 1024]), "hit_rate": round(hits[k], 4)} for k in range(classes)]
    return {"name": f"scale-{sites}x{classes}-s{seed}", "model": "deepseek-v3.2", "kv_dtype": "fp8",
            "weight_dtype": "fp8", "datacenters": dcs, "links": links,
            "workload": {"arrival_rps": RPS_PER_SITE * sites, "classes": workload},
            "sla": {"ttft_p90_s": 2.0, "tpot_s": 0.05}, "options": {"tp_degrees": [8, 16, 32]}}
