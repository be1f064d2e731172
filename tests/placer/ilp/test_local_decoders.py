"""The local decoder rows (C19, placer.ilp.local_decoders): every plan keeps them, the MILP's optimum is the one
without them, and on a fleet whose LP decodes beside its prefill in fractions they tighten the relaxation."""

from __future__ import annotations

import pytest

from bench.scale_scenarios import scale_scenario
from placer.ilp.backends import solve
from placer.ilp.covers import take_covers
from placer.ilp.formulation import build, pdd_architecture
from placer.ilp.local_decoders import FAMILY
from placer.problem import resolve
from placer.specs import parse_scenario
from tests.placer.ilp.test_columns import CASES as COLUMN_CASES
from tests.placer.ilp.test_covers import _f
from tests.placer.sim.conftest import small_pdd_dict

# the relay cases of tests/placer/ilp/test_columns.py (lines, relays, three datacenters) and the default scenario
CASES = {"default": {}, **{name: COLUMN_CASES[name] for name in ("10g-low-hit", "three-dc", "5g")}}


def _forms(problem):
    """Without and with (C19), each with every row build keeps aside (C18 too) in its model."""
    arch = pdd_architecture(problem)
    plain, local = build(problem, arch, local_decoders=False), build(problem, arch)
    take_covers(plain)
    take_covers(local)
    local.model.rows.extend(local.local)
    return plain, local


def _ratio(form, values) -> float:
    good = sum(c * values[i] for i, c in form.goodput.items())
    return good / sum(c * values[i] for i, c in form.cost.items())


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_plan_keeps_the_rows_and_the_optimum_is_the_same(name):
    plain, local = _forms(resolve(parse_scenario(small_pdd_dict(**CASES[name]))))
    added = [row for row in local.model.rows if row.family == FAMILY]
    assert added, "a scenario with prefill and decoders in a datacenter gets the rows"
    ratio = _ratio(plain, _f(plain, 0.0).values)
    for at in (0.9 * ratio, ratio, 1.05 * ratio):
        best = _f(plain, at)
        # the plan found without the rows keeps every one of them, and the optimum with them is the same
        assert not [row.name for row in added if row.slack(best.values) < -1e-6 * max(1.0, abs(row.rhs))]
        assert _f(local, at).objective == pytest.approx(best.objective, rel=1e-6, abs=1e-6)


def test_the_rows_tighten_a_fleet_relaxation():
    """16 sites x 12 classes (65 K-token prompts): the LP prefills on nearly whole P pools and decodes beside them
    on a tenth of an instance per site; the rows make it pay for a decoder where it prefills (F at 288 req/USD:
    8.94 -> 6.48 req/s when written; the MILP's is below 0)."""
    problem = resolve(parse_scenario(scale_scenario(16, 12, seed=0)))
    plain, local = _forms(problem)
    rows = [row for row in local.model.rows if row.family == FAMILY]
    assert len(rows) >= 16  # a P chip per site that prefills for its own decoders, and the lines
    lam = 288.0 / 3600  # req/s per USD/h
    before, after = _f(plain, lam, relaxed=True).objective, _f(local, lam, relaxed=True).objective
    assert after < 0.85 * before


def _fleet(sites: int = 16, classes: int = 12):
    return resolve(parse_scenario(scale_scenario(sites, classes, seed=0)))


def test_a_fleet_keeps_the_rows_in_its_least_cost_lp_and_an_example_drops_them():
    """Where the least-cost LP is short of whole decoders beside its prefill (16 x 12: 4.0 of them) the rows go into
    it — its bound falls (332.1 -> 322.1 req/USD when written) and the seed starts from sites that pay for their
    decoders; where it is short of under one (sixteen-dc: 0.45) or the model proves exactly anyway (pdd-two-dc: 30
    integer columns) they are dropped and the LP is the one solved without them."""
    from placer.ilp.config import SolveConfig
    from placer.ilp.starts import _lp_ratio_bound
    from placer.specs import load_scenario

    problem = _fleet()
    plain, local = (build(problem, pdd_architecture(problem), local_decoders=flag) for flag in (False, True))
    config = SolveConfig(marginals=False).started()
    bound_plain, bound_local = _lp_ratio_bound(plain, config)[0], _lp_ratio_bound(local, config)[0]
    assert local.local and bound_local < 0.99 * bound_plain
    for name in ("sixteen-dc", "pdd-two-dc"):
        example = resolve(load_scenario(f"examples/{name}.yaml"))
        form = build(example, pdd_architecture(example))
        assert form.local
        assert _lp_ratio_bound(form, config)[0] == pytest.approx(
            _lp_ratio_bound(build(example, pdd_architecture(example), local_decoders=False), config)[0], rel=1e-9)
        assert form.local == []


def test_a_proving_round_takes_the_rows_its_lp_breaks():
    """Kept by the least-cost LP, the rows go into a proving round's model where its LP at λ breaks them; a solve
    from a plan or a ratio, which no least-cost LP judged, goes without them under 1,000 integer columns."""
    from placer.ilp.config import SolveConfig
    from placer.ilp.local_decoders import take_local_decoders
    from placer.ilp.starts import _first_ratio, _lp_ratio_bound

    problem = _fleet()
    warm = build(problem, pdd_architecture(problem))
    assert warm.local
    _first_ratio(warm, 280.0 / 3600, SolveConfig(marginals=False).started())  # a solve from a ratio
    assert warm.local == [] and take_local_decoders(warm, 60) == 0
    form = build(problem, pdd_architecture(problem))
    take_covers(form)
    _lp_ratio_bound(form, SolveConfig(marginals=False).started())
    before = len(form.local)
    lam = 288.0 / 3600
    m = form.model
    m.maximize, m.objective = True, dict(form.goodput)
    for i, c in form.cost.items():
        m.objective[i] = m.objective.get(i, 0.0) - lam * c
    f_before = solve(m.relaxed(), "ortools", 60).objective
    taken = take_local_decoders(form, 60)
    assert 0 < taken < before and len(form.local) == before - taken
    assert solve(m.relaxed(), "ortools", 60).objective < 0.85 * f_before  # 8.90 -> 6.44 req/s when written


def test_a_proving_round_starts_no_lp_it_cannot_finish_in_the_time_left():
    """A separation LP starts only with at least the time the model's last LP took left (the least-cost one's, to
    begin with): HiGHS ends an LP given 0.1 s a second late, and three such rounds ran 3.3 s past ``--time-limit``
    (10 datacenters × 20 classes). Out of time, the rows stay aside and the model is as it was."""
    from placer.ilp.config import SolveConfig
    from placer.ilp.local_decoders import take_local_decoders
    from placer.ilp.starts import _lp_ratio_bound

    problem = _fleet()
    form = build(problem, pdd_architecture(problem))
    take_covers(form)
    _lp_ratio_bound(form, SolveConfig(marginals=False).started())
    assert form.local and form.separation_s > 0  # the least-cost LP kept the rows; its time is known
    rows, aside = len(form.model.rows), len(form.local)
    assert take_local_decoders(form, 60, left_s=lambda: 0.5 * form.separation_s) == 0
    assert take_local_decoders(form, 60, left_s=lambda: 0.0) == 0
    assert len(form.model.rows) == rows and len(form.local) == aside
