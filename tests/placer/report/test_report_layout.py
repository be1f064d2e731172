"""The report's layout (issue 44, stumble 11): no table clipped at 1920 px, bar and scatter
labels that do not overlap, and the TTFT CDF's title and caption giving one count in one word."""

from __future__ import annotations

import itertools
import math
import re

import pytest

from placer.plan import Metrics, Plan, PoolOut
from placer.report import charts, panels
from placer.report.headline import headline
from tests.placer.service.dashboard.support import browser_missing, chromium


def _plan(bcr: float, cost: float, served: float = 16.0, baseline: dict | None = None) -> Plan:
    extra = {"baseline": baseline} if baseline else {}
    return Plan(scenario="s", pools=[PoolOut(role="P", datacenter="a", chip="H100-SXM", tp=1, count=1)],
                metrics=Metrics(bcr_requests_per_usd=bcr, cost_usd_per_h=cost, goodput_rps=bcr * cost / 3600,
                                served_rps=served, offered_rps=16.0), **extra)


#: The user scenario's comparison as the report drew it: seven bars, two scaled twins at one
#: cost and near one goodput, two iso-BCR lines 7 % apart.
COMPARISON = {
    "pdd": _plan(506.3, 104.0),
    "baselines": {"same-dc-pd": _plan(629.3, 66.0, 11.67), "cross-dc-pd": _plan(36.8, 20.0, 0.93),
                  "hetero-same-dc-pd": _plan(629.3, 66.0, 11.67, {"same_as": "same-dc-pd"}),
                  "agg": _plan(605.5, 72.0, 12.11)},
    "scaled": {"same-dc-pd": _plan(586.4, 96.0), "agg": _plan(600.0, 96.0)},
}


def _boxes(fig, texts):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    return [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_text() and t.get_visible()]


def _overlaps(boxes):
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]


def test_bar_tick_labels_do_not_overlap_and_the_title_is_one_headline():
    fig = charts.baseline_bars(COMPARISON)
    for ax in fig.axes:
        labels = [t for t in ax.get_xticklabels() if t.get_text()]
        angle = labels[0].get_rotation()
        if angle == 0:
            assert _overlaps(_boxes(fig, labels)) == []
            continue
        # rotated labels are parallel strips: they clear each other when the gap between two
        # anchors, measured across the text, is at least one line of text
        xs = [ax.transData.transform((x, 0))[0] for x in ax.get_xticks()]
        gap_px = min(b - a for a, b in zip(xs, xs[1:])) * math.sin(math.radians(angle))
        line_px = 1.2 * labels[0].get_fontsize() * fig.dpi / 72
        assert gap_px >= line_px, (gap_px, line_px)
    # the title is the headline's first line alone (no hints), wrapped to the figure's width
    title = fig._suptitle.get_text()
    first = headline(COMPARISON).splitlines()[0]
    assert "hint:" not in title and " ".join(title.splitlines()) == f"PDD beside the PD baselines (s) {first}"


def test_scatter_labels_do_not_overlap_each_other():
    fig = panels.cost_vs_goodput(COMPARISON)
    ax = fig.axes[0]
    texts = [t for t in ax.texts if t.get_text()]
    assert _overlaps(_boxes(fig, texts)) == []
    frame = ax.get_window_extent(fig.canvas.get_renderer())
    for name, box in _boxes(fig, texts):
        assert frame.y0 <= box.y0 and box.y1 <= frame.y1, name  # none pushed out of the axes


def test_the_cdf_title_and_caption_give_the_same_count_in_the_same_word(full_report):
    svg = (full_report.html_path.parent / "ttft-cdf.svg").read_text()
    title = re.search(r"(\d+) measured requests per plan", svg)
    assert title, "the CDF title names the measured requests"
    html = full_report.html_path.read_text()
    caption = re.search(r'id="ttft-cdf">.*?<figcaption>(.*?)</figcaption>', html, re.S).group(1)
    counts = re.findall(r"(\d+) (\w+) requests per plan", caption)
    assert counts == [(title.group(1), "measured")], caption


@pytest.mark.skipif(browser_missing() is not None, reason=browser_missing() or "")
@pytest.mark.parametrize("width", [1920, 1280])
def test_no_table_is_clipped_in_a_browser(full_report, width):
    """Every table fits its column at 1920 px; where one cannot (narrow windows), it scrolls
    inside its own box and the page itself never grows sideways."""
    with chromium() as browser:
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(full_report.html_path.as_uri())
        tables = page.evaluate("""() => [...document.querySelectorAll('table')].map(t => ({
            wrapped: t.parentElement.classList.contains('scroll'), need: t.scrollWidth,
            room: t.parentElement.clientWidth}))""")
        assert tables and all(t["wrapped"] for t in tables), tables
        if width == 1920:
            assert all(t["need"] <= t["room"] for t in tables), tables
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
