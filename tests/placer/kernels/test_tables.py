"""The per-op tables as the planner reads them: exact on grid points, log-log between, monotone,
None outside what was measured; and the tables the repository ships."""

from __future__ import annotations

import ast
import math
import sys
from pathlib import Path

import pytest

from placer.catalog import get_chip
from placer.kernels import available, load, system_for_chip
from placer.kernels.tables import build_tree, read_rows, tree_log_seconds

VERSION = "1.3.0rc20"


def test_tree_is_exact_on_grid_points_and_follows_a_power_law_between():
    # seconds = c (1 + m)^1.5 (n / 1024): a power law in every axis, which log-log reproduces exactly
    def law(n, m):
        return 1e-6 * (1 + m) ** 1.5 * n / 1024

    points = {(n, m): law(n, m) for n in (1024, 4096) for m in (1, 16, 64, 256)}
    tree, moved = build_tree(points)
    assert moved == 0
    for shape, seconds in points.items():
        assert math.exp(tree_log_seconds(tree, shape)) == pytest.approx(seconds, rel=1e-12)
    for n, m in ((1024, 40), (2048, 3), (3000, 200)):
        # exact in m (a power of 1 + m); within 0.1 % in n (a power of n, axes in log(1 + n))
        assert math.exp(tree_log_seconds(tree, (n, m))) == pytest.approx(law(n, m), rel=1e-3)
    assert tree_log_seconds(tree, (1024, 300)) is None  # past the largest m
    assert tree_log_seconds(tree, (512, 16)) is None  # below the smallest n


def test_between_points_a_convex_cost_is_followed_not_cut_by_a_chord():
    # prefill attention: a fixed cost, then quadratic in the sequence
    def cost(isl):
        return 2e-5 + 1e-11 * isl * isl

    grid = (256, 1024, 4096, 16384, 65536)
    tree, _ = build_tree({(x,): cost(x) for x in grid})
    mids = (512, 2048, 8192, 32768)  # each halfway (in log) between two grid points
    chords = [abs(math.exp((math.log(cost(x / 2)) + math.log(cost(x * 2))) / 2) / cost(x) - 1) for x in mids]
    errors = [abs(math.exp(tree_log_seconds(tree, (x,))) / cost(x) - 1) for x in mids]
    assert max(chords) > 0.2  # a chord in log-log misses the knee by over 20 %
    assert max(errors) < 0.05


def test_a_noisy_series_is_made_monotone_and_says_how_far():
    points = {(m,): s for m, s in ((1, 1.0e-5), (2, 0.97e-5), (4, 1.05e-5), (8, 1.2e-5))}
    tree, moved = build_tree(points)
    values = [math.exp(tree_log_seconds(tree, (m,))) for m in (1, 1.5, 2, 3, 4, 8)]
    assert values == sorted(values)
    assert 0.01 < moved < 0.03


def test_sample_gemm_is_monotone_in_tokens_and_none_outside(sample_tables):
    tables = load("h200_sxm", "trtllm", data_dir=sample_tables)
    times = [tables.gemm_s("bf16", m, 8192, 4096) for m in range(1, 4097, 7)]
    assert all(t is not None for t in times)
    assert all(b >= a for a, b in zip(times, times[1:]))
    assert tables.gemm_s("bf16", 5000, 8192, 4096) is None  # m past the measured 4096
    assert tables.gemm_s("fp4", 64, 8192, 4096) is None  # a dtype not measured here
    assert tables.gemm_s("fp8", 64, 8192, 4096) > 0  # per-tensor fp8, measured beside bf16


def test_sample_decode_attention_grows_with_batch_and_context(sample_tables):
    tables = load("h200_sxm", "trtllm", data_dir=sample_tables)
    by_context = [tables.generation_attention_s(8, c, 32, 8, 128, "bf16") for c in (256, 1024, 3000, 4096)]
    assert all(b > a for a, b in zip(by_context, by_context[1:]))
    assert tables.generation_attention_s(8, 4096, 32, 8, 128, "bf16") < tables.generation_attention_s(
        64, 4096, 32, 8, 128, "bf16")
    assert tables.generation_attention_s(8, 4096, 32, 8, 64, "bf16") is None  # head dim not measured


def test_allreduce_falls_back_to_nccl_only_where_the_engine_has_no_row(sample_tables):
    tables = load("h200_sxm", "trtllm", data_dir=sample_tables)
    assert tables.allreduce_s("bf16", 1, 1e6) == 0.0
    assert tables.allreduce_s("bf16", 8, 1e6) > 0
    assert tables.allreduce_s("fp8", 8, 1e6) is None  # no custom fp8 rows and no NCCL table in the sample


def test_moe_answers_its_measured_configuration_only(sample_tables):
    tables = load("h200_sxm", "trtllm", data_dir=sample_tables)
    few, many = (tables.moe_s("fp8_block", t, 7168, 2048, 8, 256, tp=1, ep=8) for t in (16, 1024))
    assert 0 < few < many
    assert tables.moe_s("fp8_block", 16, 7168, 2048, 8, 256, tp=1, ep=8, distribution="balanced") is None
    assert tables.moe_s("fp8_block", 16, 4096, 2048, 8, 256, tp=1, ep=8) is None


def test_system_for_chip():
    assert system_for_chip("H200-SXM") == "h200_sxm"
    assert system_for_chip("b200") == "b200_sxm"
    assert system_for_chip("MI300X") is None


@pytest.mark.parametrize("module", ["placer.kernels.tables", "placer.kernels.tree"])
def test_what_the_planner_reads_imports_only_the_standard_library(module):
    __import__(module)
    source = Path(sys.modules[module].__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    foreign = {m for m in imported if m.split(".")[0] not in sys.stdlib_module_names
               and m not in ("__future__", "placer.kernels.tree")}
    assert not foreign, foreign


# --- the shipped tables ----------------------------------------------------------------------------

SHIPPED = set(available())


@pytest.mark.skipif(not SHIPPED, reason="no shipped kernel tables")
def test_shipped_tables_cover_the_five_systems_and_three_engines():
    systems = {s for s, _, _ in SHIPPED}
    assert {"h100_sxm", "h200_sxm", "b200_sxm", "a100_sxm", "l40s"} <= systems
    assert {e for s, e, _ in SHIPPED if s == "h200_sxm"} == {"trtllm", "sglang", "vllm"}
    tables = load("h200_sxm", "vllm")
    assert tables.provenance["licence"] == "Apache-2.0"
    assert {"gemm", "context_attention", "generation_attention", "moe", "allreduce", "nccl"} <= set(
        tables.families())


@pytest.mark.skipif(not SHIPPED, reason="no shipped kernel tables")
@pytest.mark.parametrize("engine", ["trtllm", "sglang", "vllm"])
def test_shipped_h200_decode_gemm_sits_between_the_hbm_floor_and_a_third_of_it(engine):
    # one decode GEMM of an 8B model's FFN: 14336 x 4096 bf16 weights read once per step
    tables = load(system_for_chip("H200-SXM"), engine)
    seconds = tables.gemm_s("bf16", 1, 14336, 4096)
    floor = 14336 * 4096 * 2 / (get_chip("H200-SXM").mem_bw_tbps * 1e12)
    assert floor <= seconds <= 3 * floor


@pytest.mark.skipif(not SHIPPED, reason="no shipped kernel tables")
def test_shipped_tables_cover_prefill_decode_mla_and_comm_on_h200():
    t = load("h200_sxm", "trtllm")
    assert t.context_attention_s(1, 4096, 32, 8, 128, "bf16") > 0
    with_prefix = t.context_attention_s(1, 1024, 32, 8, 128, "bf16", prefix=3072)
    assert with_prefix >= t.context_attention_s(1, 1024, 32, 8, 128, "bf16")
    assert t.generation_mla_s(64, 4096, 128, "bf16", tp=8) > 0
    assert t.context_mla_s(1, 4096, 128, "bf16", tp=8) > 0
    assert 0 < t.allreduce_s("bf16", 8, 16 * 2**20) < t.allreduce_s("bf16", 8, 256 * 2**20)
    assert t.nccl_s("all_gather", "bf16", 8, 2**20) > 0
    assert t.moe_s("fp8_block", 256, 7168, 2048, 8, 256, tp=1, ep=8) > 0
    assert t.alltoall_s("dispatch", 64, 7168, 8, 256, ep=8) > 0


def test_shipped_rows_load_as_numbers():
    for system, engine, version in sorted(SHIPPED)[:1]:
        directory = Path(load(system, engine, version).directory)
        rows = read_rows(next(directory.glob("allreduce.csv*")))
        assert all(float(r["latency_s"]) > 0 for r in rows)


def test_a_gemm_staircase_with_one_side_of_a_step_missing_reads_the_side_its_tile_is_on():
    """GEMM time steps just after each multiple of 16 rows and the database measures both sides of a
    step (m = 128 and 129). With only one side measured (the held-out check removes one), a row on
    the step's lower side reads its own tile's time, one past it the next tile's — not a chord across
    the step; far from any step, straight log-log segments as before."""
    from placer.kernels.tables import FAMILIES
    tile = FAMILIES["gemm"].tile
    flat, high = 10e-6, 14e-6
    pts = {(1024.0, 1024.0, 113.0): flat, (1024.0, 1024.0, 129.0): high, (1024.0, 1024.0, 160.0): high,
           (1024.0, 1024.0, 4096.0): 400e-6}
    tree, _ = build_tree(pts, cubic=False, tile=tile)
    assert math.exp(tree_log_seconds(tree, (1024.0, 1024.0, 128.0))) == pytest.approx(flat)
    pts2 = {(1024.0, 1024.0, 113.0): flat, (1024.0, 1024.0, 128.0): flat, (1024.0, 1024.0, 160.0): high}
    tree2, _ = build_tree(pts2, cubic=False, tile=tile)
    assert math.exp(tree_log_seconds(tree2, (1024.0, 1024.0, 129.0))) == pytest.approx(high)
    mid = math.exp(tree_log_seconds(tree, (1024.0, 1024.0, 1000.0)))
    assert high < mid < 400e-6
