"""The plan as a picture: datacenters as boxes, pools inside, WAN lines between them.

in:  a :class:`~placer.plan.Plan` (and, optionally, the scenario's datacenter order)
out: a matplotlib Figure (drawn in inches: one data unit is one inch on the page)

Each datacenter box lists its pools as ``role · chip · TP t × count`` with a coloured
role badge, its chips in use and its in-datacenter traffic. Each WAN line is one edge
per datacenter pair, labelled with its capacity and the Gbit/s (and req/s) the plan
sends each way; its width and colour grow with the busier direction's utilisation.
SVG ids: ``dc-<name>``, ``pool-<role>-<dc>-<chip>-tp<t>``, ``link-<a>-<b>``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from placer.pdd import MD, P, RLD, ROLES, D
from placer.plan import Plan
from placer.report.figures import new_figure, safe_id

ROLE_ORDER = ROLES
ROLE_COLOR = {P: "#3b6fb6", RLD: "#d9821e", MD: "#2e8b57", D: "#8a5cb8"}
ROLE_NAME = {P: "prefill", RLD: "relay decode", MD: "main decode", D: "decode (PD baseline)"}
IDLE_COLOR = "#9aa0a6"

# layout constants, inches
ROW_H = 0.30
TITLE_H = 0.62
PAD = 0.16
BADGE_W = 0.50
CHAR_W = 0.074  # 9 pt DejaVu Sans, average advance
MIN_BOX_W = 2.1
MARGIN = 0.45


@dataclass
class _Box:
    name: str
    pools: list = field(default_factory=list)
    local_rps: float = 0.0
    x: float = 0.0  # centre
    y: float = 0.0

    def lines(self) -> list[str]:
        return [f"{p.chip}  TP{p.tp}  × {p.count}" for p in self.pools]

    @property
    def width(self) -> float:
        longest = max([len(s) for s in self.lines()] + [len(self.name) + 2, 18])
        return max(MIN_BOX_W, longest * CHAR_W + BADGE_W + 2 * PAD)

    @property
    def height(self) -> float:
        rows = len(self.pools) + (1 if self.local_rps > 0 else 0)
        return TITLE_H + rows * ROW_H + PAD


def datacenter_order(plan: Plan, scenario_names: list[str] | None = None) -> list[str]:
    """Scenario order first (when known), then anything else the plan names, in order seen."""
    names = list(scenario_names or [])
    for p in plan.pools:
        names.append(p.datacenter)
    for link in plan.links:
        names += [link.src, link.dst]
    for r in plan.routes:
        names += [r.src, r.dst]
    return _walk(list(dict.fromkeys(names)), plan)


def _walk(names: list[str], plan: Plan) -> list[str]:
    """``names`` reordered by a depth-first walk of the WAN lines, so that chains and
    rings of datacenters sit next to each other on the ring layout (fewer crossings)."""
    nbrs: dict[str, list[str]] = {n: [] for n in names}
    for link in plan.links:
        if link.src in nbrs and link.dst in nbrs:
            nbrs[link.src].append(link.dst)
            nbrs[link.dst].append(link.src)
    rank = {n: i for i, n in enumerate(names)}
    seen: list[str] = []
    for n in names:
        if n not in seen:
            _visit(n, nbrs, rank, seen)
    return seen


def _visit(n: str, nbrs: dict[str, list[str]], rank: dict[str, int], seen: list[str]) -> None:
    """Depth first from ``n``, neighbours in ``rank`` order, appending to ``seen``."""
    seen.append(n)
    for m in sorted(set(nbrs[n]), key=rank.__getitem__):
        if m not in seen:
            _visit(m, nbrs, rank, seen)


def _layout(boxes: list[_Box]) -> None:
    n = len(boxes)
    if n == 0:
        return
    max_w = max(b.width for b in boxes)
    max_h = max(b.height for b in boxes)
    if n == 1:
        return
    if n == 2:
        gap = 3.1  # room for the line's label between the boxes
        boxes[0].x, boxes[1].x = -(boxes[0].width / 2 + gap / 2), boxes[1].width / 2 + gap / 2
        return
    s = math.sin(math.pi / n)
    rx = (max_w + 1.6) / (2 * s)
    ry = max((max_h + 1.0) / (2 * s), 0.55 * rx)
    if n == 4:  # a square reads better than a diamond
        offsets = [(-1, 1), (1, 1), (1, -1), (-1, -1)]
        for b, (ox, oy) in zip(boxes, offsets):
            b.x, b.y = ox * (max_w / 2 + 1.7), oy * (max_h / 2 + 0.9)
        return
    for i, b in enumerate(boxes):
        a = math.pi / 2 - 2 * math.pi * i / n
        b.x, b.y = rx * math.cos(a), ry * math.sin(a)


def _util_color(util: float) -> str:
    if util <= 0:
        return IDLE_COLOR
    if util < 0.5:
        return "#2e8b57"
    if util < 0.85:
        return "#d9821e"
    return "#c0392b"


def _fmt(x: float) -> str:
    return f"{x:.2f}" if x < 100 else f"{x:.0f}"


def _boxes(plan: Plan, order: list[str]) -> tuple[dict[str, _Box], dict[tuple[str, str], float]]:
    """One box per datacenter with its pools (by role) and in-datacenter req/s; req/s per line."""
    boxes = {name: _Box(name) for name in order}
    for p in sorted(plan.pools, key=lambda p: (ROLE_ORDER.index(p.role), p.chip, p.tp)):
        if p.count > 0:
            boxes[p.datacenter].pools.append(p)
    route_rps: dict[tuple[str, str], float] = defaultdict(float)
    for r in plan.routes:
        if r.src == r.dst:
            boxes[r.src].local_rps += r.rps
        else:
            route_rps[(r.src, r.dst)] += r.rps
    return boxes, route_rps


def _edges(plan: Plan, route_rps: dict[tuple[str, str], float]) -> dict[frozenset, dict]:
    """One edge per datacenter pair: capacity and planned use each way (routes without a line marked)."""
    edges: dict[frozenset, dict] = {}
    for link in plan.links:
        e = edges.setdefault(frozenset((link.src, link.dst)), {"ends": (link.src, link.dst), "dirs": {}})
        e["dirs"][(link.src, link.dst)] = (link.gbit_per_s_used, link.gbit_per_s_capacity)
    for (s, d) in route_rps:
        edges.setdefault(frozenset((s, d)), {"ends": (s, d), "dirs": {}, "no_link": True})
    return edges


def _canvas(box_list: list[_Box]):
    """A figure sized to the laid-out boxes plus a header and a legend; (fig, ax, (x0, x1, y0, y1))."""
    if box_list:
        xs0 = min(b.x - b.width / 2 for b in box_list)
        xs1 = max(b.x + b.width / 2 for b in box_list)
        ys0 = min(b.y - b.height / 2 for b in box_list)
        ys1 = max(b.y + b.height / 2 for b in box_list)
    else:
        xs0, xs1, ys0, ys1 = -2.0, 2.0, -0.5, 0.5
    head_h, foot_h = 0.85, 0.45
    x0, x1 = xs0 - MARGIN, max(xs1 + MARGIN, xs0 - MARGIN + 7.2)
    y0, y1 = ys0 - MARGIN - foot_h, ys1 + MARGIN + head_h
    width, height = x1 - x0, y1 - y0
    fig = new_figure(width, height)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax, (x0, x1, y0, y1)


def _draw_header(ax, plan: Plan, title: str | None, x0: float, y1: float) -> None:
    m = plan.metrics
    ax.text(x0 + 0.2, y1 - 0.3, title or f"{plan.scenario}: plan ({plan.objective})", fontsize=13,
            fontweight="bold", va="center", ha="left")
    ax.text(x0 + 0.2, y1 - 0.62,
            f"BCR {m.bcr_requests_per_usd:.1f} req/USD · cost {m.cost_usd_per_h:.2f} USD/h · "
            f"goodput {m.goodput_rps:.2f} req/s · TTFT P90 {m.ttft_p90_s:.2f} s · WAN {m.wan_gbit_per_s:.2f} Gbit/s",
            fontsize=9, color="#444444", va="center", ha="left")


def _edge_label(e: dict, a: str, b: str, route_rps: dict[tuple[str, str], float]) -> list[str]:
    """The line's capacity, then the Gbit/s (share) and req/s each way it carries; 'idle' when none."""
    caps = sorted({c for _, c in e["dirs"].values()})
    if e.get("no_link"):
        lines = ["route without line data"]
    elif len(caps) == 1:
        lines = [f"{caps[0]:g} Gbit/s line"]
    else:
        lines = [" / ".join(f"{s}→{d} {c:g}" for (s, d), (_, c) in e["dirs"].items()) + " Gbit/s"]
    for (s, d) in ((a, b), (b, a)):
        used, cap = e["dirs"].get((s, d), (0.0, 0.0))
        rps = route_rps.get((s, d), 0.0)
        if used > 0 or rps > 0:
            pct = f" ({100 * used / cap:.0f} %)" if cap > 0 else ""
            lines.append(f"{s}→{d}: {_fmt(used)} Gbit/s{pct}, {rps:.2f} req/s")
    if len(lines) == 1 and not e.get("no_link"):
        lines = [lines[0].replace(" line", "") + " · idle"]
    return lines


def _draw_edge(ax, e: dict, boxes: dict[str, _Box], route_rps: dict[tuple[str, str], float]) -> None:
    """One WAN line under the boxes: width and colour from the busier direction's utilisation."""
    a, b = e["ends"]
    if a not in boxes or b not in boxes:
        return
    ba, bb = boxes[a], boxes[b]
    utils = [u / c if c > 0 else (1.0 if u > 0 else 0.0) for u, c in e["dirs"].values()]
    util = max(utils, default=0.0)
    carries = any(u > 0 for u, _ in e["dirs"].values()) or any(route_rps.get(k, 0) > 0 for k in ((a, b), (b, a)))
    color = _util_color(util) if carries else IDLE_COLOR
    line, = ax.plot([ba.x, bb.x], [ba.y, bb.y], color=color, lw=1.4 + 5 * min(util, 1.0),
                    ls=":" if e.get("no_link") else "-", zorder=1, solid_capstyle="round")
    line.set_gid(f"link-{safe_id(a)}-{safe_id(b)}")
    lines = _edge_label(e, a, b, route_rps)
    mx, my = (ba.x + bb.x) / 2, (ba.y + bb.y) / 2
    ax.text(mx, my, "\n".join(lines), fontsize=8, ha="center", va="center", zorder=4, color="#222222",
            linespacing=1.35,
            bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": color, "lw": 0.8, "alpha": 0.95})


def _draw_box(ax, bx: _Box) -> None:
    """One datacenter: frame, name, chips in use, a badge and a line per pool, in-DC traffic."""
    from matplotlib.patches import FancyBboxPatch, Rectangle

    left, top = bx.x - bx.width / 2, bx.y + bx.height / 2
    frame = FancyBboxPatch((left, bx.y - bx.height / 2), bx.width, bx.height,
                           boxstyle="round,pad=0,rounding_size=0.12", fc="#f7f9fc" if bx.pools else "#fbfbfb",
                           ec="#4a5568" if bx.pools else "#b8bec7", lw=1.3, zorder=2)
    frame.set_gid(f"dc-{safe_id(bx.name)}")
    ax.add_patch(frame)
    ax.text(left + PAD, top - 0.24, bx.name, fontsize=11, fontweight="bold", va="center", ha="left", zorder=3)
    chips = sum(p.count * p.tp for p in bx.pools)
    inst = sum(p.count for p in bx.pools)
    sub = f"{chips} chips in {inst} instance{'s' if inst != 1 else ''}" if bx.pools else "no pools"
    ax.text(left + PAD, top - 0.48, sub, fontsize=8, color="#555555", va="center", ha="left", zorder=3)
    y = top - TITLE_H - ROW_H / 2
    for p, text in zip(bx.pools, bx.lines()):
        badge = Rectangle((left + PAD, y - 0.105), BADGE_W - 0.08, 0.21, fc=ROLE_COLOR[p.role], ec="none",
                          zorder=3)
        badge.set_gid(f"pool-{p.role}-{safe_id(p.datacenter)}-{safe_id(p.chip)}-tp{p.tp}")
        ax.add_patch(badge)
        ax.text(left + PAD + (BADGE_W - 0.08) / 2, y, p.role, fontsize=8, fontweight="bold", color="white",
                ha="center", va="center", zorder=4)
        ax.text(left + PAD + BADGE_W, y, text, fontsize=9, ha="left", va="center", zorder=4,
                family="DejaVu Sans")
        y -= ROW_H
    if bx.local_rps > 0:
        ax.text(left + PAD, y, f"in-DC traffic {bx.local_rps:.2f} req/s", fontsize=8, color="#555555",
                ha="left", va="center", zorder=3)


def _draw_legend(ax, plan: Plan, has_edges: bool, x0: float, x1: float, y0: float) -> None:
    """The roles that appear, and (with lines) what a line's width and colour mean."""
    from matplotlib.patches import Rectangle

    roles = [r for r in ROLE_ORDER if any(p.role == r and p.count > 0 for p in plan.pools)]
    lx = x0 + 0.25
    ly = y0 + 0.28
    for r in roles:
        ax.add_patch(Rectangle((lx, ly - 0.09), 0.36, 0.18, fc=ROLE_COLOR[r], ec="none"))
        ax.text(lx + 0.18, ly, r, fontsize=7, color="white", fontweight="bold", ha="center", va="center")
        label = ROLE_NAME[r]
        ax.text(lx + 0.44, ly, label, fontsize=8, ha="left", va="center", color="#333333")
        lx += 0.44 + len(label) * 0.065 + 0.35
    if has_edges:
        ax.text(x1 - 0.2, ly, "line width and colour: planned use of the busier direction", fontsize=7.5,
                color="#666666", ha="right", va="center")


def plan_diagram(plan: Plan, scenario_names: list[str] | None = None, title: str | None = None,
                 fixed_order: bool = False):
    """The plan drawn as datacenter boxes, pools and WAN lines (a matplotlib Figure).

    ``fixed_order``: place the datacenters exactly in ``scenario_names``'s order (then any
    other the plan names), without the walk along the lines — so that two plans drawn side
    by side (a diff) put each datacenter in the same place."""
    if fixed_order:
        order = list(dict.fromkeys([*(scenario_names or []), *datacenter_order(plan)]))
    else:
        order = datacenter_order(plan, scenario_names)
    boxes, route_rps = _boxes(plan, order)
    box_list = [boxes[n] for n in order]
    _layout(box_list)
    edges = _edges(plan, route_rps)
    fig, ax, (x0, x1, y0, y1) = _canvas(box_list)
    _draw_header(ax, plan, title, x0, y1)
    for e in edges.values():  # WAN lines under the boxes
        _draw_edge(ax, e, boxes, route_rps)
    for bx in box_list:
        _draw_box(ax, bx)
    _draw_legend(ax, plan, bool(edges), x0, x1, y0)
    return fig
