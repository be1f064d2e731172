"""Issue 13 part 5's comparison, run on the CPU: `placer profile model`'s shape is the catalog model's,
bench/bench_engine_estimate.py measures a table and the points between its grid and predicts them by
both paths, and bench/gpu_check.sh carries the result into its summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench import bench_engine_estimate as bee
from placer.catalog import get_model
from placer.errors import InputError
from placer.profiles.records import ChipProfile
from profiler.model import between_grid, ffn_width, shape_for
from tests.profiler.conftest import ROOT

#: Relative slack on comparisons of a table's interpolated seconds. `Grid.seconds_at` is exp of a
#: weighted sum of log seconds: between equal corners (the isotonic clean-up levels a noisy dip of the
#: measured timings) it returns the corner give or take a few units in the last place, either side
#: (seen: 0.0015113718227556193 against 0.001511371822755618). The round-off is ~1e-14 relative (four
#: terms of |log s| < 20 at float64's 2.2e-16); 1e-12 is a hundred times that, while an interpolation
#: that left its corners would be off by their spread on the grid (percents between neighbouring sizes).
INTERPOLATION_ROUND_OFF = 1e-12


@pytest.mark.parametrize("model, ffn, tied", [("llama-3.1-8b", 14336, False), ("llama-3.2-1b", 8192, True),
                                              ("llama-2-7b", 11008, False), ("llama-2-70b", 28672, False)])
def test_profiled_shape_is_the_catalog_models(model, ffn, tied):
    """The FFN width the parameter count implies is the model's config's, embeddings tied where the model
    ties them, so the table's bytes are the ones the roofline of the catalog model reads."""
    m = get_model(model)
    name, shape = shape_for(model, {})
    assert name == model and ffn_width(m) == shape.intermediate_size == ffn and shape.tied_embeddings == tied
    assert shape.vocab_size == m.vocab
    assert shape.params() == pytest.approx(m.params_total_b * 1e9, rel=0.01)


def test_points_between_a_grid():
    assert between_grid("gpu") == ((256, 1024, 4096), (1024, 4096), (3, 16, 45), (1024, 2896))
    with pytest.raises(InputError, match="--grid must be one of .*got 'huge'"):
        between_grid("huge")


def test_engine_against_both_paths_on_the_cpu(tmp_path):
    """Every grid point measured twice and every point between them once; the table path answers from the
    table (exactly its value on the grid, between its neighbours off it), the roofline path from the chip."""
    out = tmp_path / "tiny.json"
    assert bee.main(["--tiny", "--reps", "1", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    pre, dec = result["profile"]["tables"][0]["prefill"], result["profile"]["tables"][0]["decode"]
    rows = result["points"]
    assert len([r for r in rows if r["on_grid"]]) == len(pre["sizes"]) * len(pre["context_tokens"]) \
        + len(dec["sizes"]) * len(dec["context_tokens"])
    assert {(r["phase"], r.get("tokens", r.get("batch")), r["context"]) for r in rows if not r["on_grid"]} \
        == {("prefill", 16, 16), ("decode", 1, 32)}
    assert all(r["table_source"].startswith("measured") for r in rows)
    measured = ChipProfile.model_validate(result["profile"]).tables[0]
    for r in rows:
        grid = (measured.prefill if r["phase"] == "prefill" else measured.decode).grid()
        size = r.get("tokens", r.get("batch"))
        if r["on_grid"]:  # the table's value there (after its isotonic clean-up)
            assert r["table_s"] == pytest.approx(grid.seconds_at(size, r["context"]))
        else:  # between the corners below and above it
            below = max(s for s in grid.sizes if s <= size), max(c for c in grid.contexts if c <= r["context"])
            above = min(s for s in grid.sizes if s >= size), min(c for c in grid.contexts if c >= r["context"])
            lo, hi = grid.seconds_at(*below), grid.seconds_at(*above)
            assert lo * (1 - INTERPOLATION_ROUND_OFF) <= r["table_s"] <= hi * (1 + INTERPOLATION_ROUND_OFF)
        assert r["roofline_s"] > 0 and r["measured_s"] > 0
    summary = result["summary"]
    assert [summary[k]["target_factor"] for k in bee.TARGETS] == [1.15, 1.05, 1.10, 1.10]
    assert summary["table between grid points, linear rule"]["n"] == 2
    assert summary["roofline"]["n"] == len(rows) and summary["table between grid points"]["n"] == 2


def test_the_linear_rule_is_exact_for_a_latency_affine_in_each_axis():
    """A decode step of a fixed part, a per-sequence part and a KV read ∝ batch × context: the linear rule
    gives it exactly between grid points, the table's log-log rule above it (the reason both are printed)."""
    from placer.profiles.tables import Grid

    step = lambda b, ctx: 4e-3 + 2e-5 * b + 1e-8 * b * ctx  # noqa: E731
    sizes, contexts = (1.0, 8.0, 32.0, 64.0), (512.0, 2048.0, 4096.0)
    grid = Grid(sizes, contexts, tuple(tuple(step(b, c) for c in contexts) for b in sizes))
    for b, c in ((3, 1024), (16, 2896), (45, 1024)):
        assert bee.linear_rule(grid, b, c) == pytest.approx(step(b, c), rel=1e-12)
        assert grid.seconds_at(b, c) > step(b, c) * 1.001


def test_a_float32_engine_is_compared_by_its_table_alone(tmp_path, capsys):
    assert bee.main(["--tiny", "--reps", "1", "--dtype", "float32"]) == 0
    printed = capsys.readouterr().out
    assert "roofline: no points (the roofline needs a bfloat16 engine)" in printed
    assert "table at grid points: 8 points" in printed


def test_bench_refuses_a_bad_grid(capsys):
    assert bee.main(["--tiny", "--grid", "huge"]) == 2
    assert "--grid must be one of" in capsys.readouterr().err


def test_gpu_check_dry_run_on_the_cpu_summarises_engine_vs_estimate(tmp_path):
    """The one prepared device script, off the GPU (tiny shapes, quick profile, no serving): its summary
    holds each model's comparison, as a device run's would."""
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, "PROFILE_DEVICE": "cpu",
           "KERNEL_DEVICE": "cpu", "PROFILE_ARGS": "--quick", "MODELS": "llama-3.2-1b", "MODEL_GRID": "tiny",
           "MODEL_REPS": "1", "MODEL_ARGS": "--tiny", "SERVE": "0"}
    r = subprocess.run(["bash", "bench/gpu_check.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=280)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    ev = summary["estimate_vs_measured"]["llama-3.2-1b"]
    assert ev["chip"] == "cpu" and ev["summary"]["table at grid points"]["n"] == 8
    assert "engine vs estimate llama-3.2-1b (cpu), roofline: 10 points" in r.stdout


def test_a_tied_model_is_profiled_with_its_lm_head_the_embedding():
    """A shape of Llama-3.2-1B keeps its tied embeddings through overrides: the engine runs without an
    LM head of its own and the parameter count holds the vocabulary matrix once."""
    from profiler.model import profile_model

    overrides = dict(bee.TINY_SHAPE)
    raw = profile_model("cpu", "llama-3.2-1b", 1, "tiny", None, 1, overrides)
    shape = raw["tables"][0]["model_shape"]
    assert shape["tied_embeddings"] is True
    assert shape["params"] == shape_for("llama-3.2-1b", overrides)[1].params() \
        == shape_for("llama-3.1-8b", overrides)[1].params() - shape["vocab_size"] * shape["hidden_size"]


def test_an_unusable_chip_profile_costs_the_efficiencies_not_the_run(tmp_path, capsys):
    """A chip profile that does not load (the profiler failed on the device) is named and skipped before
    any measurement; the comparison still runs, with the catalog's default efficiencies."""
    out = tmp_path / "r.json"
    missing = tmp_path / "profile.json"
    assert bee.main(["--tiny", "--reps", "1", "--chip-profile", str(missing), "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["chip_profile"] is None and str(missing) in result["chip_profile_error"]
    assert f"--chip-profile {missing}: not used" in capsys.readouterr().err
