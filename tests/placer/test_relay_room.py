"""RLD's KV room for the relay requests it holds while their KV crosses the line (issue 14, part 3)."""

from __future__ import annotations

import pytest

from placer.flows import RELAY_ROOM_QUANTILE, relay_room_factor
from placer.pdd import P_RLD, P_RLD_MD, RLD
from placer.ilp.formulation import build, pdd_architecture
from placer.problem import resolve
from placer.specs import parse_scenario
from tests.placer.sim.conftest import small_pdd_dict


@pytest.mark.parametrize("rho", [0.3, 0.5, 0.85, 0.95])
def test_room_holds_the_quantile_of_transfers_in_flight(rho):
    """Room for factor × mean requests leaves the line's geometric count above it only 1 % of the time."""
    room = relay_room_factor(rho) * rho / (1 - rho)
    assert rho ** room == pytest.approx(1 - RELAY_ROOM_QUANTILE, rel=1e-9)


def test_room_is_never_below_the_mean():
    assert relay_room_factor(0.999999) >= 1.0
    assert relay_room_factor(0.85, quantile=0.5) == 1.0  # the median of a geometric count is below its mean


def test_rld_memory_row_reserves_the_room_for_relayed_requests_only():
    """(C7) on RLD: a P-RLD-MD request weighs the room factor times its reserved KV with its occupancy
    headroom (Little's law, :mod:`placer.kv_admission`); a filtered P-RLD request, which no line
    transfer holds there, just that weight."""
    problem = resolve(parse_scenario(small_pdd_dict()))
    form = build(problem, pdd_architecture(problem))
    factor = relay_room_factor(problem.options.link_utilization_cap)
    rows = [r for r in form.model.rows if r.family in ("decode_slots", "decode_memory")]
    seen = set()
    for (k, pipe, _, q), var in form.z.items():
        if q.role != RLD:
            continue
        slots, memory = (next(r for r in rows if r.family == fam and var in r.coeffs)
                         for fam in ("decode_slots", "decode_memory"))
        busy_s = slots.coeffs[var]
        c = problem.classes[k]
        mean_gb_s = busy_s * form.decode[q].kv_weight(c) * problem.kv_bytes_per_token / 1e9
        assert memory.coeffs[var] == pytest.approx((factor if pipe == P_RLD_MD else 1.0) * mean_gb_s)
        seen.add(pipe)
    assert seen == {P_RLD_MD, P_RLD}
