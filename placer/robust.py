"""``placer optimize --robust X``: a plan that keeps the SLA when every chip is X slower.

in:  a :class:`~placer.problem.Problem`, a :class:`~placer.ilp.config.SolveConfig`, X in (0, 0.9]
out: a :class:`~placer.plan.Plan` solved against the chips of :func:`placer.perturb.derated` (compute
     and memory rates × (1 − X)); its ``metrics`` are re-derived at the nominal chips (what it gives
     when the model is right, comparable with any other plan), and ``robust`` records its promise at
     the slower chips (planned TTFT P90, BCR, whether that meets the SLA) and what it costs: the BCR
     of the plan made for the nominal chips (solved with what is left of the time limit, no
     marginals) and the share of it the robust plan gives up.

Peers report this as the gap between an exact optimum and a plan that survives its model's error.
A fleet scenario is refused (InputError): its members share chips and would all be derated alike,
but its evaluation path has no robust report yet.
"""

from __future__ import annotations

from placer.errors import InfeasiblePlanError, InputError, PlacerError
from placer.optimize import SolveConfig, as_problem, optimize, with_metrics
from placer.perturb import check_fraction, derated
from placer.plan import Plan, Robust
from placer.problem import FleetProblem


def optimize_robust(scenario, slowdown: float, config: SolveConfig = SolveConfig(), measured: dict | None = None,
                    nominal: Plan | None = None) -> Plan:
    """The plan for chips ``slowdown`` slower, reported at nominal speed (module docstring).
    ``nominal``: the nominal plan when the caller has it (else solved here)."""
    check_fraction("robust", slowdown)
    if isinstance(scenario, FleetProblem) or getattr(scenario, "is_fleet", False):
        raise InputError("--robust: plans one model; a fleet scenario (models:) is not supported")
    config = config.check().started()
    problem = as_problem(scenario, measured)
    try:
        slow_plan = optimize(derated(problem, slowdown), config)
    except InfeasiblePlanError as err:
        raise InfeasiblePlanError(f"with every chip {100 * slowdown:g} % slower (--robust): {err.reason}") from None
    slow = slow_plan.metrics
    plan = with_metrics(problem, slow_plan)
    if nominal is None:
        try:
            nominal = optimize(problem, config.but(marginals=False))
        except PlacerError:
            nominal = None  # out of time or no plan: the cost is left unknown
    base = nominal.metrics.bcr_requests_per_usd if nominal is not None else None
    cost = 1 - plan.metrics.bcr_requests_per_usd / base if base else None
    robust = Robust(slowdown=slowdown, ttft_p90_s_slow=slow.ttft_p90_s,
                    bcr_requests_per_usd_slow=slow.bcr_requests_per_usd,
                    sla_met_slow=bool(slow.sla_met), nominal_bcr_requests_per_usd=base, bcr_cost=cost)
    note = (f"robust: planned with every chip {100 * slowdown:g} % slower (TTFT P90 {slow.ttft_p90_s:.3f} s there, "
            f"{'meets' if slow.sla_met else 'misses'} the SLA); metrics at nominal speed")
    if cost is not None:
        note += f"; BCR {plan.metrics.bcr_requests_per_usd:.2f} vs {base:.2f} req/USD for the nominal plan " \
                f"({100 * cost:+.1f} % given up)"
    return plan.model_copy(update={"robust": robust, "notes": [*plan.notes, note]})

