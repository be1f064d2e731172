"""RLD's KV room for the relay requests it holds while their KV crosses the line (issue 14, part 3)."""

from __future__ import annotations

import pytest

from placer.flows import P_RLD_MD, RELAY_ROOM_QUANTILE, RLD, relay_room_factor
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
    """(C7) on RLD: a P-RLD-MD request weighs the room factor more than a P-RLD one with the same hold."""
    problem = resolve(parse_scenario(small_pdd_dict()))
    form = build(problem, pdd_architecture(problem))
    factor = relay_room_factor(problem.options.link_utilization_cap)
    rows = [r for r in form.model.rows if r.family == "decode_memory" and r.name.startswith(f"decode_memory[{RLD}")]
    relayed = {var for key, var in form.z.items() if key[1] == P_RLD_MD and key[3].role == RLD}
    assert rows and relayed
    for row in rows:
        for var in relayed & row.coeffs.keys():
            name = form.model.vars[var].name  # z[class,P-RLD-MD,dst,pool]
            k = next(i for i, c in enumerate(problem.classes) if name.startswith(f"z[{c.name},"))
            c = problem.classes[k]
            slots = next(r for r in form.model.rows if r.family == "decode_slots" and var in r.coeffs)
            busy_s = slots.coeffs[var]
            tokens = busy_s / next(d for q, d in form.decode.items() if q.label in name).step_s
            mean_gb_s = busy_s * (c.input_tokens + tokens / 2) * problem.kv_bytes_per_token / 1e9
            assert row.coeffs[var] == pytest.approx(factor * mean_gb_s)
