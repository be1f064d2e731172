"""The reader attacks of issue 43 through the real `placer` command: hostile profiles (JSON and
CSV) and traces exit 2 naming the file and what is wrong, never with a traceback; the sparse
table that took 6 GB is refused in bounded memory; a stored profile's efficiency of 1e-300 is
refused by the record itself (what `POST /profiles` validates)."""

from __future__ import annotations

import json

import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from placer.cli import app
from placer.errors import InputError
from placer.profiles.records import MIN_EFFICIENCY, ChipProfile
from placer.profiles.table_io import read_csv_tables
from placer.workload.trace import read_trace
from tests.placer.conftest import micro_dict
from tests.placer.hardening.reader_attacks import (
    H200_PROFILE,
    PROFILE_ATTACKS,
    TRACE_ATTACKS,
    ReaderAttack,
    sparse_csv,
)
from tests.placer.hardening.reader_battery import micro_plan_json, prepare, run_one

IN_PROCESS = [a for a in [*PROFILE_ATTACKS, *TRACE_ATTACKS] if a.name != "csv-sparse-1.3MB"]


@pytest.fixture(scope="module")
def plan_json() -> str:
    return micro_plan_json()


@pytest.mark.parametrize("attack", IN_PROCESS, ids=lambda a: a.name)
def test_a_hostile_profile_or_trace_exits_naming_the_file(tmp_path, plan_json, attack: ReaderAttack):
    result = CliRunner().invoke(app, prepare(tmp_path, attack, plan_json))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert result.exit_code == attack.exit_code, result.output
    message = " ".join(result.output.split())  # Rich wraps long lines
    for name in attack.names:
        assert name in message, f"{name!r} not in {message!r}"


def test_the_sparse_table_is_refused_before_its_grid_is_built(plan_json):
    """1.3 MB of rows at distinct (batch, context) — a 22000 x 22000 grid — took 6 GB and ended in
    MemoryError; in a process capped at 1 GiB it is now exit 2 naming the sizes, in seconds."""
    attack = next(a for a in PROFILE_ATTACKS if a.name == "csv-sparse-1.3MB")
    assert 1.2e6 < len(attack.files["t.csv"]) < 1.5e6
    row = run_one(attack, plan_json, memory_gib=1.0, timeout=60.0)
    assert row["ok"], row
    assert row["rss_mib"] < 500, row


def test_a_full_grid_within_the_bound_still_reads(tmp_path):
    """The bound refuses only what exceeds it: a full 300 x 300 grid (90,000 points) reads."""
    lines = ["chip,tp,model,weight_dtype,kv_dtype,phase,tokens,batch,context_tokens,seconds,source"]
    lines += [f"H200-SXM,1,m,bf16,bf16,decode,,{b},{c},{0.01 + b * 1e-5 + c * 1e-6:.6f},x"
              for b in range(1, 301) for c in range(300)]
    path = tmp_path / "t.csv"
    path.write_text("\n".join(lines) + "\n")
    (table,) = read_csv_tables(path)
    assert len(table.decode.sizes) == 300 and len(table.decode.contexts) == 300
    assert table.decode.seconds_at(150.5, 10.0) == pytest.approx(0.01 + 150.5e-5 + 10e-6, rel=1e-3)
    path.write_bytes(sparse_csv(400))  # 400 x 400 = 160,000 points: over the bound, named
    with pytest.raises(InputError, match="400 x 400 grid"):
        read_csv_tables(path)


@pytest.mark.parametrize("value", [0.0, 1e-300, 5e-324, MIN_EFFICIENCY / 2, float("nan"), float("inf")])
@pytest.mark.parametrize("key", ["compute_efficiency", "mem_bw_efficiency", "interconnect_efficiency"])
def test_the_profile_record_refuses_a_non_physical_efficiency(key, value):
    """The model `POST /profiles` stores: 1e-300 broke every later solve of its chip."""
    data = json.loads(H200_PROFILE.read_text())
    data["efficiency"][key] = value
    with pytest.raises(ValidationError, match=f"{key}(.|\n)*at least 0.001"):
        ChipProfile.model_validate(data)
    data["efficiency"][key] = MIN_EFFICIENCY
    assert getattr(ChipProfile.model_validate(data).efficiency, key) == MIN_EFFICIENCY


def test_a_trace_within_the_bounds_reads_unchanged(tmp_path):
    rows = [{"timestamp": 1.7e12, "input_length": 10_000_000, "output_length": 0, "hit_rate": 1.0},
            {"timestamp": 1.7e12 + 5, "input_length": 1, "output_length": 10_000_000, "hash_ids": [1, 2]}]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = [(r.timestamp_s, r.input_tokens, r.output_tokens) for r in read_trace(path)]
    assert got == [(1.7e9, 10_000_000, 1), (1.7e9 + 0.005, 1, 10_000_000)]


def test_the_micro_scenario_still_simulates_with_a_trace(tmp_path, plan_json):
    (tmp_path / "micro.yaml").write_text(yaml.safe_dump(micro_dict()))
    (tmp_path / "plan.json").write_text(plan_json)
    (tmp_path / "t.jsonl").write_text("".join(
        json.dumps({"timestamp": i * 50, "input_length": 1024, "output_length": 64, "hit_rate": 0.5}) + "\n"
        for i in range(40)))
    result = CliRunner().invoke(app, ["simulate", str(tmp_path / "micro.yaml"), str(tmp_path / "plan.json"),
                                      "--trace", str(tmp_path / "t.jsonl"), "--requests", "40"])
    assert result.exit_code == 0, result.output
