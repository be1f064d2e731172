"""`placer compare`'s break-even answers: the GPU-B price and the line bandwidth at which PDD's
BCR equals same-DC PD's."""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml
from typer.testing import CliRunner

from placer.baselines import solve_baseline
from placer.breakeven import break_even, price_chip_of
from placer.cli import app
from placer.errors import InfeasiblePlanError
from placer.optimize import SolveConfig, optimize
from tests.placer.sim.conftest import small_pdd_dict

CONFIG = SolveConfig(time_limit_s=20, marginals=False)


@pytest.fixture(scope="module")
def today(small_problem):
    """same-dc-pd at today's figures: the cluster PDD is measured against."""
    return solve_baseline(small_problem, "same-dc-pd", CONFIG)


def _diff(problem, today, chip=None) -> float:
    """PDD's BCR minus same-dc-pd's (re-solved only if today's baseline runs on ``chip``)."""
    rerun = chip is not None and any(p.chip == chip for p in today.pools)
    base = solve_baseline(problem, "same-dc-pd", CONFIG) if rerun else today
    return optimize(problem, CONFIG).metrics.bcr_requests_per_usd - base.metrics.bcr_requests_per_usd


def _priced(problem, chip, usd_per_h):
    chips = {**problem.chips, chip: dataclasses.replace(problem.chips[chip], price_usd_per_h=usd_per_h)}
    return dataclasses.replace(problem, chips=chips)


@pytest.fixture(scope="module")
def answers(small_problem, small_plan, today):
    return break_even(small_problem, small_plan, today, CONFIG)


def test_the_break_even_price_is_where_the_bcrs_meet(small_problem, small_plan, answers, today):
    price = answers["price"]
    chip = price["chip"]
    assert chip == price_chip_of(small_plan) and any(p.chip == chip and p.role == "MD" for p in small_plan.pools)
    now = _diff(small_problem, today)
    at = price["break_even_usd_per_h"]
    assert at is not None and price["now_usd_per_h"] == small_problem.chips[chip].price_usd_per_h
    assert abs(_diff(_priced(small_problem, chip, at), today, chip)) < 0.25 * abs(now)
    beyond = at * 1.15 if now > 0 else at / 1.15  # past the break-even, the other plan wins
    assert (_diff(_priced(small_problem, chip, beyond), today, chip) > 0) != (now > 0)


def test_the_break_even_bandwidth_is_where_the_bcrs_meet_or_where_pdd_runs_out_of_plans(small_problem, answers,
                                                                                         today):
    """Thinning the line either brings PDD's BCR down to same-dc-pd's (a break-even) or, first,
    leaves PDD no plan that meets the SLA (a cliff), or PDD stays ahead down to the thinnest line
    searched: the answer says which, never a cliff as a break-even."""
    bw = answers["bandwidth"]
    assert bw["line"] == "dc-a<->dc-b" and bw["now_gbit_per_s"] == 10
    now = _diff(small_problem, today)

    def at(gbit_per_s):
        links = {k: dataclasses.replace(v, gbit_per_s=gbit_per_s) for k, v in small_problem.links.items()}
        return dataclasses.replace(small_problem, links=links)

    if bw["break_even_gbit_per_s"] is not None:
        even = bw["break_even_gbit_per_s"]
        assert f"{even:.3g}" in bw["answer"] and (even < 10) == (now > 0)
        assert abs(_diff(at(even), today)) < 0.25 * abs(now)
    elif bw["no_plan_beyond_gbit_per_s"] is None:  # ahead down to the thinnest line searched: the
        # heavy and light-set P queues (issue 45) keep the SLA where the mix and light ones left no plan
        thinnest = float(re.search(r"to ([0-9.]+) Gbit/s", bw["answer"]).group(1))
        assert now > 0 and "stays ahead" in bw["answer"] and thinnest < 1
        assert _diff(at(thinnest), today) > 0
    else:
        edge = bw["no_plan_beyond_gbit_per_s"]
        assert now > 0 and edge < 10 and f"{edge:.3g}" in bw["answer"] and "no plan" in bw["answer"]
        assert _diff(at(edge * 1.05), today) > 0  # still ahead just above the edge
        with pytest.raises(InfeasiblePlanError):
            optimize(at(edge * 0.95), CONFIG)


def test_compare_rejects_an_unknown_price_chip(tmp_path):
    scenario = tmp_path / "small.yaml"
    scenario.write_text(yaml.safe_dump(small_pdd_dict()))
    r = CliRunner().invoke(app, ["compare", str(scenario), "--price-chip", "NoSuchChip", "--json"])
    assert r.exit_code == 2 and "NoSuchChip" in r.stderr
