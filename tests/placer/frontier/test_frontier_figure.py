"""The frontier figure says what its table says (issue 44, stumble 6): a baseline that carries
part of the load is drawn hollow and its share named; an SLA with no plan is marked and why."""

from __future__ import annotations

import math

from matplotlib.colors import to_rgba

from placer.cli.frontier import reasons
from placer.errors import InfeasiblePlanError, SolveTimeoutError
from placer.frontier import COLUMNS, frontier_figure, no_plan_reason, write_frontier


def _row(value, plan, bcr, served=10.0, status="ok", error=""):
    return {"value": value, "plan": plan, "status": status, "bcr_requests_per_usd": bcr, "cost_usd_per_h": 10.0,
            "goodput_rps": served, "usd_per_million_output_tokens": 1.0 / bcr if bcr else math.nan,
            "usd_per_million_input_tokens": 0.1, "ttft_p90_s": 1.0, "tpot_s": 0.02, "roles": "MD+P",
            "error": error, "served_rps": served, "offered_rps": 10.0}


ROWS = [
    {"value": 0.1, "plan": "pdd", "status": "no plan",
     "error": no_plan_reason(InfeasiblePlanError("the TTFT SLA of 0.1 s cannot be met: class a needs 0.2 s"))},
    _row(0.1, "same-dc-pd", 500, served=6.0, status="partial load"),
    _row(1.0, "pdd", 900), _row(1.0, "same-dc-pd", 950, served=6.0, status="partial load"),
    _row(2.0, "pdd", 1000), _row(2.0, "same-dc-pd", 800),
]


def _hollow(ax, color) -> set[float]:
    """x of the markers drawn with a white face and ``color`` edges."""
    out = set()
    for line in ax.get_lines():
        if line.get_marker() not in (None, "None", "none", "", "x") and \
                to_rgba(line.get_markerfacecolor()) == to_rgba("white") and \
                to_rgba(line.get_markeredgecolor()) == to_rgba(color):
            out |= {float(x) for x in line.get_xdata()}
    return out


def test_a_partial_baseline_is_drawn_hollow_where_it_carries_part_of_the_load():
    fig = frontier_figure(ROWS, "ttft")
    ax_bcr, ax_usd = fig.axes[:2]
    for ax in (ax_bcr, ax_usd):
        assert _hollow(ax, "C1") == {0.1, 1.0}  # same-dc-pd: partial at 0.1 and 1.0, full at 2.0
        assert _hollow(ax, "C0") == set()  # pdd carries the whole load
    labels = [t.get_text() for t in ax_bcr.get_legend().get_texts()]
    assert any(t.startswith("same-dc-pd") and "carries 60 % of the load" in t for t in labels), labels
    assert any("hollow marker" in t for t in labels)


def test_an_sla_without_a_plan_is_marked_with_the_reasons_kind():
    fig = frontier_figure(ROWS, "ttft")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(t.startswith("pdd") and "no plan at 0.1 s: infeasible" in t for t in labels), labels
    crosses = [line for line in fig.axes[0].get_lines() if line.get_marker() == "x"]
    assert [float(x) for line in crosses for x in line.get_xdata()] == [0.1]


def test_the_table_says_why_there_is_no_plan_and_what_share_a_partial_one_carries():
    lines = reasons(ROWS, "ttft")
    assert lines[0] == ("ttft 0.1 s, pdd: no plan: infeasible: the TTFT SLA of 0.1 s cannot be met: "
                        "class a needs 0.2 s")
    assert "ttft 1 s, same-dc-pd: partial load: carries 6.00 of the 10 req/s offered (60 %)" in lines[2]
    assert no_plan_reason(SolveTimeoutError(5)).startswith("time limit: no feasible plan found within")


def test_the_csv_keeps_the_load_each_point_carries(tmp_path):
    csv_path, png = write_frontier(ROWS, tmp_path, "ttft")
    header = csv_path.read_text().splitlines()[0].split(",")
    assert header == list(COLUMNS) and {"served_rps", "offered_rps"} <= set(header)
    assert png.read_bytes()[:4] == b"\x89PNG"
