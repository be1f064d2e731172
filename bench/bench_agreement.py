"""ILP vs simulator, per pipeline: the relay-heavy test cases and the bundled examples (issue 14, part 3).

    PYTHONPATH=. .venv/bin/python bench/bench_agreement.py [--cases 5g-low-hit,pdd-two-dc,...]
        [--requests 30000] [--seed 7]

For each case (default: the four cases of ``tests/placer/sim/test_relay_agreement.py``, then
``examples/pdd-two-dc.yaml`` and ``examples/eight-dc.yaml``) solves the optimal plan
(``optimize``, no marginals), replays it in the simulator and prints
:func:`placer.sim.verify.agreement`: the mix's P90 TTFT, goodput and RLD token share, ILP
beside simulator, then every route (pipeline, source → destination) with its req/s, simulated
requests and the relative errors of its P90 TTFT and goodput (simulated / ILP − 1).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.sim import SimConfig, simulate
from placer.sim.verify import agreement
from placer.specs import load_scenario, parse_scenario
from tests.placer.sim.conftest import small_pdd_dict
from tests.placer.sim.test_relay_agreement import CASES

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DEFAULT = [*CASES, "pdd-two-dc", "eight-dc"]


def problem_of(name: str):
    """A test case by name, else ``examples/<name>.yaml``."""
    if name in CASES:
        return resolve(parse_scenario(small_pdd_dict(**CASES[name])))
    return resolve(load_scenario(EXAMPLES / f"{name}.yaml"))


def print_case(name: str, requests: int, seed: int) -> None:
    start = time.perf_counter()
    problem = problem_of(name)
    plan = optimize(problem, SolveConfig(marginals=False, time_limit_s=120))
    sim = simulate(problem, plan, SimConfig(requests=requests, seed=seed))
    a = agreement(problem, plan, sim)
    print(f"== {name}: mix P90 ILP {a['ilp_ttft_p90_s']:.3f} s sim {a['sim_ttft_p90_s']:.3f} s "
          f"({a['ttft_p90_error']:+.1%}); goodput ILP {a['ilp_goodput_rps']:.2f} sim {a['sim_goodput_rps']:.2f} "
          f"req/s ({a['goodput_error']:+.1%}); RLD share ILP {a['ilp_rld_token_share']:.3f} "
          f"sim {sim['rld_token_share']:.3f}  [{time.perf_counter() - start:.0f} s]")
    for r in a["routes"]:
        print(f"   {r['pipeline']:9s} {r['src']}->{r['dst']:<12s} {r['rps']:6.2f} req/s {r['sim_requests']:6d} req  "
              f"P90 ILP {r['ilp_ttft_p90_s']:.3f} sim {r['sim_ttft_p90_s']:.3f} ({r['ttft_p90_error']:+.1%})  "
              f"goodput ({r['goodput_error']:+.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(DEFAULT))
    parser.add_argument("--requests", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    for name in args.cases.split(","):
        print_case(name, args.requests, args.seed)


if __name__ == "__main__":
    main()
