"""The chip profile on a CUDA device (run with -m gpu on a GPU machine)."""

from __future__ import annotations

import pytest
import torch

from placer.profiles.records import ChipProfile
from profiler.run import profile_chip

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.fixture(scope="module")
def gpu_profile() -> ChipProfile:
    return ChipProfile.model_validate(profile_chip("cuda", quick=True))


def test_gpu_profile_measures_all_four_dimensions_below_the_datasheet(gpu_profile):
    assert gpu_profile.rooflines.datasheet
    assert {m.dimension for m in gpu_profile.measurements} == {
        "compute", "memory_bandwidth", "memory_capacity", "interconnect"}
    eff = gpu_profile.efficiency
    assert 0.2 < eff.compute_efficiency <= 1 and 0.3 < eff.mem_bw_efficiency <= 1
    assert 0.5 < eff.mem_capacity_fraction <= 1


def test_gpu_profile_has_triton_bandwidth_and_pinned_host_copies(gpu_profile):
    names = {m.name for m in gpu_profile.measurements}
    assert {"copy triton", "triad triton", "h2d pinned", "d2h pinned"} <= names
    assert gpu_profile.provenance.driver and gpu_profile.provenance.cuda_runtime
