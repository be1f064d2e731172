"""Measured latency tables as the performance model: import, interpolation, fallback, the plan."""

import json
import math
import shutil
from pathlib import Path

import pytest

from placer.errors import InputError
from placer.flows import instance
from placer.optimize import SolveConfig, optimize
from placer.perfmodel import InstanceModel
from placer.problem import resolve
from placer.profiles.figures import RooflineExceededError
from placer.catalog import get_chip, get_model
from placer.profiles.lookup import measured_instance
from placer.profiles.measured import MeasuredInstanceModel, source_of_prompt, source_of_step
from placer.profiles.records import measured_from
from placer.profiles.table_io import COLUMNS, read_csv_tables
from placer.profiles.tables import Grid, MeasuredTable, TableKey
from placer.specs import parse_scenario
from tests.placer.conftest import ROOT, micro_dict
from tests.placer.cli.test_cli import run, write

EXAMPLE = ROOT / "docs" / "profiles" / "llama-3.1-8b-h100-example.csv"
MODEL = "llama-3.1-8b"


def h100_scenario(**changes):
    data = micro_dict(**changes)
    data["datacenters"] = [{"name": "dc-a", "inventory": {"H100-SXM": 4}}]
    data["links"] = []
    return parse_scenario(data)


def example_model() -> MeasuredInstanceModel:
    measured = measured_from(EXAMPLE)
    im = instance(resolve(h100_scenario(), measured), "H100-SXM", 1)
    assert isinstance(im, MeasuredInstanceModel)
    return im


def csv_rows(path: Path) -> dict[tuple, float]:
    rows = {}
    for line in path.read_text().splitlines():
        if line.startswith(("#", "chip")):
            continue
        cells = dict(zip(COLUMNS, line.split(",")))
        size = float(cells["tokens"] or cells["batch"])
        rows[(cells["phase"], size, float(cells["context_tokens"]))] = float(cells["seconds"])
    return rows


def test_a_csv_profile_answers_its_grid_points_exactly():
    im = example_model()
    rows = csv_rows(EXAMPLE)
    assert rows
    for (phase, size, context), seconds in rows.items():
        if phase == "prefill":
            assert im.prefill_chunk_s(context + size, context, size) == pytest.approx(seconds, rel=1e-9)
            assert im.source_of_prefill(context, size) == f"measured ({EXAMPLE.name})"
        else:
            assert im.step_s(size, context) == pytest.approx(seconds, rel=1e-9)
            assert im.source_of_step(size, context) == f"measured ({EXAMPLE.name})"


def test_between_grid_points_the_answer_is_monotone_and_between_the_neighbours():
    im = example_model()
    batches = [1 + i * 63 / 200 for i in range(201)]
    steps = [im.step_s(b, 4096) for b in batches]
    assert all(b >= a for a, b in zip(steps, steps[1:]))
    assert im.step_s(1, 4096) < im.step_s(4, 4096) < im.step_s(8, 4096)
    # between the measured corners (1, 1024) = 7.5 ms and (8, 8192) = 13 ms
    assert 0.0075 < im.step_s(3, 3000) < 0.013
    contexts = [1024 + i * 7168 / 100 for i in range(101)]
    prefill = [im.prefill_chunk_s(c + 1000, c, 1000) for c in contexts]
    assert all(b >= a for a, b in zip(prefill, prefill[1:]))
    tokens = [512 + i * 7680 / 100 for i in range(101)]
    by_tokens = [im.prefill_chunk_s(t, 0, t) for t in tokens]
    assert all(b >= a for a, b in zip(by_tokens, by_tokens[1:]))


def test_a_grid_names_the_points_and_weights_it_interpolates_between():
    grid = Grid((1.0, 4.0), (100.0, 1000.0), ((0.01, 0.03), (0.02, 0.09)))
    weights = grid.weights(2.0, 300.0)
    assert {p for p, _ in weights} == {(0, 0), (1, 0), (0, 1), (1, 1)}
    assert sum(w for _, w in weights) == pytest.approx(1.0)
    # the answer is the weighted mean of the points' log seconds
    assert grid.seconds_at(2.0, 300.0) == pytest.approx(
        math.exp(sum(w * math.log(grid.seconds[i][j]) for (i, j), w in weights)))
    assert dict(grid.weights(4.0, 1000.0))[(1, 1)] == pytest.approx(1.0)
    assert grid.weights(8.0, 300.0) == []


def test_outside_the_grid_the_roofline_answers_and_says_so():
    im = example_model()
    roof = InstanceModel(im.chip, im.tp, im.model, im.weight_dtype, im.kv_dtype, im.prefill_chunk_tokens)
    assert im.step_s(256, 4096) == roof.step_s(256, 4096)
    assert im.source_of_step(256, 4096) == "roofline"
    assert im.step_s(8, 65536) == roof.step_s(8, 65536)
    assert im.prefill_chunk_s(16384 + 100, 16384, 100) == roof.prefill_chunk_s(16384 + 100, 16384, 100)
    assert im.source_of_prefill(16384, 100) == "roofline"
    # a prompt of 16k new tokens is two 8k forwards: the first measured, the second after 8k cached too
    assert source_of_prompt(im, 16384, 0.0) == f"measured ({EXAMPLE.name})"
    assert source_of_prompt(im, 20000, 0.0) == f"partly measured ({EXAMPLE.name})"


def test_past_a_slow_grid_the_roofline_is_held_to_the_measured_edge():
    problem = resolve(h100_scenario())
    slow = _decode_table(problem, "H100-SXM", 1, 2.0)  # batch <= 128, context <= 32768
    im = instance(resolve(h100_scenario(), {"H100-SXM": {"profile": "x", "tables": [slow]}}), "H100-SXM", 1)
    roof = instance(problem, "H100-SXM", 1)
    steps = [im.step_s(b, 16384) for b in range(100, 200)]
    assert all(b >= a for a, b in zip(steps, steps[1:]))  # no drop where the grid ends
    assert im.step_s(129, 16384) >= im.step_s(128, 16384) > roof.step_s(129, 16384)
    assert im.source_of_step(129, 16384) == "roofline held to the measured edge (H100-SXM-x2.0.csv)"
    # the slow table caps the batch below the roofline's
    tpot_s = 1.2 * roof.step_s(64, 4096)
    assert 0 < im.max_batch(4096, tpot_s) < 64 <= roof.max_batch(4096, tpot_s)


def test_noisy_measurements_are_made_monotone_not_dropped():
    grid = Grid((1.0, 2.0, 4.0), (0.0, 1000.0), ((0.010, 0.012), (0.0099, 0.0125), (0.011, 0.013)))
    at_1, at_2 = grid.seconds_at(1, 0), grid.seconds_at(2, 0)
    assert at_1 <= at_2 and at_2 <= grid.seconds_at(4, 0)
    assert 0.0099 <= at_1 <= 0.010  # pooled: the mean of the two violators, in log
    assert 0 < grid.max_cleanup_rel < 0.01


def test_a_table_faster_than_the_datasheet_is_refused_naming_the_point():
    fast = Grid((1.0, 8.0), (1024.0,), ((0.0005,), (0.009,)))  # 16 GB of weights in 0.5 ms: 32 TB/s
    table = MeasuredTable(TableKey("H100-SXM", 1, MODEL, "bf16", "bf16"), None, fast, "test", "fast.csv")
    with pytest.raises(RooflineExceededError, match=r"decode at batch 1, context 1024"):
        resolve(h100_scenario(), {"H100-SXM": {"profile": "fast.csv", "tables": [table]}})


def test_one_instance_from_a_profile_path_the_face_estimate_calls():
    h100, model = get_chip("H100-SXM"), get_model(MODEL)
    im = measured_instance(model, h100, 1, "bf16", "bf16", EXAMPLE)
    assert im.step_s(8, 8192) == pytest.approx(0.0130) and im.source_of_step(8, 8192) == f"measured ({EXAMPLE.name})"
    assert source_of_step(measured_instance(model, h100, 2, "bf16", "bf16", EXAMPLE), 8, 8192) == "roofline"
    assert type(measured_instance(model, h100, 1, "bf16", "fp8", [EXAMPLE])) is InstanceModel
    assert type(measured_instance(model, h100, 1, "bf16", "bf16", None)) is InstanceModel


def test_a_table_for_another_model_is_ignored_and_listed():
    problem = resolve(h100_scenario(kv_dtype="fp8"), measured_from(EXAMPLE))
    assert not problem.tables
    assert "kv_dtype bf16 (scenario: fp8)" in problem.tables_ignored[0]
    assert type(instance(problem, "H100-SXM", 1)) is InstanceModel


@pytest.mark.parametrize("line,column,value", [
    ("H100-SXM,1,llama-3.1-8b,bf16,bf16,decode,,8,1024,fast,x", "seconds", "'fast' is not a number"),
    ("H100-SXM,1,llama-3.1-8b,bf16,bf17,decode,,8,1024,0.01,x", "kv_dtype", "'bf17'"),
    ("H100-SXM,1,llama-3.1-8b,bf16,bf16,decode,64,8,1024,0.01,x", "tokens", "must be empty"),
    ("H100-SXM,0,llama-3.1-8b,bf16,bf16,decode,,8,1024,0.01,x", "tp", "must be > 0"),
])
def test_a_bad_csv_row_names_the_file_line_and_column(tmp_path, line, column, value):
    bad = tmp_path / "bad.csv"
    bad.write_text(EXAMPLE.read_text() + line + "\n")
    lineno = len(EXAMPLE.read_text().splitlines()) + 1
    with pytest.raises(InputError, match=rf"bad.csv:{lineno}, column {column}: .*{value}"):
        read_csv_tables(bad)
    r = run("optimize", write(tmp_path, micro_dict()), "--profiles", bad, "--no-marginals")
    assert r.returncode == 2
    assert f"bad.csv:{lineno}, column {column}" in r.stderr and "Traceback" not in r.stderr


def test_a_missing_grid_point_is_named(tmp_path):
    bad = tmp_path / "holes.csv"
    bad.write_text("\n".join(line for line in EXAMPLE.read_text().splitlines() if ",decode,,64,8192," not in line))
    with pytest.raises(InputError, match=r"holes.csv: decode table .* no measurement at \(64, context 8192\)"):
        read_csv_tables(bad)


def _decode_table(problem, chip: str, tp: int, factor: float) -> MeasuredTable:
    """The roofline's own decode steps × ``factor`` on a grid: a chip measured ``factor`` × slower."""
    im = instance(problem, chip, tp)
    batches, contexts = (1, 2, 4, 8, 16, 32, 64, 128), (1024, 4096, 16384, 32768)
    seconds = tuple(tuple(factor * im.step_s(b, c) for c in contexts) for b in batches)
    return MeasuredTable(TableKey(chip, tp, MODEL, "bf16", "bf16"), None, Grid(batches, contexts, seconds),
                         "test", f"{chip}-x{factor}.csv")


def _plan(scenario, factor: float | None):
    base = resolve(scenario)
    measured = None if factor is None else {
        "L40S": {"profile": "test", "tables": [_decode_table(base, "L40S", tp, factor) for tp in (1, 2)]}}
    return optimize(resolve(scenario, measured), SolveConfig(time_limit_s=30, marginals=False))


def test_a_decode_chip_measured_slower_loses_work_and_the_plan_its_bcr():
    scenario = parse_scenario(micro_dict(workload={**micro_dict()["workload"], "arrival_rps": 1.5}))
    roofline, same, slower = _plan(scenario, None), _plan(scenario, 1.0), _plan(scenario, 2.0)

    def l40s_decode(plan):
        """Requests/s the L40S decode pools carry (a slower chip may take a bigger instance for less work)."""
        return sum(a.rps for a in plan.assignments if a.chip == "L40S" and a.role != "P")

    # a table equal to the roofline at its grid points plans as the roofline does: the same pools, and a BCR within
    # 0.5 % — the goodput loses the requests whose own TPOT passes the SLA, a share that reads the step between the
    # grid points too (log-log interpolation: the mean TPOT 20.13 vs 20.03 ms here, BCR 832.2 vs 833.4)
    assert [(p.role, p.chip, p.tp, p.count) for p in same.pools] == [(p.role, p.chip, p.tp, p.count) for p in roofline.pools]
    assert same.metrics.bcr_requests_per_usd == pytest.approx(roofline.metrics.bcr_requests_per_usd, rel=5e-3)
    assert l40s_decode(roofline) > 0
    assert slower.metrics.bcr_requests_per_usd < roofline.metrics.bcr_requests_per_usd
    assert l40s_decode(slower) < l40s_decode(roofline)
    assert any("L40S" in n and "measured (L40S-x1.0.csv)" in n for n in same.notes)


CHAT = {"arrival_rps": 2.0, "classes": [{"name": "chat", "share": 1.0, "input_tokens": 4096, "output_tokens": 256,
                                           "hit_rate": 0.5}]}


def chat_scenario():
    """One H100 datacenter, prompts and decode the example CSV's grid covers."""
    return h100_scenario(workload=CHAT, sla={"ttft_p90_s": 2.0, "tpot_s": 0.02})


def test_scenario_profiles_key_is_read_relative_to_the_file_and_named_in_notes(tmp_path):
    (tmp_path / "profiles").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "profiles" / "h100.csv")
    data = json.loads(chat_scenario().model_dump_json())
    data["profiles"] = "profiles/h100.csv"
    scenario = write(tmp_path, data)
    plan = run("optimize", scenario, "--json", "--no-marginals")
    assert plan.returncode == 0, plan.stderr
    notes = json.loads(plan.stdout)["notes"]
    assert "calibrated with H100-SXM: h100.csv" in notes
    pools = [n for n in notes if n.startswith("pool ")]
    assert any(n.startswith("pool P dc-a H100-SXM tp1: prefill measured (h100.csv)") for n in pools), pools
    assert any(n.startswith("pool MD dc-a H100-SXM") and n.endswith("measured (h100.csv)") for n in pools), pools
    # --profiles replaces the file's list: with another profile the CSV is not read
    other = run("optimize", scenario, "--json", "--no-marginals", "--profiles", tmp_path / "nope")
    assert other.returncode == 2 and "nope" in other.stderr


@pytest.mark.parametrize("command", ["optimize", "evaluate", "compare", "simulate"])
def test_every_planning_command_takes_profiles(tmp_path, command):
    scenario = write(tmp_path, json.loads(chat_scenario().model_dump_json()))
    plan = tmp_path / "plan.json"
    if command in ("evaluate", "simulate"):
        made = run("optimize", scenario, "--no-marginals", "--out", plan)
        assert made.returncode == 0, made.stderr
    args = {"optimize": [scenario, "--no-marginals"], "evaluate": [scenario, plan], "compare": [scenario],
            "simulate": [scenario, plan, "--requests", "300"]}[command]
    ok = run(command, *args, "--profiles", EXAMPLE, "--json")
    assert ok.returncode == 0, ok.stderr
    missing = run(command, *args, "--profiles", tmp_path / "nope.csv")
    assert missing.returncode == 2 and "nope.csv" in missing.stderr
