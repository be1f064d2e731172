"""The plan diagram: datacenters as boxes, pools inside, WAN lines labelled."""

from __future__ import annotations

import itertools

from placer.plan import LinkUse, Plan, PoolOut, Route
from placer.report import plan_diagram
from placer.report.figures import png_bytes, svg_text


def _boxes(fig) -> dict[str, tuple[float, float, float, float]]:
    ax = fig.axes[0]
    out = {}
    for patch in ax.patches:
        gid = patch.get_gid() or ""
        if gid.startswith("dc-"):
            b = patch.get_window_extent()
            out[gid[3:]] = (b.x0, b.y0, b.x1, b.y1)
    return out


def test_the_micro_plan_is_drawn_with_every_pool_and_the_line(micro_plan):
    fig = plan_diagram(micro_plan)
    svg = svg_text(fig)
    assert len(png_bytes(fig)) > 20_000
    for p in micro_plan.pools:
        assert f'id="pool-{p.role}-{p.datacenter}-{p.chip}-tp{p.tp}"' in svg
        assert f"{p.chip}  TP{p.tp}  × {p.count}" in svg
    assert ">dc-a<" in svg and ">dc-b<" in svg
    link = next(l for l in micro_plan.links if l.gbit_per_s_used > 0)
    assert "10 Gbit/s line" in svg
    assert f"{link.src}→{link.dst}: {link.gbit_per_s_used:.2f} Gbit/s" in svg
    assert "prefill" in svg and "main decode" in svg  # the role legend


def _ring_plan(n: int) -> Plan:
    names = [f"region-{i}" for i in range(n)]
    pools = [PoolOut(role="P" if i % 2 else "MD", datacenter=name, chip="H100-SXM", tp=2, count=i + 1)
             for i, name in enumerate(names)]
    links = [LinkUse(src=a, dst=b, gbit_per_s_used=5.0 * i, gbit_per_s_capacity=25.0)
             for i, (a, b) in enumerate(zip(names, names[1:] + names[:1]))]
    return Plan(scenario="ring", pools=pools, links=links)


def test_many_datacenters_are_laid_out_without_overlapping_boxes():
    for n in (3, 4, 5, 8):
        fig = plan_diagram(_ring_plan(n))
        boxes = _boxes(fig)
        assert len(boxes) == n
        for (a, ba), (b, bb) in itertools.combinations(boxes.items(), 2):
            apart = ba[2] <= bb[0] or bb[2] <= ba[0] or ba[3] <= bb[1] or bb[3] <= ba[1]
            assert apart, (n, a, b)
        w, h = fig.get_size_inches()
        assert w < 20 and h < 16  # still a page, not a poster


def test_a_route_across_datacenters_without_line_data_is_drawn_dashed():
    plan = Plan(scenario="hand", pools=[PoolOut(role="P", datacenter="x", chip="H100-SXM", tp=1, count=1),
                                        PoolOut(role="MD", datacenter="y", chip="L40S", tp=1, count=2)],
                routes=[Route(request_class="c", pipeline="P-MD", src="x", dst="y", rps=1.5)])
    svg = svg_text(plan_diagram(plan))
    assert "route without line data" in svg and "x→y: 0.00 Gbit/s, 1.50 req/s" in svg


def test_a_plan_without_pools_still_draws():
    svg = svg_text(plan_diagram(Plan(scenario="empty", pools=[])))
    assert "empty: plan (bcr)" in svg
