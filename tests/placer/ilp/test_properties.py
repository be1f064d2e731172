"""Monotonicity properties of the optimum (hypothesis draws the scenarios)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.errors import InfeasiblePlanError
from placer.ilp.config import SolveConfig
from placer.ilp.dinkelbach import REL_GAP, solve_objective
from placer.ilp.formulation import build, pdd_architecture
from placer.problem import resolve
from placer.specs import parse_scenario
from tests.placer.conftest import micro_dict

TOL = 2 * REL_GAP  # each optimum is proven to within REL_GAP of the true ratio

scenarios = st.fixed_dictionaries({
    "h100": st.integers(2, 4),
    "l40s": st.integers(2, 8),
    "gbit": st.sampled_from([0.0, 0.5, 5.0, 25.0]),
    "rps": st.sampled_from([1.0, 3.0, 6.0]),
    "ttft": st.sampled_from([1.0, 2.0, 4.0]),
})


def _ratio(h100, l40s, gbit, rps, ttft):
    data = micro_dict(links=[{"src": "dc-a", "dst": "dc-b", "gbit_per_s": gbit, "rtt_ms": 20}])
    data["datacenters"] = [{"name": "dc-a", "inventory": {"H100-SXM": h100}},
                           {"name": "dc-b", "inventory": {"L40S": l40s}}]
    data["workload"]["arrival_rps"] = rps
    data["sla"]["ttft_p90_s"] = ttft
    problem = resolve(parse_scenario(data))
    form = build(problem, pdd_architecture(problem))
    try:
        outcome = solve_objective(form, SolveConfig())
    except InfeasiblePlanError:
        return 0.0, None
    crossing = sum(rate for f, rate in form.rates(outcome.values).items() if f.crosses)
    return outcome.ratio, crossing


SETTINGS = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(scenarios)
def test_more_link_bandwidth_never_lowers_bcr(s):
    base, _ = _ratio(**s)
    more, _ = _ratio(**{**s, "gbit": s["gbit"] + 10.0})
    assert more >= base * (1 - TOL)


@SETTINGS
@given(scenarios)
def test_more_inventory_never_lowers_bcr(s):
    base, _ = _ratio(**s)
    more, _ = _ratio(**{**s, "h100": s["h100"] + 2, "l40s": s["l40s"] + 2})
    assert more >= base * (1 - TOL)


@SETTINGS
@given(scenarios)
def test_a_tighter_ttft_never_raises_bcr(s):
    base, _ = _ratio(**s)
    tighter, _ = _ratio(**{**s, "ttft": s["ttft"] / 2})
    assert tighter <= base * (1 + TOL)


@SETTINGS
@given(scenarios)
def test_zero_link_bandwidth_gives_no_cross_dc_flow(s):
    _, crossing = _ratio(**{**s, "gbit": 0.0})
    assert crossing in (None, 0.0)
