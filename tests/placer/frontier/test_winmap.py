"""Where PDD wins, mapped (issue 45, part 3): PDD/baseline ratios per point, the break-even
crossing where the BCR ratio passes 1, the figure, and the flagship's own crossing over GPU-B's
price (the report's GPU-B is 20–30 % pricier than GPU-A; here PDD is ahead only below ≈ 1.05×)."""

from __future__ import annotations

import csv

import pytest
import yaml

from placer.frontier import run_frontier
from placer.specs import load_scenario
from placer.winmap import crossings, ratios, write_map
from tests.placer.cli.test_cli import run
from tests.placer.frontier.test_knobs import FLAGSHIP


def _row(value, plan, bcr, p90=1.0, by=None, served=10.0, status="ok"):
    return {"value": value, "by": by, "plan": plan, "status": status, "bcr_requests_per_usd": bcr,
            "ttft_p90_s": p90, "served_rps": served, "offered_rps": 10.0}


def test_ratios_say_who_is_ahead_and_what_each_side_carries():
    rows = [_row(1.0, "pdd", 150, p90=1.0), _row(1.0, "same-dc-pd", 100, p90=2.0, served=5.0, status="partial load"),
            _row(2.0, "pdd", 0, status="no plan"), _row(2.0, "same-dc-pd", 100)]
    r = ratios(rows)
    assert r[0]["bcr_ratio"] == pytest.approx(1.5) and r[0]["p90_ratio"] == pytest.approx(0.5)
    assert r[0]["pdd_served_share"] == 1.0 and r[0]["baseline_served_share"] == 0.5
    assert r[1]["bcr_ratio"] is None  # PDD has no plan there: no ratio, never a 0


def test_the_break_even_is_interpolated_where_the_ratio_crosses_one():
    rows = [_row(v, "pdd", b) for v, b in ((0.8, 120), (1.0, 105), (1.2, 90))] + \
        [_row(v, "same-dc-pd", 100) for v in (0.8, 1.0, 1.2)]
    (c,) = crossings(ratios(rows))
    assert c["baseline"] == "same-dc-pd" and c["at"] == pytest.approx(1.0 + 0.2 * 5 / 15)
    assert c["pdd_ahead_above"] is False


def test_a_tie_is_no_crossing():
    """Where PDD's plan is the baseline's, the two BCRs differ in the last digits: no break-even."""
    rows = [_row(v, "pdd", b) for v, b in ((1, 100.0001), (2, 99.9999), (3, 100.0002))] + \
        [_row(v, "prfaas", 100) for v in (1, 2, 3)]
    assert crossings(ratios(rows)) == []


def test_a_model_map_names_the_two_neighbours_of_a_crossing():
    rows = [_row("deepseek-v3.2", "pdd", 90), _row("deepseek-v3.2", "agg", 100),
            _row("kimi-k2", "pdd", 120), _row("kimi-k2", "agg", 100)]
    (c,) = crossings(ratios(rows))
    assert c["between"] == ("deepseek-v3.2", "kimi-k2") and c["pdd_ahead_above"]


def test_the_grid_map_is_written_as_csv_and_png(tmp_path):
    rows = [_row(p, "pdd", 100 + 10 * g - 40 * p, by=g) for p in (0.8, 1.2) for g in (1, 2)] + \
        [_row(p, "same-dc-pd", 100, by=g) for p in (0.8, 1.2) for g in (1, 2)]
    csv_path, png = write_map(ratios(rows), tmp_path, "price", "gbit")
    read = list(csv.DictReader(csv_path.open()))
    assert len(read) == 4 and {r["baseline"] for r in read} == {"same-dc-pd"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_on_the_flagship_pdd_leads_same_dc_pd_only_while_gpu_b_is_about_as_cheap_as_gpu_a():
    """At equal prices PDD's MD on GPU-B pays; at the report's +25 % it no longer does: the
    break-even lies between (compare's bisection says ≈ 1.04 USD/h against 1.00 for GPU-A)."""
    rows = run_frontier(load_scenario(FLAGSHIP), "price", [0.9, 1.25], ["same-dc-pd"], use_ray=False,
                        time_limit_s=10)
    by = {r["value"]: r for r in ratios(rows)}
    assert by[0.9]["bcr_ratio"] > 1 > by[1.25]["bcr_ratio"]
    (c,) = crossings(ratios(rows))
    assert 0.9 < c["at"] < 1.25 and not c["pdd_ahead_above"]


@pytest.mark.slow
def test_cli_prints_the_map_and_its_break_even(tmp_path):
    scenario = load_scenario(FLAGSHIP)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario.model_dump(mode="json", exclude_none=True)))
    r = run("frontier", path, "--vary", "price", "--values", "0.9,1.25", "--baselines", "same-dc-pd", "--no-ray",
            "--time-limit", "10", "--out", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert "where PDD wins" in r.stdout and "break-even against same-dc-pd: price ≈" in r.stdout
    assert (tmp_path / "out" / "map.png").exists() and (tmp_path / "out" / "map.csv").exists()
    bad = run("frontier", path, "--vary", "model", "--values", "gpt-7", "--no-ray")
    assert bad.returncode == 2 and "gpt-7" in bad.stderr and "Traceback" not in bad.stderr
