"""The MILP's decode KV row holds the occupancy quantile the evaluation and the simulator live (issue 42,
rnd-7-33): one law (:func:`placer.kv_admission.kv_occupancy_variance`, negative binomial where the step grows
with the batch) for the row, the design batch and the waiting law."""

from __future__ import annotations

import math

import pytest

from placer.flows import (
    class_footprint_tokens, class_kv_weight, decode_context_tokens, decode_design, decode_fixed_share,
    decode_kv_headroom, instance,
)
from placer.kv_admission import KvHeadroom, kv_design_batch, kv_occupancy_variance, occupancy_quantile_z
from placer.problem import resolve
from placer.specs import parse_scenario
from tests.placer.conftest import micro_dict

#: Long contexts, a loose TPOT: the H100's KV, not its step, sets the design batch.
KV_BOUND = micro_dict(workload={"arrival_rps": 6.0, "classes": [
    {"name": "chat", "share": 0.6, "input_tokens": 6000, "output_tokens": 600, "hit_rate": 0.5},
    {"name": "agent", "share": 0.4, "input_tokens": 24000, "output_tokens": 300, "hit_rate": 0.9}]},
    sla={"ttft_p90_s": 2.0, "tpot_s": 0.2})


def _evaluation_quantile(problem, im, held: float) -> tuple[float, float]:
    """(M + z·√V, K − f̄) of an instance holding ``held`` requests of the scenario's mix, by the evaluation's
    law: the occupancy variance at the step's fixed share where the batch runs."""
    weights = {c.name: c.share * c.output_tokens for c in problem.classes}
    total = sum(weights.values())
    load = [(c.share, held * weights[c.name] / total, class_footprint_tokens(c)) for c in problem.classes]
    phi = decode_fixed_share(im, held, decode_context_tokens(problem.classes))
    mean = sum(h * f for _, h, f in load)
    arrival = sum(a * f for a, _, f in load) / sum(a for a, _, _ in load)
    return mean + occupancy_quantile_z() * math.sqrt(kv_occupancy_variance(load, phi)), im.kv_capacity_tokens - arrival


def test_the_milp_kv_row_binds_where_the_evaluation_puts_the_occupancy_quantile():
    """Where the MILP's row lets a pool of the scenario's mix fill up to, the evaluation's law puts the KV
    at the quantile: the row and the evaluation agree. With the Poisson variance the row let the H100 hold
    ~20 % more requests, whose quantile the evaluation put 16 % past the KV."""
    problem = resolve(parse_scenario(KV_BOUND))
    im = instance(problem, "H100-SXM", 1)
    row = decode_kv_headroom(problem, im, over_dispersed=True)
    weights = {c.name: c.share * c.output_tokens for c in problem.classes}
    per_held = sum(weights[c.name] * class_kv_weight(row, c) for c in problem.classes) / sum(weights.values())
    held = row.limit_tokens / per_held  # the mean batch at which the row binds
    quantile, room = _evaluation_quantile(problem, im, held)
    assert quantile == pytest.approx(room, rel=0.01)
    assert held < decode_design(problem, im)[0]  # the KV binds, not the TPOT
    assert decode_fixed_share(im, held, decode_context_tokens(problem.classes)) < 0.8  # the law is not Poisson here


def test_the_design_batch_falls_with_the_steps_growth_and_the_row_stays_the_tangent_bound():
    """A step that grows with the batch spreads the number held (negative binomial): fewer requests fit at
    the quantile, and the row's linear bound admits no more than the exact quantile, at the tangent mix or
    a pool of only one class."""
    capacity, mix = 400_000, [(0.8, 0.8 * 400, 2_400), (0.2, 0.2 * 800, 33_600)]
    poisson, nb = kv_design_batch(capacity, mix), kv_design_batch(capacity, mix, fixed_share=0.3)
    assert nb < 0.95 * poisson
    row = KvHeadroom.for_mix(capacity, mix, fixed_share=0.3, where_binds=True)
    held = sum(w for _, w, _ in mix)
    linear = row.limit_tokens / (sum(w * row.weight(f) for _, w, f in mix) / held)
    assert linear == pytest.approx(nb, rel=1e-6)  # exact where it binds
    short = [(1.0, 1.0, 2_400)]
    one = row.limit_tokens / row.weight(2_400)
    assert one <= kv_design_batch(capacity - (row.arrival_tokens - 2_400), short, fixed_share=0.3) * (1 + 1e-9)
