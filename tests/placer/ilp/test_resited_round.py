"""The restricted round once more on the LP's sites at the seed's λ (issue 47): a seed on sites that hold a worse plan
than the whole model's is improved there, the plan is one of the whole model, and the model keeps its bounds."""

from dataclasses import replace

from placer.ilp import dinkelbach, starts
from placer.ilp.config import SolveConfig
from placer.ilp.formulation import build, pdd_architecture
from tests.placer.ilp.test_restricted_seed_sites import two_dc_problem


def test_a_seed_on_poor_sites_is_improved_on_the_sites_the_lp_opens_at_its_ratio():
    problem = two_dc_problem(h800_in_a=4)
    form = build(problem, pdd_architecture(problem))
    config = SolveConfig(time_limit_s=60).started()
    lam, _, least_cost, cheapest = starts._first_ratio(form, None, config)
    best = {(key.datacenter, key.chip) for key, var in form.n.items() if cheapest[var] > 1e-6}
    # the seed on one datacenter's other chips only (the LP's least-cost sites left out), as if its round ran out
    poor = {(key.datacenter, key.chip) for key in form.n if key.datacenter == "dc-b"} - best
    seed, _ = dinkelbach._seed_on(form, config, 1e-4, lam, least_cost, poor, None, None, None)
    assert seed is not None
    bounds = [(v.lb, v.ub) for v in form.model.vars]
    again = dinkelbach._resited(form, config, 1e-4, replace(seed, status="feasible"), least_cost)
    assert again.lam > 1.01 * seed.lam, "the LP's sites at the seed's ratio hold a better plan"
    assert form.model.violations(again.hint) == []
    assert [(v.lb, v.ub) for v in form.model.vars] == bounds
