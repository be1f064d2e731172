"""Charts: every axis labelled and titled, the data there, the special cases marked."""

from __future__ import annotations

import math

import pytest

from placer.errors import InputError
from placer.plan import Metrics, Plan, PoolOut
from placer.report import charts
from placer.report.figures import png_bytes, svg_text
from placer.report.simdata import SimRun
from tests.placer.report.conftest import bathtub_rows


def _plan(bcr: float, cost: float, notes=(), served_rps: float = 4.0) -> Plan:
    return Plan(scenario="s", pools=[PoolOut(role="P", datacenter="a", chip="H100-SXM", tp=1, count=1)],
                metrics=Metrics(bcr_requests_per_usd=bcr, cost_usd_per_h=cost, goodput_rps=bcr * cost / 3600,
                                served_rps=served_rps, offered_rps=4.0),
                notes=list(notes))


def _labelled(ax) -> None:
    assert ax.get_title() and ax.get_ylabel()


def test_baseline_bars_show_pdd_beside_each_baseline():
    comparison = {"pdd": _plan(1300, 16), "baselines": {
        "same-dc-pd": _plan(1200, 12, ["baseline same-dc-pd",
                                       "cannot carry the whole offered load; shown at the load it can"], 2.5),
        "cross-dc-pd": {"error": "infeasible: the line is too thin"},
        "hetero-same-dc-pd": _plan(1100, 12)}}
    fig = charts.baseline_bars(comparison)
    assert [ax.get_title() for ax in fig.axes] == ["BCR", "Hardware cost", "SLA goodput"]
    for ax in fig.axes:
        _labelled(ax)
        assert [round(b.get_height(), 6) for b in ax.patches][2] == 0.0  # the baseline without a plan
        assert "no plan" in [t.get_text() for t in ax.texts]
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks[0] == "PDD" and ticks[1].endswith("*") and not ticks[3].endswith("*")
    assert [round(b.get_height()) for b in fig.axes[0].patches] == [1300, 1200, 0, 1100]
    # the title is the headline's first line: what each side serves within the inventory
    title = fig._suptitle.get_text()
    assert "within the inventory: PDD serves 4.00 / 4 req/s" in title and "hetero-same-dc-pd serves 4.00 / 4" in title
    assert len(png_bytes(fig)) > 20_000


def _run(name: str, ttfts: list[float], per_request: bool = True, rld=None) -> SimRun:
    data = {"ttft_p50_s": sorted(ttfts)[len(ttfts) // 2], "ttft_p90_s": sorted(ttfts)[int(len(ttfts) * 0.9)],
            "ttft_p99_s": max(ttfts), "offered_rps": 2.0, "measured_requests": len(ttfts),
            "rld_token_share": 0.05, "links": [{"src": "a", "dst": "b", "gbit_per_s_capacity": 10.0}],
            "series": {"t_s": [0, 10, 20, 30], "links_gbit_per_s": {"a->b": [1.0, 4.0, 8.0, 2.0], "b->a": [0, 0, 0, 0]}}}
    if not per_request:
        return SimRun(name, data)
    n = len(ttfts)
    return SimRun(name, data, ttft_s=sorted(ttfts), finish_t_s=[i * 30 / n for i in range(n)],
                  out_tokens=[100] * n, rld_tokens=rld or [5] * n)


def test_the_ttft_cdf_has_one_rising_curve_per_plan_and_the_sla():
    pdd = _run("pdd", [0.1 + 0.01 * i for i in range(200)])
    naive = _run("cross-dc-pd", [2 + 0.2 * i for i in range(200)])
    same = _run("same-dc-pd", [0.2, 0.4, 0.9], per_request=False)
    fig = charts.ttft_cdf([pdd, naive, same], sla_ttft_p90_s=1.0)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "time to first token (s)" and ax.get_ylabel() and ax.get_title()
    assert ax.get_xscale() == "log"  # 0.1 s to 40 s
    curves = [line for line in ax.get_lines() if line.get_label().startswith(("PDD", "naive", "same"))]
    assert len(curves) == 3
    for line in curves:
        ys = list(line.get_ydata())
        assert ys == sorted(ys) and ys[-1] == pytest.approx(1.0, abs=0.011)
    assert "percentiles only" in curves[2].get_label()
    assert any("SLA" in t.get_text() for t in ax.texts)
    assert "naive cross-DC PD" in svg_text(fig)


def test_the_timeline_draws_rld_share_and_busy_lines_only():
    run = _run("pdd", [0.2] * 400, rld=[10 if i % 4 == 0 else 0 for i in range(400)])
    fig = charts.timeline(run, ilp_rld_share=0.03)
    top, bottom = fig.axes
    _labelled(top)
    assert bottom.get_xlabel() == "simulated time (s)" and bottom.get_ylabel() == "WAN Gbit/s"
    share = [v for v in top.get_lines()[0].get_ydata() if not math.isnan(v)]
    assert share and all(0 <= v <= 100 for v in share) and sum(share) / len(share) == pytest.approx(2.5, abs=0.05)
    labels = [line.get_label() for line in bottom.get_lines()]
    assert "a→b" in labels and "b→a" not in labels  # the idle direction is left out
    no_rld = charts.timeline(run, 0.0, has_rld=False)
    assert any("no RelayDecode" in t.get_text() for t in no_rld.axes[0].texts)


def test_the_bathtub_plots_bcr_against_hit_rate_from_a_sweep_csv(sweep_csv):
    rows = charts.read_sweep(sweep_csv)
    assert len(rows) == 8 and rows[2]["status"] == "no plan"
    fig = charts.bathtub(rows)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "mean prefix hit rate (%)" and "bathtub" in ax.get_title() and ax.get_ylabel()
    _ilp, sim, failed = ax.get_lines()
    assert len(sim.get_xdata()) == 7 and list(failed.get_xdata()) == [40.0]
    ys = list(sim.get_ydata())
    assert ys[0] > min(ys) < ys[-1]  # high at both ends
    assert len(png_bytes(fig)) > 15_000


def test_a_sweep_over_something_else_is_drawn_against_the_swept_value():
    rows = [dict(r, mean_hit_rate=0.9, value=10.0 * (i + 1)) for i, r in enumerate(bathtub_rows())]
    ax = charts.bathtub(rows).axes[0]
    assert "swept value" in ax.get_xlabel() and ax.get_title() == "BCR across the sweep"


@pytest.mark.parametrize("content, message", [
    (None, "cannot read"),
    ("a,b\n1,2\n", "missing columns"),
    ("value,status,ilp_bcr_requests_per_usd,sim_bcr_requests_per_usd\nhigh,ok,1,2\n", "value is not a number"),
])
def test_a_bad_sweep_file_is_an_input_error_naming_the_option(tmp_path, content, message):
    path = tmp_path / "sweep.csv"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InputError, match=f"--sweep: .*{message}"):
        charts.read_sweep(path)


def test_a_baseline_meeting_the_sla_for_nobody_reads_n_a_never_nan():
    from placer.report.tables import baseline_rows

    zero = _plan(0.0, 12).model_copy(update={"baseline": {"verdict": "cannot meet the SLA: the line is too thin"}})
    rows = baseline_rows({"pdd": _plan(1300, 16), "baselines": {"cross-dc-pd": zero}})
    cross = rows[1]
    assert cross["bcr_x"] == "n/a" and "nan" not in str(cross)
    assert cross["note"] == "cannot meet the SLA: the line is too thin"


def test_a_long_headline_is_wrapped_to_the_figure_and_pdd_at_its_best_bcr_has_its_bar():
    """The title is the headline's first line, which grows with each baseline it names: it breaks into
    lines the figure's width holds, never one line running off both edges (issue 45)."""
    partial = ["baseline same-dc-pd", "cannot carry the whole offered load; shown at the load it can"]
    comparison = {"pdd": _plan(1300, 16), "pdd_best_within_inventory": _plan(1400, 12, served_rps=3.0),
                  "baselines": {"same-dc-pd": _plan(1350, 12, partial, 2.5), "prfaas": _plan(1340, 12, partial, 2.6),
                                "agg": _plan(1200, 14)}}
    fig = charts.baseline_bars(comparison)
    title = fig._suptitle.get_text()
    width = int(fig.get_figwidth() * 72 / (0.55 * 10))
    assert "its best BCR" in title and len(title.splitlines()) >= 3
    assert max(len(line) for line in title.splitlines()) <= width
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks[:2] == ["PDD", "PDD, best BCR*"] and "PrfaaS*" in ticks
