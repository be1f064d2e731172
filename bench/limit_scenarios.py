"""Large generated scenarios whose data or solve outlive a short ``--time-limit``: the hardening tests'
(tests/placer/hardening/) and :mod:`bench.bench_time_limit`'s cases; and the time a solved plan's figures take.
Standard library only at import (placer is imported where it is used): :mod:`bench.bench_time_limit` loads this file
into a base checkout's process too."""

from __future__ import annotations

import random
import time
from pathlib import Path


def large_scenario(datacenters: int, classes: int, seed: int = 0) -> dict:
    """``datacenters`` datacenters in a ring of WAN lines, alternating GPU-A (Ascend-910B) and
    H20 inventories, and ``classes`` request classes with random prompts and hit rates."""
    rng = random.Random(seed)
    chips = ("Ascend-910B", "H20")
    dcs = [{"name": f"dc{i}", "inventory": {chips[i % 2]: 64, chips[(i + 1) % 2]: 32}} for i in range(datacenters)]
    links = [{"src": f"dc{i}", "dst": f"dc{(i + 1) % datacenters}", "gbit_per_s": 25, "rtt_ms": 5 + i % 40}
             for i in range(datacenters if datacenters > 2 else 1)]
    share = 1.0 / classes
    rows = [{"name": f"c{k}", "share": share, "input_tokens": rng.choice((8192, 16384, 32768, 65536)),
             "output_tokens": rng.choice((256, 512, 1024)), "hit_rate": round(rng.uniform(0.3, 0.99), 3)}
            for k in range(classes)]
    rows[-1]["share"] = 1.0 - share * (classes - 1)
    return {"name": f"generated-{datacenters}dc-{classes}k", "model": "deepseek-v3.2", "kv_dtype": "fp8",
            "weight_dtype": "fp8", "datacenters": dcs, "links": links,
            "workload": {"arrival_rps": 2.0 * datacenters, "classes": rows},
            "sla": {"ttft_p90_s": 4.0, "tpot_s": 0.05}, "options": {"tp_degrees": [8, 16]}}


def full_mesh(datacenters: int, classes: int) -> dict:
    """:func:`large_scenario` with a WAN line between every two datacenters instead of a ring."""
    scenario = large_scenario(datacenters=datacenters, classes=classes)
    scenario["links"] = [{"src": f"dc{i}", "dst": f"dc{j}", "gbit_per_s": 25, "rtt_ms": 5 + (i + j) % 40}
                         for i in range(datacenters) for j in range(i + 1, datacenters)]
    return scenario


def evaluation_s(scenario: Path, plan_json: str, why: bool = True) -> float:
    """Seconds this machine takes, now, to do again what ``placer optimize`` does with a solved plan after its
    ``--time-limit`` (which bounds reading the scenario and solving): work out the plan's figures
    (:func:`placer.optimize.with_metrics`: its queue laws, TTFT quantiles and tail notes), check it
    (:func:`placer.validate.validate`) and, for the table view (``why``; not with ``--json``), say why it looks
    as it does (:func:`placer.report.why.explain`). Timed in the tests and the bench, because it grows with the
    plan and with the machine's speed and load: ~1 s for a 10-datacenter plan here, 3-4 s for the 40-datacenter mesh's
    (its 400 P pools), about 2.5× that on a CI machine 2.5× slower."""
    from placer.optimize import as_problem, with_metrics
    from placer.plan import Plan
    from placer.report.why import explain
    from placer.specs import load_scenario
    from placer.validate import validate

    problem, plan = as_problem(load_scenario(scenario)), Plan.model_validate_json(plan_json)
    start = time.monotonic()
    plan = with_metrics(problem, plan)
    validate(problem, plan)
    if why:
        explain(problem, plan)
    return time.monotonic() - start
