"""Export fixtures: the bundled examples' plans (frozen inputs, made by `placer optimize
examples/<name>.yaml --json`; frozen so that a planner change does not move the goldens)
and the engine-args venv that holds the engines' own parsers (tools/engine_args_venv.sh)."""

from __future__ import annotations

import json
import os
import subprocess
from functools import cache
from pathlib import Path

import pytest

from placer.export import ExportSettings, export_plan
from placer.plan import load_plan, parse_plan
from placer.problem import resolve
from placer.specs import load_scenario

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PLANS = HERE / "plans"
GOLDEN = HERE / "golden"
EXAMPLES = ("pdd-two-dc", "eight-dc")
MODELS = {"pdd-two-dc": "deepseek-ai/DeepSeek-V3.2", "eight-dc": "deepseek-ai/DeepSeek-V3.2"}
VENV_PYTHON = Path(os.environ.get("PLACER_ENGINE_ARGS_VENV", ROOT / "build" / "engine-args-venv")) / "bin" / "python"


#: plans whose pools name instance shapes (placer.shapes), exported without a scenario: an MoE model
#: on dep pools (one over two nodes) beside a tp pool of the same chips, a dense model on pp pools
SHAPE_CASES = {
    "moe-dep": ({"scenario": "moe-dep", "pools": [
        {"role": "P", "datacenter": "a", "chip": "H200", "tp": 16, "shape": "dep", "count": 1},
        {"role": "P", "datacenter": "a", "chip": "H200", "tp": 8, "shape": "tp", "count": 1},
        {"role": "D", "datacenter": "a", "chip": "H200", "tp": 8, "shape": "dep", "count": 2}],
        "routes": [{"request_class": "c", "pipeline": "P-D", "src": "a", "dst": "a", "rps": 2.0}]},
        ExportSettings("deepseek-ai/DeepSeek-V3.2", "deepseek-v3.2", kv_dtype="fp8", native_weight_dtype="fp8")),
    "dense-pp": ({"scenario": "dense-pp", "pools": [
        {"role": "P", "datacenter": "a", "chip": "H100-SXM", "tp": 16, "shape": "pp", "count": 1},
        {"role": "D", "datacenter": "a", "chip": "H100-SXM", "tp": 24, "shape": "pp", "count": 1}],
        "routes": [{"request_class": "c", "pipeline": "P-D", "src": "a", "dst": "a", "rps": 1.0}]},
        ExportSettings("meta-llama/Llama-3.1-405B", "llama-3.1-405b", weight_dtype="bf16",
                       native_weight_dtype="bf16")),
}


@cache
def example_export(example: str, fmt: str) -> dict[str, str]:
    """The export of an example's frozen plan, with its scenario, as the CLI writes it (a
    :data:`SHAPE_CASES` plan: with its settings, no scenario)."""
    if example in SHAPE_CASES:
        plan, settings = SHAPE_CASES[example]
        return export_plan(parse_plan(plan), fmt, settings)
    plan = load_plan(PLANS / f"{example}.json")
    problem = resolve(load_scenario(ROOT / "examples" / f"{example}.yaml"))
    settings = ExportSettings(MODELS[example], problem.model.name, kv_dtype=problem.kv_dtype,
                              weight_dtype=problem.weight_dtype, native_weight_dtype=problem.model.native_weight_dtype,
                              drc=bool(problem.options.drc),
                              chip_vendors={n: c.vendor for n, c in problem.chips.items()})
    return export_plan(plan, fmt, settings, problem)


@pytest.fixture(scope="session")
def engine_checker():
    """Run items through tests/placer/export/engine_parsers.py in the engine-args venv.

    Missing venv: a failure under CI (CI=true; .ci/run builds it), a skip with the reason otherwise."""
    if not VENV_PYTHON.exists():
        reason = f"engine-args venv missing ({VENV_PYTHON}): build it with tools/engine_args_venv.sh"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)

    def run(items: list[dict]) -> dict[str, dict]:
        proc = subprocess.run([str(VENV_PYTHON), str(HERE / "engine_parsers.py")], input=json.dumps(items),
                              capture_output=True, text=True, timeout=600, cwd=ROOT)
        if proc.returncode != 0:
            raise AssertionError(f"engine_parsers.py failed:\n{proc.stderr[-4000:]}")
        return {r["id"]: r for r in json.loads(proc.stdout)}

    return run


