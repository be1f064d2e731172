"""`placer compare`'s break-even answers: the GPU-B price and the line bandwidth at which PDD's
BCR equals same-DC PD's."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from typer.testing import CliRunner

from placer.baselines import solve_baseline
from placer.breakeven import break_even, price_chip_of
from placer.cli import app
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


def test_the_break_even_bandwidth_is_where_the_bcrs_meet(small_problem, answers, today):
    bw = answers["bandwidth"]
    assert bw["line"] == "dc-a<->dc-b" and bw["now_gbit_per_s"] == 10
    at = bw["break_even_gbit_per_s"]
    now = _diff(small_problem, today)
    assert at is not None and f"{at:.3g}" in bw["answer"]
    assert (at < 10) == (now > 0)  # PDD ahead: a thinner line is what closes the gap
    links = {k: dataclasses.replace(v, gbit_per_s=at) for k, v in small_problem.links.items()}
    assert abs(_diff(dataclasses.replace(small_problem, links=links), today)) < 0.25 * abs(now)


def test_compare_rejects_an_unknown_price_chip(tmp_path):
    scenario = tmp_path / "small.yaml"
    scenario.write_text(yaml.safe_dump(small_pdd_dict()))
    r = CliRunner().invoke(app, ["compare", str(scenario), "--price-chip", "NoSuchChip", "--json"])
    assert r.exit_code == 2 and "NoSuchChip" in r.stderr
