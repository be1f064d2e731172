"""Readable terminal rendering of plans, comparisons and simulations (rich).

in:  a Plan, a compare result, a Simulation beside its plan
out: rich renderables; no logic beyond formatting.
"""

from __future__ import annotations

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from placer.plan import Plan
from placer.sim.result import SimResult


def _f(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}"


def metrics_table(plan: Plan, title: str | None = None) -> Table:
    m = plan.metrics
    t = Table(title=title or f"plan for {plan.scenario} (objective {plan.objective})", show_header=False)
    t.add_column("metric", style="bold")
    t.add_column("value", justify="right")
    rows = [
        ("BCR (SLA requests per USD)", _f(m.bcr_requests_per_usd, 2)),
        ("cost (USD/h)", _f(m.cost_usd_per_h, 2)),
        ("SLA goodput (req/s)", _f(m.goodput_rps)),
        ("served / offered (req/s)", f"{_f(m.served_rps)} / {_f(m.offered_rps)}"),
        ("SLA attainment", f"{100 * m.sla_attainment:.1f} %"),
        ("TTFT P50 / P90 / P99 (s)", f"{_f(m.ttft_p50_s)} / {_f(m.ttft_p90_s)} / {_f(m.ttft_p99_s)}"),
        ("TPOT (s)", _f(m.tpot_s, 4)),
        ("WAN (Gbit/s)", _f(m.wan_gbit_per_s, 2)),
        ("RLD share of output tokens", f"{100 * m.rld_token_share:.1f} %"),
        ("solver", f"{plan.solver.backend} {plan.solver.status}, gap {100 * plan.solver.mip_gap:.2f} %, "
                   f"{plan.solver.seconds:.2f} s"),
    ]
    for k, v in rows:
        t.add_row(k, v)
    return t


def pools_table(plan: Plan) -> Table:
    t = Table(title="pools")
    for col in ("role", "datacenter", "chip", "tp", "instances", "chips"):
        t.add_column(col, justify="right" if col in ("tp", "instances", "chips") else "left")
    for p in sorted(plan.pools, key=lambda p: (p.datacenter, ["P", "RLD", "MD", "D"].index(p.role), p.chip, p.tp)):
        t.add_row(p.role, p.datacenter, p.chip, str(p.tp), str(p.count), str(p.count * p.tp))
    return t


def routes_table(plan: Plan) -> Table:
    t = Table(title="routes")
    for col in ("class", "pipeline", "src", "dst", "req/s"):
        t.add_column(col, justify="right" if col == "req/s" else "left")
    for r in plan.routes:
        t.add_row(r.request_class, r.pipeline, r.src, r.dst, _f(r.rps, 4))
    return t


def links_table(plan: Plan) -> Table:
    t = Table(title="WAN links")
    for col in ("src", "dst", "used Gbit/s", "capacity Gbit/s"):
        t.add_column(col, justify="right" if "Gbit" in col else "left")
    for link in plan.links:
        t.add_row(link.src, link.dst, _f(link.gbit_per_s_used, 2), _f(link.gbit_per_s_capacity, 1))
    return t


def binding_table(plan: Plan) -> Table:
    t = Table(title="binding constraints (what one more unit buys)")
    t.add_column("constraint")
    t.add_column("marginal")
    for b in plan.binding:
        t.add_row(escape(b.constraint), escape(b.marginal))
    return t


def plan_view(plan: Plan) -> Group:
    parts = [metrics_table(plan), pools_table(plan), routes_table(plan)]
    if plan.links:
        parts.append(links_table(plan))
    parts.append(Text(f"handoff: {plan.handoff.mode}, catch-up above "
                      f"{plan.handoff.catch_up_threshold_tokens} pending tokens"))
    if plan.binding:
        parts.append(binding_table(plan))
    for note in plan.notes:
        parts.append(Text(f"note: {note}", style="dim"))  # Text: no markup parsing
    return Group(*parts)


def compare_view(result: dict) -> Group:
    pdd: Plan = result["pdd"]
    t = Table(title=f"PDD against the PD baselines ({pdd.scenario})")
    for col in ("plan", "BCR\nreq/USD", "cost\nUSD/h", "goodput\nreq/s", "TTFT P50\ns", "TTFT P90\ns",
                "TTFT P99\ns", "WAN\nGbit/s", "PDD/it\nBCR", "PDD/it\nP90"):
        t.add_column(col, justify="left" if col == "plan" else "right")

    def row(name: str, plan: Plan) -> None:
        m = plan.metrics
        bcr_x = pdd.metrics.bcr_requests_per_usd / m.bcr_requests_per_usd if m.bcr_requests_per_usd else float("nan")
        p90_x = pdd.metrics.ttft_p90_s / m.ttft_p90_s if m.ttft_p90_s else float("nan")
        t.add_row(name, _f(m.bcr_requests_per_usd, 2), _f(m.cost_usd_per_h, 2), _f(m.goodput_rps), _f(m.ttft_p50_s),
                  _f(m.ttft_p90_s), _f(m.ttft_p99_s), _f(m.wan_gbit_per_s, 2), _f(bcr_x, 3), _f(p90_x, 3))

    row("pdd", pdd)
    notes = []
    for name, plan in result["baselines"].items():
        if isinstance(plan, Plan):
            row(name, plan)
            notes += [Text(f"{name}: {n}", style="dim") for n in plan.notes[1:2] if n.startswith("cannot")]
        else:
            t.add_row(name, "-", *["-"] * 8)
            notes.append(Text(f"{name}: {plan['error']}", style="red"))
    return Group(t, *notes, *_break_even_lines(result.get("break_even")))


def _break_even_lines(answers: dict | None) -> list[Text]:
    """The break-even answers of `placer compare` (placer.breakeven), one line each."""
    if not answers:
        return []
    if "error" in answers:
        return [Text(f"break-even: {answers['error']}", style="red")]
    return [Text(f"break-even: {a['question']}: {a['answer']} ({a['resolves']} re-solves, {a['seconds']:.1f} s)")
            for a in answers.values()]


def simulate_view(result: SimResult, plan: Plan) -> Group:
    """Rich renderables of a simulation: headline figures, routes, pools, links."""
    d = result.data
    head = Table(title=f"simulation of {plan.scenario} ({d['requests']} requests, seed {d['seed']})")
    head.add_column("metric", style="bold")
    head.add_column("simulated", justify="right")
    head.add_column("planned (ILP)", justify="right")
    m = plan.metrics
    rows = [
        ("BCR (SLA requests per USD)", f"{d['bcr_requests_per_usd']:.2f}", f"{m.bcr_requests_per_usd:.2f}"),
        ("SLA goodput (req/s)", f"{d['goodput_rps']:.3f}", f"{m.goodput_rps:.3f}"),
        ("SLA attainment", f"{100 * d['sla_attainment']:.1f} %", f"{100 * m.sla_attainment:.1f} %"),
        ("TTFT P50 / P90 / P99 (s)", f"{d['ttft_p50_s']:.3f} / {d['ttft_p90_s']:.3f} / {d['ttft_p99_s']:.3f}",
         f"{m.ttft_p50_s:.3f} / {m.ttft_p90_s:.3f} / {m.ttft_p99_s:.3f}"),
        ("TPOT P50 / P90 (s)", f"{d['tpot_p50_s']:.4f} / {d['tpot_p90_s']:.4f}", f"{m.tpot_s:.4f}"),
        ("RLD share of output tokens", f"{100 * d['rld_token_share']:.1f} %", f"{100 * m.rld_token_share:.1f} %"),
        ("served / offered (req/s)", f"{d['served_rps']:.3f} / {d['offered_rps']:.3f}", f"{m.served_rps:.3f}"),
        ("handoffs one-shot / catch-up", f"{d['handoffs']['one-shot']} / {d['handoffs']['catch-up']}", ""),
        ("prefix hit P / decode side", f"{d['p_hit_rate']:.3f} / {d['drc_hit_rate']:.3f}", ""),
    ]
    for r in rows:
        head.add_row(*r)
    routes = Table(title="routes")
    for col in ("pipeline", "src", "dst", "share", "TTFT P50", "P90", "P99", "SLA"):
        routes.add_column(col, justify="left" if col in ("pipeline", "src", "dst") else "right")
    for r in d["routes"]:
        routes.add_row(r["pipeline"], r["src"], r["dst"], f"{100 * r['share']:.1f} %", f"{r['ttft_p50_s']:.3f}",
                       f"{r['ttft_p90_s']:.3f}", f"{r['ttft_p99_s']:.3f}", f"{100 * r['sla_attainment']:.1f} %")
    pools = Table(title="pools")
    for col in ("role", "datacenter", "chip", "tp", "n", "utilisation", "mean batch", "mean / max queue"):
        pools.add_column(col, justify="left" if col in ("role", "datacenter", "chip") else "right")
    for p in d["pools"]:
        pools.add_row(p["role"], p["datacenter"], p["chip"], str(p["tp"]), str(p["count"]),
                      f"{100 * p['utilization']:.1f} %", f"{p['mean_batch']:.1f}" if "mean_batch" in p else "-",
                      f"{p['mean_queue']:.2f} / {p['max_queue']}")
    links = Table(title="links")
    for col in ("line", "capacity", "mean", "peak", "transfers"):
        links.add_column(col, justify="left" if col == "line" else "right")
    for link in d["links"]:
        if link["transfers"]:
            links.add_row(f"{link['src']} -> {link['dst']}", f"{link['gbit_per_s_capacity']:g} Gbit/s",
                          f"{link['mean_gbit_per_s']:.2f}", f"{link['peak_gbit_per_s']:.2f}", str(link["transfers"]))
    return Group(head, routes, pools, links)
