"""The bundled examples say what they are: the flagship's GPU pair as the PDD report describes
it, and a 16-datacenter × 15-chip scale instance."""

from __future__ import annotations

import pytest

from placer.problem import resolve
from placer.specs import load_scenario
from tests.placer.conftest import EXAMPLES


@pytest.fixture(scope="module")
def flagship():
    return resolve(load_scenario(EXAMPLES / "pdd-two-dc.yaml"))


def _chips_in(problem, dc: str):
    return [problem.chips[name] for name in problem.dc(dc).inventory]


def test_flagship_gpu_b_is_mediocre_at_prefill_far_better_at_decode_and_20_to_30_percent_pricier(flagship):
    (gpu_a,), (gpu_b,) = _chips_in(flagship, "dc-a"), _chips_in(flagship, "dc-b")
    # GPU-A compute-dense, bandwidth-poor; GPU-B the other way round
    assert gpu_a.bf16_tflops > gpu_b.bf16_tflops and gpu_b.mem_bw_tbps > 2 * gpu_a.mem_bw_tbps
    assert 1.20 <= gpu_b.price_usd_per_h / gpu_a.price_usd_per_h <= 1.30
    assert all(c.share > 0 for c in flagship.classes) and any(c.filterable for c in flagship.classes)
    (line,) = {(min(k), max(k)): v for k, v in flagship.links.items()}.values()
    assert 10 <= line.gbit_per_s <= 25


def test_sixteen_dc_holds_every_catalog_chip_kind_in_sixteen_datacenters():
    problem = resolve(load_scenario(EXAMPLES / "sixteen-dc.yaml"))
    kinds = {chip for dc in problem.datacenters for chip in dc.inventory}
    assert len(problem.datacenters) == 16 and len(kinds) == 15
    # every datacenter is reachable over the lines (one connected network)
    seen, todo = set(), [problem.datacenters[0].name]
    while todo:
        dc = todo.pop()
        if dc not in seen:
            seen.add(dc)
            todo += [d for (s, d) in problem.links if s == dc]
    assert seen == set(problem.dc_names)
