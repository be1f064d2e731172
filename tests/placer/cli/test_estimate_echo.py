"""`placer estimate` says what it assumed (lengths, hit, decode context, chunk, MTP, why this batch) and writes
every figure the same way: thousands separators, no exponent."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from placer.cli.app import app

ARGS = ["estimate", "--model", "llama-3.1-70b", "--chip", "H100-SXM", "--tp", "4", "--input", "40310", "--hit", "0.93"]


def _run(*extra: str):
    result = CliRunner().invoke(app, [*ARGS, *extra], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_table_echoes_the_request_and_why_the_batch_is_what_it_is():
    text = _run("--tpot", "0.05")
    for row in (r"input_tokens\s+│\s+40,310", r"output_tokens\s+│\s+256", r"hit_rate\s+│\s+0\.93",
                r"decode_context_tokens\s+│\s+40,438", r"chunk_tokens\s+│\s+8,192", r"mtp_accept\s+│\s+1 "):
        assert re.search(row, text), row
    assert "decode batch 12: the most sequences whose step meets --tpot 0.05 s" in text
    assert "as given by --batch" in _run("--batch", "4")
    assert not re.search(r"\de[+-]\d", text)  # 40,310 beside 128,499, never 4.031e+04


def test_json_says_where_the_batch_came_from():
    data = json.loads(_run("--tpot", "0.05", "--json"))
    assert data["batch_from"] == "--tpot" and data["target_tpot_s"] == 0.05
    assert data["decode_context_tokens"] == 40310 + 256 / 2
    assert json.loads(_run("--json"))["batch_from"] == "memory"
