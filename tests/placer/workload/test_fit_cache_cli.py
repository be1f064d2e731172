"""`placer workload fit --prefix-cache-tokens`: hits as a finite cache realises them, and the simulator
drawing a fitted class's spread (issue 42, part 2)."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.sim.sources import _Served

TRACE = Path(__file__).resolve().parents[2] / "data" / "mooncake_conversation_2000.jsonl"


def _mean_hit(*args: str) -> float:
    result = CliRunner().invoke(app, ["workload", "fit", str(TRACE), *args])
    assert result.exit_code == 0, result.output
    classes = yaml.safe_load(result.stdout.split("\n", 1)[1])["workload"]["classes"]
    tokens = sum(c["share"] * c["input_tokens"] for c in classes)
    return sum(c["share"] * c["input_tokens"] * c["hit_rate"] for c in classes) / tokens


def test_a_finite_prefix_cache_fits_lower_hits_than_the_ideal():
    ideal, small = _mean_hit(), _mean_hit("--prefix-cache-tokens", "1000000")
    assert small < 0.5 * ideal  # bundled trace: ~0.29 ideal, ~0.05 with 1M tokens (placer/workload/README.md)


def test_a_bad_cache_size_is_refused_naming_the_option():
    result = CliRunner().invoke(app, ["workload", "fit", str(TRACE), "--prefix-cache-tokens", "0"])
    assert result.exit_code == 2 and "--prefix-cache-tokens" in result.output


def test_the_simulator_sees_a_fitted_class_spread():
    class Fitted:
        input_tokens, output_tokens, hit_rate, new_tokens_cv2, output_tokens_cv2 = 1000, 100, 0.0, 0.8, 0.3

    served = _Served(1.0, Fitted(), 0)
    assert (served.new_tokens_cv2, served.output_tokens_cv2) == (0.8, 0.3)
