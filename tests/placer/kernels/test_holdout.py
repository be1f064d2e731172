"""The per-op held-out check on the sample of real rows: it predicts the shapes it held out, and
``against`` measures what thinning the GEMM grid costs."""

from __future__ import annotations

from placer.kernels import load
from placer.kernels.holdout import against, holdout
from placer.kernels.importer import import_tables

from .conftest import SAMPLE_DB


def test_every_fifth_shape_is_held_out_and_predicted(sample_tables):
    results = {r.family: r for r in holdout(load("h200_sxm", "trtllm", data_dir=sample_tables))}
    gemm = results["gemm"]
    assert gemm.held_out == 2 * 7  # two dtypes of 36 shapes each: indices 2, 7, ..., 32
    assert 0 < gemm.covered <= gemm.held_out
    assert 0 <= gemm.median_rel <= gemm.p90_rel < 0.5


def test_against_predicts_what_thinning_left_out(tmp_path):
    import_tables(SAMPLE_DB, "h200_sxm", "trtllm", out=tmp_path / "full")
    prov = import_tables(SAMPLE_DB, "h200_sxm", "trtllm", out=tmp_path / "thin", thin=True)
    thinned = prov["families"]["gemm"]["dropped"]["thinned (m = 16j + 1)"]
    assert thinned > 0
    result = {r.family: r for r in against(load("h200_sxm", "trtllm", data_dir=tmp_path / "thin"),
                                           load("h200_sxm", "trtllm", data_dir=tmp_path / "full"))}
    assert result["gemm"].held_out == thinned
    assert result["gemm"].covered == thinned  # every thinned m lies between two kept ones
