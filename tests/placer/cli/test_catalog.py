"""`placer catalog chips|models`: every chip and model the planner knows, the figures it uses, their sources."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from placer.catalog import chip_catalog, get_model, model_catalog
from placer.cli.app import app

runner = CliRunner()


def _table(what: str) -> str:
    result = runner.invoke(app, ["catalog", what], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    return result.output


def test_the_tables_name_every_chip_and_model_in_100_columns_without_cutting_a_cell():
    for what, names in (("chips", chip_catalog()), ("models", model_catalog())):
        text = _table(what)
        assert "…" not in text and max(len(line.rstrip()) for line in text.splitlines()) <= 100
        rows = {line.split()[0] for line in text.splitlines() if line.strip()}
        assert set(names) <= rows
        assert "sources" in text and "SOURCES.md" in text
    assert "meta-llama/Llama-3.1-70B-Instruct" in _table("models")
    assert "1,979" in _table("chips")  # H100's fp8 peak, formatted as every other figure


def test_json_gives_every_figure_the_planner_uses_and_its_source():
    chips = json.loads(runner.invoke(app, ["catalog", "chips", "--json"]).stdout)["chips"]
    h100 = next(c for c in chips if c["name"] == "H100-SXM")
    assert h100["peak_tflops"] == {"bf16": 989.0, "fp8": 1979.0}
    assert {"mem_gb", "mem_bw_tbps", "scaleup_gbps_bidir", "nic_gbit", "tdp_w", "price_usd_per_h", "price_source",
            "compute_efficiency", "confidence", "source", "arch"} <= set(h100)
    assert all(c["source"] for c in chips)
    models = json.loads(runner.invoke(app, ["catalog", "models", "--json"]).stdout)["models"]
    v3 = next(m for m in models if m["name"] == "deepseek-v3")
    assert v3["hf_id"] == "deepseek-ai/DeepSeek-V3" and v3["moe"] and v3["experts"] == 256
    assert v3["kv_bytes_per_token"]["bf16"] == get_model("deepseek-v3").kv_bytes_per_token("bf16")
    assert all(m["hf_id"] and m["source"] for m in models)


def test_catalog_without_a_subcommand_lists_them():
    result = runner.invoke(app, ["catalog"])
    assert "chips" in result.output and "models" in result.output
