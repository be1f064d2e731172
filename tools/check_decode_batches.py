"""Every decode pool's planned batch against the batch the simulator lives at (issue 42, part 1).

    PYTHONPATH=. .venv/bin/python tools/check_decode_batches.py [SCENARIO.yaml ...] [--requests 20000] [--seed 7]

Default scenarios: the bundled examples (examples/*.yaml, the fleet one left out) and the issue's
user scenario (tests/data/scenarios/user-70b-h100-l40s.yaml). Each is solved (`optimize`, no
marginals) and replayed (`simulate`); then one line per decode pool with instances:

* ``B mix``: the design batch the MILP's slot row (C6) uses, at the scenario's class mix
  (:func:`placer.flows.decode_design`);
* ``B kv``: the batch the pool's KV holds for the classes the plan actually sends it, at the
  occupancy quantile (:func:`placer.flows.decode_design_for`, each class weighted by the
  requests it keeps there: req/s × seconds held);
* ``L plan``: the mean batch the plan expects per instance (Little's law, :func:`placer.evaluate.analyze`)
  and ``wait``: the share of its arrivals it expects to wait for KV room
  (:func:`placer.kv_admission.kv_wait_probability`);
* the simulator's mean and largest batch per instance and its mean and largest admission queue
  (requests waiting for a slot or for KV).

A pool whose planned load exceeds its KV batch (``L plan`` > ``B kv``) is marked ``KV!``: the
simulator's queue there is the issue's symptom (a pool planned at 47 living at 31 with 84
requests waiting). The scenario line gives the plan's TTFT P90 against the simulator's.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from placer.evaluate import _link_use, _relay_hold_s, analyze
from placer.flows import decode_design, decode_design_for
from placer.optimize import SolveConfig, optimize
from placer.pdd import P_RLD, PREFILL_ROLES, RLD
from placer.problem import resolve
from placer.sim import SimConfig, simulate
from placer.specs import load_scenario

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = [ROOT / "examples" / "pdd-two-dc.yaml", ROOT / "examples" / "eight-dc.yaml",
           ROOT / "tests" / "data" / "scenarios" / "user-70b-h100-l40s.yaml"]


def served_load(problem, plan, analysis) -> dict:
    """Per decode pool key: [(class, requests held at once per instance)] from the plan's assignments."""
    classes = {c.name: c for c in problem.classes}
    _, link_util = _link_use(problem, plan, classes)
    counts = {p.key: p.count for p in plan.pools if p.count > 0}
    load: dict = {}
    for a in plan.assignments:
        if a.role in PREFILL_ROLES or a.rps <= 0 or a.key not in analysis.decode:
            continue
        c, st = classes[a.request_class], analysis.decode[a.key]
        if a.role == RLD and a.pipeline != P_RLD:
            held = _relay_hold_s(problem, plan, a, c, link_util, st.im)
        else:
            held = c.output_tokens * (st.step_s or decode_design(problem, st.im)[1])
        if math.isfinite(held):
            load.setdefault(a.key, []).append((c, a.rps * held / counts[a.key]))
    return load


def check(path: Path, requests: int, seed: int) -> list[str]:
    """The scenario's line and one line per decode pool (module docstring)."""
    problem = resolve(load_scenario(path))
    plan = optimize(problem, SolveConfig(marginals=False, time_limit_s=120))
    analysis = analyze(problem, plan)
    sim = simulate(problem, plan, SimConfig(requests=requests, seed=seed))
    lines = [f"== {path.stem}: TTFT P90 plan {plan.metrics.ttft_p90_s:.3f} s sim {sim['ttft_p90_s']:.3f} s "
             f"({sim['ttft_p90_s'] / plan.metrics.ttft_p90_s - 1:+.1%}); goodput plan {plan.metrics.goodput_rps:.2f} "
             f"sim {sim['goodput_rps']:.2f} req/s"]
    load = served_load(problem, plan, analysis)
    rows = {(r["role"], r["datacenter"], r["chip"], str(r["tp"])): r for r in sim["pools"]}
    for key, st in sorted(analysis.decode.items(), key=lambda kv: tuple(map(str, kv[0]))):
        if key.role in PREFILL_ROLES or not st.busy:
            continue
        b_mix = decode_design(problem, st.im)[0]
        b_kv = decode_design_for(problem, st.im, load.get(key, []))[0]
        row = rows.get((key.role, key.datacenter, key.chip, str(key.tp)), {})
        flag = "KV!" if st.batch > b_kv * 1.0001 else ""
        lines.append(f"   {key.role:3s} {key.datacenter:12s} {key.chip:9s} tp{str(key.tp):3s} x{st.count:<3d} "
                     f"B mix {b_mix:4d}  B kv {b_kv:4d}  L plan {st.batch:6.1f} wait {st.kv_wait:5.1%} | sim mean {row.get('mean_batch', 0):6.1f}"
                     f" max {row.get('max_batch', 0):4d}  queue mean {row.get('mean_queue', 0):6.2f}"
                     f" max {row.get('max_queue', 0):4d} {flag}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", type=Path, default=DEFAULT)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    for path in args.scenarios:
        print("\n".join(check(path, args.requests, args.seed)), flush=True)


if __name__ == "__main__":
    main()
