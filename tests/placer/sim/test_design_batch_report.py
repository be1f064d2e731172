"""The simulator reports each decode pool's design batch by the plan's KV admission rule."""

from __future__ import annotations

from placer.flows import decode_design_for, instance
from placer.sim import SimConfig, simulate


def test_the_simulated_design_batch_is_the_one_the_plan_sized_the_pool_at(small_problem, small_plan, seed):
    """A user reads `utilization = mean batch / design batch` per pool: the design must be the plan's
    (reserved final context at the occupancy quantile), not a batch counting half the output."""
    result = simulate(small_problem, small_plan, SimConfig(requests=500, seed=seed)).data

    def pool_id(role, dc, chip, tp):
        return role, dc, chip, str(tp)

    planned = {pool_id(p.role, p.datacenter, p.chip, p.tp): p.design_batch for p in small_plan.pools
               if p.count and p.design_batch}
    simulated = {pool_id(p["role"], p["datacenter"], p["chip"], p["tp"]): p["design_batch"] for p in result["pools"]
                 if "design_batch" in p}
    assert planned and planned.keys() <= simulated.keys()
    for pool, batch in planned.items():
        # the plan's batch is at the scenario's mix, the simulator's at the classes the pool serves
        assert abs(simulated[pool] - batch) <= max(1, 0.05 * batch), (pool, simulated[pool], batch)
    classes = {c.name: c for c in small_problem.classes}
    relay = next(p for p in small_plan.pools if p.role == "RLD" and p.count)
    held = {}
    for a in small_plan.assignments:
        if a.key == relay.key and a.rps > 0:
            held[a.request_class] = held.get(a.request_class, 0.0) + a.rps * classes[a.request_class].output_tokens
    im = instance(small_problem, relay.chip, relay.tp)
    want = decode_design_for(small_problem, im, [(classes[n], w) for n, w in held.items()])[0]
    assert simulated[pool_id("RLD", relay.datacenter, relay.chip, relay.tp)] == want
