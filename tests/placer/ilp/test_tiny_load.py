"""Tiny offered loads (issue 43: `arrival_rps: 0.000003` → exit 3 blaming queueing).

The traffic columns are req/s, and HiGHS treats a row broken by less than its feasibility tolerance
(1e-6) as met: at 3e-6 req/s every class's demand is under it, so the MILP's "optimal" plan serves
nothing and no plan came back. The diagnosis blamed the TTFT SLA's queueing, which does not bind
at such a load; it now names the solver's resolution. The plan a user expects there (the smallest
fleet, as at 1e-3 req/s) still needs the traffic columns in units the solver resolves: the xfail
below records it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from placer.cli import app

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "pdd-two-dc.yaml"


def _at(tmp_path: Path, rps: float) -> Path:
    path = tmp_path / f"at-{rps:g}.yaml"
    path.write_text(re.sub(r"arrival_rps: .*", f"arrival_rps: {rps!r}", EXAMPLE.read_text()))
    return path


def _optimize(tmp_path: Path, rps: float):
    return CliRunner().invoke(app, ["optimize", str(_at(tmp_path, rps)), "--json"])


def test_a_tiny_load_is_refused_for_what_binds_not_for_queueing(tmp_path):
    result = _optimize(tmp_path, 0.000003)
    assert result.exit_code == 3
    assert "too small for the solver to resolve" in result.output and "6e-07 req/s" in result.output
    assert "queueing" not in result.output and "SLA of" not in result.output


@pytest.mark.parametrize("rps", [1e-6, 3e-6, 1e-5, 1e-4, 1e-2, 1.0, 10.0])
def test_no_rate_is_refused_for_queueing_at_loads_one_instance_carries(tmp_path, rps):
    """pdd-two-dc's one P and one MD carry ~5.9 req/s within the SLA: below that, queueing cannot bind."""
    result = _optimize(tmp_path, rps)
    assert "queueing" not in result.output, result.output
    if result.exit_code == 0 and rps >= 1e-4:
        plan = json.loads(result.stdout)
        assert plan["metrics"]["goodput_rps"] >= 0.9 * rps


def test_a_load_the_solver_cannot_resolve_never_comes_back_as_a_plan(tmp_path):
    # At 1e-5 req/s the MILP's "feasible" plan had an MD pool and no P (goodput 0, exit 0).
    result = _optimize(tmp_path, 1e-5)
    assert result.exit_code == 3, result.output
    assert "too small for the solver to resolve" in result.output and "arrival_rps" in result.output


@pytest.mark.xfail(strict=True, reason="issue 43: traffic columns in req/s fall under HiGHS's 1e-6 tolerance")
def test_a_tiny_load_gets_the_smallest_fleet(tmp_path):
    small = json.loads(_optimize(tmp_path, 1e-3).stdout)
    result = _optimize(tmp_path, 0.000003)
    assert result.exit_code == 0
    assert [(p["role"], p["count"]) for p in json.loads(result.stdout)["pools"]] == \
        [(p["role"], p["count"]) for p in small["pools"]]
