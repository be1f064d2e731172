"""Close the loop between the ILP and the simulator.

* :func:`agreement` — the ILP side's predictions (:func:`placer.evaluate.analyze`)
  beside a simulation of the same plan at the same load: P90 TTFT and SLA goodput,
  overall and per route (pipeline, source, destination), with relative errors.
* :func:`verify_plan` — the ``placer optimize --verify`` loop: simulate the plan; while
  the simulated P90 TTFT misses the SLA, re-solve with a tighter
  ``options.utilization_cap`` (less queueing at P, RLD, MD) and, in the same proportion,
  ``options.link_utilization_cap`` (less sharing of the WAN lines), at most ``rounds``
  times. Each round is reported through ``log``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from placer.errors import InputError, PlacerError
from placer.evaluate import analyze
from placer.flows import mixture_quantile
from placer.optimize import SolveConfig, as_problem, optimize
from placer.sim.config import SimConfig
from placer.sim.engine import simulate

#: Each verify round multiplies the utilisation cap by at most this much.
CAP_STEP = 0.85
MIN_CAP = 0.2


def _rel(sim: float, ilp: float) -> float:
    if ilp == 0:
        return 0.0 if sim == 0 else float("inf")
    return sim / ilp - 1.0


def agreement(problem, plan, sim) -> dict:
    """ILP-predicted vs simulated P90 TTFT and goodput, overall and per route."""
    a = analyze(problem, plan)
    m = a.metrics
    rows = []
    groups: dict[tuple, list] = {}
    for f in a.flows:
        groups.setdefault((f.pipeline, f.p_pool[1], f.dst), []).append(f)
    for (pipe, src, dst), flows in sorted(groups.items()):
        rps = sum(f.rps for f in flows)
        ilp_p90 = mixture_quantile(flows, 0.90)
        ilp_good = rps - sum(f.rps * f.prob_late(problem.ttft_p90_s) for f in flows)
        sim_rows = sim.route(pipe, src, dst)
        sim_p90 = sim_rows[0]["ttft_p90_s"] if sim_rows else 0.0
        sim_good = sim_rows[0]["goodput_rps"] if sim_rows else 0.0
        rows.append({"pipeline": pipe, "src": src, "dst": dst, "rps": rps,
                     "ilp_ttft_p90_s": ilp_p90, "sim_ttft_p90_s": sim_p90, "ttft_p90_error": _rel(sim_p90, ilp_p90),
                     "ilp_goodput_rps": ilp_good, "sim_goodput_rps": sim_good,
                     "goodput_error": _rel(sim_good, ilp_good)})
    return {
        "ilp_ttft_p90_s": m.ttft_p90_s, "sim_ttft_p90_s": sim["ttft_p90_s"],
        "ttft_p90_error": _rel(sim["ttft_p90_s"], m.ttft_p90_s),
        "ilp_goodput_rps": m.goodput_rps, "sim_goodput_rps": sim["goodput_rps"],
        "goodput_error": _rel(sim["goodput_rps"], m.goodput_rps),
        "ilp_rld_token_share": m.rld_token_share, "sim_rld_token_share": sim["rld_token_share"],
        "routes": rows,
    }


@dataclass
class VerifyOutcome:
    plan: object
    rounds: list[dict] = field(default_factory=list)
    holds: bool = False


def verify_plan(scenario, plan=None, rounds: int = 3, config: SimConfig | None = None,
                solve: SolveConfig = SolveConfig(), log: Callable[[str], None] | None = None) -> VerifyOutcome:
    """Simulate ``plan`` (optimised first if None); tighten the utilisation cap and re-solve until
    the simulated P90 TTFT meets the SLA or ``rounds`` re-solves are spent.

    Each step multiplies the cap by √(SLA / simulated P90), kept within [0.7, 0.85]; a cap
    with no feasible plan is remembered and the next try bisects towards it."""
    solve = solve.but(marginals=False)
    if rounds < 0:
        raise InputError(f"verify-rounds must be >= 0, got {rounds}")
    problem = as_problem(scenario)
    config = config or SimConfig()
    say = log or (lambda _msg: None)
    if plan is None:
        plan = optimize(problem, solve)
    cap = problem.options.utilization_cap
    sla = problem.ttft_p90_s
    outcome = VerifyOutcome(plan)
    failed_cap = None  # the loosest cap found to have no plan
    solves = 0
    while True:
        sim = simulate(problem, plan, config)
        p90 = sim["ttft_p90_s"]
        holds = p90 <= sla
        outcome.rounds.append({"round": solves, "utilization_cap": cap, "sim_ttft_p90_s": p90,
                               "ilp_ttft_p90_s": plan.metrics.ttft_p90_s, "sim_goodput_rps": sim["goodput_rps"],
                               "sim_bcr_requests_per_usd": sim["bcr_requests_per_usd"], "holds": holds})
        say(f"verify round {solves}: utilisation cap {cap:.3f}: simulated P90 TTFT {p90:.3f} s "
            f"{'meets' if holds else 'misses'} the SLA {sla:g} s (ILP predicted {plan.metrics.ttft_p90_s:.3f} s); "
            f"simulated BCR {sim['bcr_requests_per_usd']:.2f} req/USD")
        if holds:
            outcome.holds = True
            break
        new_plan = None
        while solves < rounds and new_plan is None:
            target = max(MIN_CAP, cap * max(0.7, min(CAP_STEP, (sla / p90) ** 0.5)))
            if failed_cap is not None:
                target = max(target, (cap + failed_cap) / 2)  # bisect towards the loosest cap with no plan
            if cap - target < 0.005:
                break
            solves += 1
            say(f"verify: re-solving with utilisation cap {target:.3f}")
            scale = target / problem.options.utilization_cap  # the WAN lines' cap shrinks alike
            tighter = dataclasses.replace(problem, options=problem.options.model_copy(update={
                "utilization_cap": target,
                "link_utilization_cap": max(0.05, problem.options.link_utilization_cap * scale)}))
            try:
                new_plan = optimize(tighter, solve)
            except PlacerError as err:
                say(f"verify: no plan at utilisation cap {target:.3f} ({err})")
                failed_cap = target
                continue
            cap = target
        if new_plan is None:
            say("verify: no re-solve left that could help; keeping the last plan")
            break
        plan = outcome.plan = new_plan
    last = outcome.rounds[-1]
    note = (f"verified by simulation: P90 TTFT {last['sim_ttft_p90_s']:.3f} s "
            f"{'meets' if outcome.holds else 'misses'} the SLA {sla:g} s at utilisation cap "
            f"{last['utilization_cap']:.3f} after {solves} re-solve(s)")
    outcome.plan = outcome.plan.model_copy(update={"notes": [*outcome.plan.notes, note]})
    return outcome
