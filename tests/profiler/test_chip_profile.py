"""`placer profile chip` on the CPU: plausible figures, provenance, roofline checks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from placer.profiles import RooflineExceededError, Rooflines, check_roofline
from placer.profiles.records import ChipProfile
from profiler import compute, run
from profiler.measure import measurement
from profiler.rooflines import for_cpu


@pytest.fixture(scope="module")
def cpu_profile(quick_run) -> ChipProfile:
    result, _, _ = quick_run
    assert result.exit_code == 0, result.output
    return ChipProfile.load(out_file(quick_run))


def out_file(quick_run):
    return quick_run[2]


def test_quick_cpu_run_finishes_under_a_minute_and_writes_the_file(quick_run):
    """`--json --out F` writes F and says so in one line: stdout is not flooded with the same JSON; the
    result is also kept under the user data dir, where `--profiles latest` finds it."""
    result, seconds, out = quick_run
    assert result.exit_code == 0, result.output
    assert seconds < 60
    assert result.stdout == "" and f"wrote {out}" in result.stderr
    kept = out.parent / "data" / "placer" / "profiles"
    assert [p.name for p in kept.iterdir()] and f"kept as {kept}" in result.stderr.replace("\n", "")
    assert ChipProfile.load(next(kept.iterdir())) == ChipProfile.load(out)


def test_every_dimension_is_measured_positive_below_its_roofline_with_a_spread(cpu_profile):
    dims = {m.dimension for m in cpu_profile.measurements}
    assert dims == {"compute", "memory_bandwidth", "memory_capacity", "interconnect"}
    for m in cpu_profile.measurements:
        assert m.median > 0 and min(m.samples) > 0, m.name
        assert m.roofline and max(m.samples) <= m.roofline, m.name
        assert m.min <= m.median <= m.max
        if m.unit != "bytes":  # rates are repeated: the spread is reported
            assert len(m.samples) >= 3 and m.spread_rel >= 0 and m.stdev_rel >= 0, m.name
            assert m.spread_rel == pytest.approx((m.max - m.min) / m.median)


def test_compute_covers_the_cpu_dtypes_and_records_what_it_skipped(cpu_profile):
    measured = set(cpu_profile.summary.compute_flop_per_s)
    assert {"fp32", "bf16", "fp16"} <= measured
    assert any(s.startswith("compute fp8") for s in cpu_profile.skipped)
    fp32 = [m for m in cpu_profile.measurements if m.dimension == "compute" and m.params["dtype"] == "fp32"]
    shapes = {m.params["m"] for m in fp32}
    assert len(shapes) >= 2  # several shapes, the best one reported
    best = max(m.median for m in fp32)
    assert cpu_profile.summary.compute_flop_per_s["fp32"] == best


def test_efficiency_is_measured_over_roofline(cpu_profile):
    eff, summary, roof = cpu_profile.efficiency, cpu_profile.summary, cpu_profile.rooflines
    assert eff.compute_efficiency == pytest.approx(summary.compute_flop_per_s["bf16"] / roof.flop_per_s["bf16"])
    assert eff.mem_bw_efficiency == pytest.approx(summary.mem_bw_bytes_per_s / roof.mem_bw_bytes_per_s)
    assert 0 < eff.compute_efficiency <= 1 and 0 < eff.mem_bw_efficiency <= 1
    assert eff.interconnect_efficiency is None  # no accelerator links on a CPU: the default stays
    assert roof.datasheet is False and "estimate" in roof.source


def test_capacity_is_capped_on_the_cpu_and_says_so(cpu_profile):
    cap = next(m for m in cpu_profile.measurements if m.dimension == "memory_capacity")
    assert cap.params["capped"] and cap.median <= 1 << 30
    assert any("capped" in s for s in cpu_profile.skipped)


def test_provenance_is_recorded(cpu_profile):
    p = cpu_profile.provenance
    assert cpu_profile.schema_version == 1 and cpu_profile.chip == "cpu"
    assert p.host and p.measured_by and p.device == "cpu" and p.device_model
    assert p.driver and p.torch_version and p.triton_version and p.measured_at.tzinfo is not None
    label = cpu_profile.measured_fields()["profile"]
    assert p.host in label and p.torch_version in label


def test_json_round_trip(cpu_profile, tmp_path):
    path = cpu_profile.save(tmp_path / "p.json")
    assert ChipProfile.load(path) == cpu_profile


def test_a_sample_above_the_roofline_is_rejected(cpu_profile):
    data = json.loads(cpu_profile.to_json())
    m = data["measurements"][0]
    m["samples"][-1] = m["roofline"] * 1.01
    with pytest.raises(RooflineExceededError, match="above the roofline"):
        ChipProfile.model_validate(data)


def test_an_efficiency_above_one_is_rejected(cpu_profile):
    data = json.loads(cpu_profile.to_json())
    data["efficiency"]["mem_bw_efficiency"] = 1.2
    with pytest.raises(RooflineExceededError):
        ChipProfile.model_validate(data)


def test_violations_recorded_by_the_runner_are_not_accepted(cpu_profile):
    data = json.loads(cpu_profile.to_json())
    data["roofline_violations"] = ["compute / matmul bf16: measured 2e15 is above the roofline 1e15"]
    with pytest.raises(RooflineExceededError):
        ChipProfile.model_validate(data)


def test_check_roofline_on_a_plain_measurement():
    ok = measurement("compute", "matmul", "flop_per_s", [1.0, 2.0, 3.0], roofline=3.0)
    check_roofline(ok)
    too_fast = measurement("compute", "matmul", "flop_per_s", [1.0, 2.0, 3.5], roofline=3.0, roofline_source="sheet")
    with pytest.raises(RooflineExceededError, match="sheet"):
        check_roofline(too_fast)


def test_the_runner_stops_at_a_figure_above_the_roofline(monkeypatch):
    """A roofline far below what the CPU does makes the first step fail, typed."""
    real = for_cpu()
    tiny = Rooflines(source="a deliberately wrong bound", datasheet=False,
                     flop_per_s={k: 1.0 for k in real.flop_per_s}, mem_bw_bytes_per_s=real.mem_bw_bytes_per_s,
                     mem_capacity_bytes=real.mem_capacity_bytes)
    monkeypatch.setattr(run, "for_cpu", lambda: tiny)
    monkeypatch.setattr(compute, "CPU_SHAPES_QUICK", [(64, 64, 64)])
    with pytest.raises(RooflineExceededError, match="deliberately wrong"):
        run.profile_chip("cpu", quick=True, reps=3)


def test_bad_device_is_a_clear_input_error(cli_app):
    from typer.testing import CliRunner

    result = CliRunner().invoke(cli_app, ["profile", "chip", "--device", "tpu"])
    assert result.exit_code == 2
    assert "not supported" in result.output


def test_the_gpu_side_runner_and_the_link_probe_need_no_pydantic():
    """`python3 -m profiler.run` and `profiler.link` run on a machine with torch and the standard library."""
    code = ("import sys, profiler.run, profiler.link; "
            "print(sorted(m for m in ('pydantic', 'typer', 'rich', 'yaml') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr


def test_the_table_folds_on_an_80_column_terminal_and_cuts_nothing(cpu_profile):
    """`placer profile chip` at 80 columns: every figure readable, no cell cut to an ellipsis."""
    from rich.console import Console

    from profiler.cli import chip_view

    console = Console(width=80, record=True, color_system=None)
    console.print(chip_view(cpu_profile))
    text = console.export_text()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    for m in cpu_profile.measurements:
        assert m.name in text
    assert "efficiency (measured" in text
