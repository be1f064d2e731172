"""``placer frontier`` over scenario knobs (issue 45, part 3): GPU-B's price ratio, the line's
bandwidth, the hit-rate mix, the load and the model each change only their own figure, and a bad
value is named before any solve."""

from __future__ import annotations

from pathlib import Path

import pytest

from placer.errors import InputError
from placer.frontier import run_frontier
from placer.knobs import chip_pair, mean_hit_rate, scenario_variant, variant
from placer.problem import resolve
from placer.specs import load_scenario

FLAGSHIP = Path(__file__).parents[3] / "examples" / "pdd-two-dc.yaml"


@pytest.fixture(scope="module")
def flagship():
    return load_scenario(FLAGSHIP)


def test_gpu_a_and_gpu_b_are_the_prefill_side_and_the_decode_side_chips(flagship):
    assert chip_pair(resolve(flagship)) == ("Ascend-910B", "GPU-B")


def test_price_ratio_prices_gpu_b_against_gpu_a_and_leaves_the_rest(flagship):
    base = resolve(flagship)
    p = variant(flagship, "price", 0.8)
    assert p.chips["GPU-B"].price_usd_per_h == pytest.approx(0.8 * base.chips["Ascend-910B"].price_usd_per_h)
    assert p.chips["Ascend-910B"].price_usd_per_h == base.chips["Ascend-910B"].price_usd_per_h
    assert p.links == base.links


def test_gbit_sets_every_line_both_ways(flagship):
    p = variant(flagship, "gbit", 100)
    assert {link.gbit_per_s for link in p.links.values()} == {100.0} and len(p.links) == 2


def test_hit_moves_the_mean_and_keeps_the_low_hit_tail_the_tail(flagship):
    shifted = scenario_variant(flagship, "hit", 0.7)
    assert mean_hit_rate(flagship) == pytest.approx(0.919, abs=1e-3)
    assert mean_hit_rate(shifted) == pytest.approx(0.7, abs=1e-3)
    before = [c.hit_rate for c in flagship.workload.classes]
    after = [c.hit_rate for c in shifted.workload.classes]
    assert all(after[i] <= after[j] for i in range(len(before)) for j in range(len(before)) if before[i] < before[j])
    assert after[before.index(max(before))] > after[before.index(min(before))]


def test_model_and_load_knobs(flagship):
    assert variant(flagship, "model", "qwen3-32b").model.name == "qwen3-32b"
    assert variant(flagship, "load", 3.0).arrival_rps == 3.0


@pytest.mark.parametrize(("knob", "value", "words"), [
    ("price", 0.0, "--values"), ("gbit", -5.0, "--values"), ("hit", 1.0, "--values"),
    ("model", "gpt-7", "not in the catalog"), ("colour", 1.0, "--vary"),
])
def test_bad_knob_values_are_named_before_any_solve(flagship, knob, value, words):
    with pytest.raises(InputError, match=words):
        run_frontier(flagship, knob, [value], [], use_ray=False)


def test_unknown_chips_for_the_price_ratio_are_named(flagship):
    with pytest.raises(InputError, match="--chips: unknown chip 'H900'"):
        run_frontier(flagship, "price", [1.0], [], use_ray=False, chips=("Ascend-910B", "H900"))


def test_a_second_knob_must_differ_from_the_first(flagship):
    with pytest.raises(InputError, match="--by"):
        run_frontier(flagship, "gbit", [25.0], [], use_ray=False, by="gbit", by_values=[50.0])


@pytest.mark.parametrize("fraction", [0.0, 1.5])
def test_min_served_outside_zero_one_is_named(flagship, fraction):
    with pytest.raises(InputError, match="--min-served"):
        run_frontier(flagship, "gbit", [25.0], [], use_ray=False, min_served=fraction)


@pytest.mark.slow
def test_with_min_served_below_one_pdd_may_leave_load_that_does_not_pay(flagship):
    """At 100 Gbit/s PDD forced to carry all 10 req/s keeps GPU-B prefilling (BCR ≈ 188); allowed to
    leave load unserved, as same-dc-pd within its inventory does, it runs P on the 910Bs and MD on
    GPU-B and carries ~9 req/s at a BCR above same-dc-pd's."""
    whole = run_frontier(flagship, "gbit", [100.0], ["same-dc-pd"], use_ray=False, time_limit_s=10)
    part = run_frontier(flagship, "gbit", [100.0], ["same-dc-pd"], use_ray=False, time_limit_s=10, min_served=0.3)
    pdd_whole, base = whole[0], whole[1]
    pdd_part = part[0]
    assert pdd_whole["bcr_requests_per_usd"] < base["bcr_requests_per_usd"] < pdd_part["bcr_requests_per_usd"]
    assert pdd_part["served_rps"] < pdd_part["offered_rps"]
