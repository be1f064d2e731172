"""`placer profile model --device cpu`: a tiny shape's grids measured with the executor's engine, then planned with."""


import pytest

from placer.flows import instance
from placer.problem import resolve
from placer.profiles.measured import MeasuredInstanceModel
from placer.profiles.records import ChipProfile, measured_from
from placer.specs import parse_scenario
from tests.placer.cli.test_cli import run

TINY = ["--layers", "1", "--hidden", "64", "--heads", "2", "--kv-heads", "1", "--head-dim", "32",
        "--intermediate", "128", "--vocab", "300"]


def test_profile_model_on_cpu_writes_a_profile_the_planner_answers_from(tmp_path):
    out = tmp_path / "tiny.json"
    r = run("profile", "model", "--device", "cpu", "--grid", "tiny", "--reps", "1", *TINY, "--out", out,
            timeout=300)
    assert r.returncode == 0, r.stderr
    profile = ChipProfile.load(out)
    table = profile.tables[0]
    assert table.model.startswith("llama-tiny-") and table.chip == "cpu" and profile.schema_version == 2
    assert table.model_shape["num_layers"] == 1 and "torch" in table.engine
    spec = table.model_shape["scenario_model"]
    scenario = parse_scenario({
        "name": "tiny", "model": spec, "chips": [{"name": "cpu", "bf16_tflops": 1.0, "mem_gb": 64,
                                                  "mem_bw_tbps": 0.1, "price_usd_per_h": 0.1}],
        "datacenters": [{"name": "here", "inventory": {"cpu": 1}}],
        "workload": {"arrival_rps": 0.1, "classes": [{"name": "c", "share": 1, "input_tokens": 32,
                                                      "output_tokens": 16, "hit_rate": 0.0}]},
        "sla": {"ttft_p90_s": 10, "tpot_s": 1.0}})
    im = instance(resolve(scenario, measured_from(out)), "cpu", 1)
    assert isinstance(im, MeasuredInstanceModel)
    label = f"measured ({out.name})"
    assert im.source_of_step(2, 64) == label and im.source_of_prefill(32, 8) == label
    assert im.step_s(2, 64) >= im.step_s(1, 16) > 0
    assert im.step_s(1, 16) == pytest.approx(table.decode.grid().seconds_at(1, 16))
    assert im.source_of_step(64, 64).startswith("roofline")  # past the grid


def test_profile_model_refuses_a_bad_shape(tmp_path):
    r = run("profile", "model", "--device", "cpu", "--heads", "3", "--kv-heads", "2", "--layers", "1")
    assert r.returncode == 2 and "--heads 3" in r.stderr
    r = run("profile", "model", "--device", "cpu", "--model", "deepseek-v3")
    assert r.returncode == 2 and "gqa" in r.stderr
    r = run("profile", "model", "--device", "cpu", "--tp", "2")
    assert r.returncode == 2 and "--tp 2" in r.stderr
    r = run("profile", "model", "--device", "cpu", "--clock", "sundial", *TINY)
    assert r.returncode == 2 and "--clock" in r.stderr and "sundial" in r.stderr


def test_profile_model_on_cpu_times_one_core_by_default(tmp_path):
    """The CPU default is the timing thread's CPU time (robust on a shared machine), and the engine says so;
    a float32 run's stand-in model carries the float32 KV bytes per token."""
    out = tmp_path / "tiny.json"
    r = run("profile", "model", "--device", "cpu", "--grid", "tiny", "--reps", "1", *TINY, "--out", out,
            timeout=300)
    assert r.returncode == 0, r.stderr
    table = ChipProfile.load(out).tables[0]
    assert "thread CPU time" in table.engine and table.model_shape["dtype"] == "float32"
    assert table.model_shape["scenario_model"]["head_dim"] == 2 * table.model_shape["head_dim"]


def test_rounds_keep_a_burst_of_other_work_out_of_the_table(monkeypatch):
    """A burst that lasts a whole pass over the grid reaches one of three rounds: the median leaves it out."""
    import profiler.model as pm

    state = {"burst": False}
    def timed(torch, device, run, clock="wall"):
        run()
        return 10.0 if state["burst"] else 1.0

    monkeypatch.setattr(pm, "_timed", timed)

    def on_point(done, total):  # the second of three passes runs during the burst
        state["burst"] = total / 3 <= done < 2 * total / 3

    overrides = {"num_layers": 1, "hidden_size": 64, "num_q_heads": 2, "num_kv_heads": 1, "head_dim": 32,
                 "intermediate_size": 128, "vocab_size": 300}
    raw = pm.profile_model("cpu", grid="tiny", reps=1, overrides=overrides, on_point=on_point, rounds=3)
    table = raw["tables"][0]
    assert all(s == 1.0 for row in table["prefill"]["seconds"] + table["decode"]["seconds"] for s in row)
    assert table["prefill"]["repeats"] == table["decode"]["repeats"] == 3
    state["burst"] = True  # one pass: the burst is the table
    raw = pm.profile_model("cpu", grid="tiny", reps=1, overrides=overrides, rounds=1)
    assert all(s == 10.0 for row in raw["tables"][0]["decode"]["seconds"] for s in row)
    with pytest.raises(pm.InputError, match="--rounds must be a whole number >= 1, got 0"):
        pm.profile_model("cpu", grid="tiny", reps=1, overrides=overrides, rounds=0)


def test_profile_model_rounds_on_the_command_line(tmp_path):
    out = tmp_path / "tiny.json"
    r = run("profile", "model", "--device", "cpu", "--grid", "tiny", "--reps", "1", "--rounds", "2", *TINY,
            "--out", out, timeout=300)
    assert r.returncode == 0, r.stderr
    assert ChipProfile.load(out).tables[0].decode.repeats == 2
    r = run("profile", "model", "--device", "cpu", "--rounds", "0", *TINY)
    assert r.returncode == 2 and "--rounds" in r.stderr
