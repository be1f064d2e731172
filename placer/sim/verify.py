"""Close the loop between the ILP and the simulator.

* :func:`agreement` — the ILP side's predictions (:func:`placer.evaluate.analyze`)
  beside a simulation of the same plan at the same load: P90 TTFT and SLA goodput,
  overall and per route (pipeline, source, destination), with relative errors.
* :func:`blame` — from a simulation, what made the late requests: for each route whose
  simulated P90 TTFT misses the SLA, the line it crosses (when the same source's routes
  that cross no line meet the SLA, or, with none to compare, when the line peaked at its
  capacity), else its source's P pools whose queues were longest, and any decode pool
  on the route where requests waited for a slot.
* :func:`verify_plan` — the ``placer optimize --verify`` loop: simulate the plan; while
  the simulated P90 TTFT misses the SLA, cut the planned capacity of just what
  :func:`blame` names (:mod:`placer.cuts`: that pool's utilisation, that line's
  Gbit/s) by √(SLA / the route's simulated P90), kept within [0.7, 0.9] per round, and
  re-solve; stop when the simulated P90 meets the SLA, or report why it could not
  (re-solves spent, a cut with no plan, every culprit at the floor :data:`MIN_FACTOR`).
  Each round's simulated vs predicted P90 TTFT and BCR go to ``log``; the final plan's
  notes record the rounds and the simulated metrics.
* :func:`check_plan_by_simulation` — ``placer optimize``'s default check (no repair): one short
  simulation (:data:`CHECK_REQUESTS` requests) of the plan, its figures beside the promise as a
  :class:`~placer.plan.Verification`, with a warning where P90 TTFT, attainment or goodput differ
  by more than :data:`AGREEMENT` or the simulation misses the SLA; optionally the plan simulated
  with each chip's speed off by ±X (:mod:`placer.perturb`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from placer.cuts import Cuts, solve_with_cuts
from placer.errors import InputError, PlacerError
from placer.evaluate import analyze
from placer.p_queues import mixture_quantile
from placer.pdd import MD, P, P_D, P_MD, P_RLD, P_RLD_MD, RLD, D
from placer.optimize import SolveConfig, as_problem, optimize
from placer.perturb import perturbed_runs
from placer.plan import Verification
from placer.sim.config import SimConfig
from placer.sim.engine import simulate
from placer.slacheck import QUANTILE, TOLERANCE
from placer.verify_defaults import CHECK_REQUESTS  # the command line reads it without the simulator

#: A round cuts a culprit's planned capacity by √(SLA / P90), kept within these bounds.
STEP_MIN, STEP_MAX = 0.7, 0.9
#: No pool or line is planned below this fraction of its planned capacity.
MIN_FACTOR = 0.3
#: P pools of the late route's source whose mean queue is at least this share of the longest are blamed.
QUEUE_SHARE = 0.5
#: A decode pool is blamed when on average at least this many requests waited for a slot.
DECODE_QUEUE_REQUESTS = 1.0
#: A line is saturated when its peak reached this share of its capacity.
LINE_PEAK_SHARE = 0.95
#: Simulated and planned figures further apart than this (relative) earn a warning.
AGREEMENT = 0.10


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
        ilp_good = rps - sum(f.rps * f.prob_lost(problem.ttft_p90_s) for f in flows)
        sim_rows = sim.route(pipe, src, dst)
        sim_p90 = sim_rows[0]["ttft_p90_s"] if sim_rows else 0.0
        sim_good = sim_rows[0]["goodput_rps"] if sim_rows else 0.0
        rows.append({"pipeline": pipe, "src": src, "dst": dst, "rps": rps,
                     "sim_requests": sim_rows[0]["requests"] if sim_rows else 0,
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


@dataclass(frozen=True)
class Culprit:
    """What made late requests: a physical pool (role, dc, chip, tp) or a line (src, dst)."""

    kind: str  # "pool" | "line"
    key: tuple
    step: float  # factor on its planned capacity this round
    why: str


def _crosses_line(route: dict) -> bool:
    """Whether the route's first token waits for a WAN transfer (P-MD / P-D over a line)."""
    return route["pipeline"] in (P_MD, P_D) and route["src"] != route["dst"]


def _pool_key(row: dict) -> tuple:
    return (row["role"], row["datacenter"], row["chip"], row["tp"])


def _route_culprits(sim, route: dict, sla: float) -> list[Culprit]:
    """The culprits of one late route (see the module docstring)."""
    p90, src, dst = route["ttft_p90_s"], route["src"], route["dst"]
    step = min(STEP_MAX, max(STEP_MIN, (sla / p90) ** 0.5)) if p90 > 0 else STEP_MAX
    name = f"{route['pipeline']} {src}->{dst} (P90 {p90:.3f} s)"
    out = []
    unlined = [r for r in sim["routes"] if r["src"] == src and not _crosses_line(r)]
    link = next((ln for ln in sim["links"] if ln["src"] == src and ln["dst"] == dst), None)
    saturated = bool(link) and link["peak_gbit_per_s"] >= LINE_PEAK_SHARE * link["gbit_per_s_capacity"]
    line_only = _crosses_line(route) and ((unlined and all(r["ttft_p90_s"] <= sla for r in unlined))
                                          or (not unlined and saturated))
    if _crosses_line(route) and (line_only or saturated):
        why = ("same-source routes off the line meet the SLA" if unlined and line_only else
               f"the line peaked at {link['peak_gbit_per_s']:.1f} of {link['gbit_per_s_capacity']:.1f} Gbit/s")
        out.append(Culprit("line", (src, dst), step, f"{name}: {why}"))
    if not line_only:
        ps = [p for p in sim["pools"] if p["role"] == P and p["datacenter"] == src]
        longest = max((p["mean_queue"] for p in ps), default=0.0)
        out += [Culprit("pool", _pool_key(p), step, f"{name}: {p['mean_queue']:.2f} requests queue at P on average")
                for p in ps if longest > 0 and p["mean_queue"] >= QUEUE_SHARE * longest]
    decode_at = [(MD, dst), (D, dst)] + ([(RLD, src)] if route["pipeline"] in (P_RLD_MD, P_RLD) else [])
    out += [Culprit("pool", _pool_key(p), step, f"{name}: {p['mean_queue']:.2f} requests wait for a decode slot")
            for p in sim["pools"] if (p["role"], p["datacenter"]) in decode_at
            and p.get("mean_queue", 0.0) >= DECODE_QUEUE_REQUESTS]
    return out


def blame(sim, sla: float) -> list[Culprit]:
    """The pools and lines that made the late requests of ``sim`` (one entry per key, the
    deepest step among the routes that name it)."""
    late = [r for r in sim["routes"] if r["ttft_p90_s"] > sla]
    if not late and sim["routes"]:  # the mixture misses although no single route does: its worst route
        late = [max(sim["routes"], key=lambda r: r["ttft_p90_s"])]
    found: dict[tuple, Culprit] = {}
    for route in late:
        for c in _route_culprits(sim, route, sla):
            if (c.kind, c.key) not in found or c.step < found[(c.kind, c.key)].step:
                found[(c.kind, c.key)] = c
    return list(found.values())


def _tightened(cuts: Cuts, culprits: list[Culprit], share: float = 1.0) -> Cuts:
    """``cuts`` with each culprit's factor multiplied by its step (``share`` of the way there)."""
    pools, lines = dict(cuts.pools), dict(cuts.lines)
    for c in culprits:
        table = pools if c.kind == "pool" else lines
        old = table.get(c.key, 1.0)
        table[c.key] = max(MIN_FACTOR, old * (1 - share * (1 - c.step)))
    return Cuts(pools, lines)


@dataclass
class VerifyOutcome:
    plan: object
    rounds: list[dict] = field(default_factory=list)
    holds: bool = False
    reason: str = ""  # why the SLA could not be met in simulation (empty when it holds)


def _record(outcome: VerifyOutcome, n: int, plan, sim, problem, cuts: Cuts, say) -> bool:
    """Append round ``n`` to ``outcome`` and log it; whether its simulated P90 meets the SLA."""
    p90, m, sla, cap = sim["ttft_p90_s"], plan.metrics, problem.ttft_p90_s, problem.options.utilization_cap
    holds = p90 <= sla
    outcome.rounds.append({"round": n, "cuts": cuts.words(), "sim_ttft_p90_s": p90, "ilp_ttft_p90_s": m.ttft_p90_s,
                           "sim_goodput_rps": sim["goodput_rps"], "ilp_bcr_requests_per_usd": m.bcr_requests_per_usd,
                           "sim_bcr_requests_per_usd": sim["bcr_requests_per_usd"], "holds": holds})
    say(f"verify round {n}: utilisation cap {cap:.3f}, cuts: {cuts.words()}: simulated P90 TTFT {p90:.3f} s vs "
        f"predicted {m.ttft_p90_s:.3f} s ({'meets' if holds else 'misses'} the SLA {sla:g} s); BCR simulated "
        f"{sim['bcr_requests_per_usd']:.2f} vs predicted {m.bcr_requests_per_usd:.2f} req/USD")
    return holds


def _resolve(problem, cuts: Cuts, culprits: list[Culprit], solve: SolveConfig, say):
    """(plan, cuts) after cutting ``culprits`` (half the step if the full one has no plan), or (None, reason)."""
    last = ""
    for share in (1.0, 0.5):
        tighter = _tightened(cuts, culprits, share)
        if tighter == cuts:
            return None, ("every pool and line that made late requests is already cut to "
                          f"{MIN_FACTOR:g} of its planned capacity ({cuts.words()})")
        say(f"verify: re-solving with cuts {tighter.words()}")
        try:
            return solve_with_cuts(problem, tighter, solve), tighter
        except PlacerError as err:
            say(f"verify: no plan with cuts {tighter.words()} ({err})")
            last = f"no plan once {tighter.words()}: {err}"
    return None, last


def verify_plan(scenario, plan=None, rounds: int = 3, config: SimConfig | None = None,
                solve: SolveConfig = SolveConfig(), log: Callable[[str], None] | None = None) -> VerifyOutcome:
    """Simulate ``plan`` (optimised first if None); while the simulated P90 TTFT misses the SLA,
    cut what :func:`blame` names and re-solve, at most ``rounds`` times (see the module docstring).

    ``outcome.holds`` says whether the last plan meets the SLA in simulation; if not,
    ``outcome.reason`` says why no further round could help.

    ``solve.time_limit_s`` bounds the whole loop with the first solve: a given ``plan``'s
    ``solver.seconds`` count as spent (unless ``solve`` is already started), and no re-solve
    starts once the budget is used up (the reason then says so)."""
    if rounds < 0:
        raise InputError(f"verify-rounds must be >= 0, got {rounds}")
    solve = solve.but(marginals=False).started(spent_s=plan.solver.seconds if plan is not None else 0.0)
    problem = as_problem(scenario)
    config = config or SimConfig()
    say = log or (lambda _msg: None)
    plan = plan if plan is not None else optimize(problem, solve)
    sla = problem.ttft_p90_s
    outcome, cuts, solves = VerifyOutcome(plan), Cuts(), 0
    while True:
        sim = simulate(problem, plan, config)
        if _record(outcome, solves, plan, sim, problem, cuts, say):
            outcome.holds = True
            break
        if solves >= rounds:
            outcome.reason = (f"after {solves} re-solve(s) the simulated P90 TTFT is still {sim['ttft_p90_s']:.3f} s "
                              f"> SLA {sla:g} s (raise --verify-rounds, or add capacity)")
            break
        if solve.spent():
            outcome.reason = (f"the time limit of {solve.time_limit_s:g} s ran out after {solves} re-solve(s); the "
                              f"simulated P90 TTFT is {sim['ttft_p90_s']:.3f} s > SLA {sla:g} s (raise --time-limit)")
            break
        culprits = blame(sim, sla)
        if not culprits:
            outcome.reason = "the simulation names no pool queue or line that made the late requests"
            break
        for c in culprits:
            say(f"verify: late requests from {c.kind} {', '.join(map(str, c.key))}: {c.why}")
        new_plan, got = _resolve(problem, cuts, culprits, solve, say)
        solves += 1
        if new_plan is None:
            outcome.reason = got
            break
        plan = outcome.plan = new_plan
        cuts = got
    last = outcome.rounds[-1]
    note = (f"verified by simulation in {len(outcome.rounds)} round(s), {solves} re-solve(s): P90 TTFT simulated "
            f"{last['sim_ttft_p90_s']:.3f} s (predicted {last['ilp_ttft_p90_s']:.3f} s) "
            f"{'meets' if outcome.holds else 'misses'} the SLA {sla:g} s; simulated goodput "
            f"{last['sim_goodput_rps']:.3f} req/s, BCR {last['sim_bcr_requests_per_usd']:.2f} req/USD "
            f"(predicted {last['ilp_bcr_requests_per_usd']:.2f}); cuts: {last['cuts']}")
    outcome.plan = outcome.plan.model_copy(update={"notes": [*outcome.plan.notes, note]})
    return outcome


def _off(sim: float, plan: float) -> bool:
    return abs(_rel(sim, plan)) > AGREEMENT


def check_plan_by_simulation(problem, plan, config: SimConfig | None = None, perturb: float = 0.0,
                             extremes_only: bool = True, perturb_requests: int | None = None) -> Verification:
    """The plan simulated once beside its promise (module docstring), and with ``perturb`` > 0 the
    plan at perturbed chip speeds (:func:`placer.perturb.perturbed_runs`; ``extremes_only``: only
    every chip slow and every chip fast; ``perturb_requests``: requests of each such run, default
    ``config``'s)."""
    config = config or SimConfig(requests=CHECK_REQUESTS)
    d = simulate(problem, plan, config).data
    m, sla = plan.metrics, problem.ttft_p90_s
    met = d["ttft_p90_s"] <= sla * (1 + TOLERANCE) and d["sla_attainment"] >= QUANTILE - TOLERANCE
    warnings = []
    if not met:
        warnings.append(f"the simulation misses the SLA: TTFT P90 {d['ttft_p90_s']:.3f} s (SLA {sla:g} s), "
                        f"{100 * d['sla_attainment']:.1f} % of requests within it")
    for what, sim, planned, fmt in (("TTFT P90", d["ttft_p90_s"], m.ttft_p90_s, "{:.3f} s"),
                                    ("SLA attainment", d["sla_attainment"], m.sla_attainment, "{:.1%}"),
                                    ("goodput", d["goodput_rps"], m.goodput_rps, "{:.3f} req/s")):
        if _off(sim, planned):
            warnings.append(f"simulated {what} {fmt.format(sim)} is {100 * _rel(sim, planned):+.0f} % off the "
                            f"planned {fmt.format(planned)}")
    moved = dataclasses.replace(config, requests=perturb_requests) if perturb_requests else config
    runs = perturbed_runs(problem, plan, perturb, moved, extremes_only) if perturb > 0 else []
    return Verification(ttft_p90_s=d["ttft_p90_s"], ttft_p99_s=d["ttft_p99_s"], sla_attainment=d["sla_attainment"],
                        goodput_rps=d["goodput_rps"], bcr_requests_per_usd=d["bcr_requests_per_usd"],
                        requests=d["requests"], seed=config.seed, sla_met=met, warnings=warnings,
                        perturbation=perturb if perturb > 0 else None, perturbed=runs)
